// Lowering of placement hints: `shard(w, tp=S1, dp=R)` in a model or block
// body sets the sharding of a parameter or input (every copy of a block's
// parameter gets it). Hints only say how an argument is placed on a mesh
// axis; whether the mesh at hand has that axis is decided later.
#include "frontend/Lower.h"

#include "ir/Sharding.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

namespace mgc::frontend {

namespace {

// How a short expression reads in a message (placements are names, so a
// malformed one is usually small).
std::string exprText(const Expr &e) {
  switch (e.kind) {
  case ExprKind::Int:
    return std::to_string(e.intValue);
  case ExprKind::Float:
    return ir::formatDouble(e.floatValue);
  case ExprKind::Bool:
    return e.boolValue ? "true" : "false";
  case ExprKind::Name:
    return e.name;
  case ExprKind::List: {
    std::string s = "[";
    for (size_t i = 0; i < e.args.size(); ++i)
      s += (i ? ", " : "") + exprText(*e.args[i]);
    return s + "]";
  }
  case ExprKind::Unary:
    return "-" + exprText(*e.args[0]);
  case ExprKind::Binary:
    return exprText(*e.args[0]) + e.op + exprText(*e.args[1]);
  case ExprKind::Call: {
    std::string s = e.name + "(";
    size_t n = 0;
    for (const ExprPtr &a : e.args)
      s += (n++ ? ", " : "") + exprText(*a);
    for (const KeywordArg &kw : e.kwargs)
      s += (n++ ? ", " : "") + kw.name + "=" + exprText(*kw.value);
    return s + ")";
  }
  }
  return "?";
}

const char *kHintForm = "shard(NAME, AXIS=PLACEMENT, ...), as in "
                        "shard(w, tp=S1)";

} // namespace

ir::Value *Lowerer::hintTarget(const Expr &nameExpr, Frame &frame) {
  const std::string &name = nameExpr.name;
  auto it = frame.names.find(name);
  if (it == frame.names.end()) {
    // Declared further down the same body: say so rather than "unknown".
    if (frame.body)
      for (const Stmt &s : *frame.body)
        if ((s.kind == StmtKind::Param || s.kind == StmtKind::Input) &&
            s.name == name) {
          error(nameExpr.loc, "'" + name +
                                  "' is declared after this hint; a hint "
                                  "follows the declaration it names");
          note(s.nameLoc, "'" + name + "' is declared here");
          return nullptr;
        }
    std::vector<std::string> arguments;
    for (auto &[n, b] : frame.names)
      if (b.kind == BindingKind::Param || b.kind == BindingKind::Input)
        arguments.push_back(n);
    std::string where =
        frame.block
            ? "parameter '" + name + "' in block '" + frame.block->name + "'"
            : "parameter or input '" + name + "' in the model";
    std::string hint = consts_.count(name)
                           ? "; '" + name +
                                 "' is a constant: hints apply to parameters "
                                 "and inputs"
                           : suggest(name, arguments);
    error(nameExpr.loc, "no " + where + hint);
    return nullptr;
  }
  const Binding &b = it->second;
  if (b.kind == BindingKind::Arg || b.kind == BindingKind::Local) {
    std::string is = b.kind == BindingKind::Arg
                         ? "an argument of block '" + frame.block->name +
                               "', not a parameter; hint the tensor where "
                               "it is declared"
                         : "a value computed here, not a parameter or "
                           "input; hints apply to parameters and inputs";
    error(nameExpr.loc, "cannot hint '" + name + "': it is " + is);
    note(b.loc, "'" + name + "' is defined here");
    return nullptr;
  }
  // Poison: its declaration had an error, already reported.
  return b.val.kind == Val::Tensor ? b.val.tensor : nullptr;
}

std::optional<ir::Placement> Lowerer::hintPlacement(const Expr &e,
                                                    const ir::Value &target,
                                                    const std::string &what) {
  Loc loc = startLoc(e);
  const char *expected = "expected R (replicated) or S<dim> (split along a "
                         "dimension: S0, S1, ..., S-1 for the last)";
  std::string digits;
  bool negative = false;
  if (e.kind == ExprKind::Name) {
    if (e.name == "R")
      return ir::Placement::replicate();
    if (e.name == "P") {
      error(loc, "placement P (partial sums) cannot be a hint: " + what +
                     " holds whole values, never partial sums; use R or "
                     "S<dim>");
      return std::nullopt;
    }
    if (e.name.size() >= 2 && e.name[0] == 'S')
      digits = e.name.substr(1);
  } else if (e.kind == ExprKind::Binary && e.op == '-' &&
             e.args[0]->kind == ExprKind::Name && e.args[0]->name == "S" &&
             e.args[1]->kind == ExprKind::Int) {
    digits = std::to_string(e.args[1]->intValue);
    negative = true;
  }
  if (digits.empty() || !llvm::all_of(digits, llvm::isDigit)) {
    error(loc, "malformed placement '" + exprText(e) + "'; " + expected);
    return std::nullopt;
  }
  const ir::TensorType &type = target.type();
  int64_t rank = type.rank();
  int64_t dim = 0;
  bool tooLarge = llvm::StringRef(digits).getAsInteger(10, dim);
  if (negative)
    dim = -dim;
  if (tooLarge || dim >= rank || dim < -rank) {
    std::string valid =
        rank == 0 ? "a scalar has no dimension to split"
                  : "its dimensions are 0.." + std::to_string(rank - 1) +
                        " (or -" + std::to_string(rank) + "..-1 from the end)";
    error(loc, "cannot split " + what + " of type " + type.str() +
                   " along dimension " + (negative ? "-" : "") + digits + ": " +
                   valid);
    return std::nullopt;
  }
  return ir::Placement::split(dim < 0 ? dim + rank : dim);
}

void Lowerer::lowerShard(const Stmt &s, Frame &frame) {
  const Expr &call = *s.value;
  if (call.args.empty() || call.args[0]->kind != ExprKind::Name) {
    Loc loc = call.args.empty() ? call.loc : startLoc(*call.args[0]);
    error(loc,
          std::string("a hint names a parameter or input first: ") + kHintForm);
    return;
  }
  if (call.args.size() > 1) {
    error(startLoc(*call.args[1]),
          "expected AXIS=PLACEMENT after the name, got '" +
              exprText(*call.args[1]) + "': " + kHintForm);
    return;
  }
  if (call.kwargs.empty()) {
    error(call.loc, "the hint for '" + call.args[0]->name +
                        "' gives no placement: " + kHintForm);
    return;
  }
  ir::Value *target = hintTarget(*call.args[0], frame);
  // Messages name the declared name, not the qualified one, so that a bad
  // hint in a block is reported once, not once per copy.
  const std::string &name = call.args[0]->name;
  std::string what =
      (target && target->kind() == ir::ValueKind::Input ? "input '"
                                                        : "parameter '") +
      name + "'";
  ir::Sharding sharding = target ? target->sharding() : ir::Sharding();
  for (const KeywordArg &kw : call.kwargs) {
    if (ir::knownAxisIndex(kw.name) < 0) {
      std::string hint = suggest(kw.name, ir::knownAxisNames());
      if (hint.empty() &&
          ir::knownAxisIndex(llvm::StringRef(kw.name).lower()) >= 0)
        hint = "; did you mean '" + llvm::StringRef(kw.name).lower() + "'?";
      error(kw.loc, "unknown mesh axis '" + kw.name + "'" + hint +
                        " (mesh axes: " + ir::knownAxesList() + ")");
      continue;
    }
    if (kw.name == ir::kPipelineAxis) {
      error(kw.loc, "mesh axis '" + kw.name +
                        "' is the pipeline's: it splits the layers into "
                        "stages, not values (hint dp or tp)");
      continue;
    }
    if (!target)
      continue; // the name was reported; still check the axes above
    std::map<std::string, Loc> &seen = hintLocs_[target];
    auto prev = seen.find(kw.name);
    if (prev != seen.end()) {
      error(kw.loc, "mesh axis '" + kw.name + "' is hinted twice for " + what);
      note(prev->second, "the previous hint for '" + kw.name + "' is here");
      continue;
    }
    seen[kw.name] = kw.loc;
    if (std::optional<ir::Placement> p =
            hintPlacement(*kw.value, *target, what))
      sharding.set(kw.name, *p);
  }
  if (!target)
    return;
  // Axes in mesh nesting order (dp before tp), however the hints list them.
  ir::Sharding ordered;
  for (const ir::MeshAxisKind &axis : ir::kMeshAxisKinds)
    if (const ir::Placement *p = sharding.find(axis.name))
      ordered.set(axis.name, *p);
  target->setSharding(std::move(ordered));
}

} // namespace mgc::frontend
