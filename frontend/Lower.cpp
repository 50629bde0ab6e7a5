#include "frontend/Lower.h"

#include "frontend/Builtins.h"
#include "support/Suggest.h"

#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <functional>

namespace mgc::frontend {

using ir::TensorType;

Lowerer::Lowerer(const char *fileName, const CompileOptions &options,
                 DiagnosticEngine &diag)
    : file_(fileName), options_(options), diag_(diag) {}

// ---- Reporting ----

bool Lowerer::error(Loc loc, const std::string &msg) {
  lastPrinted_ = reported_.insert({loc.str(), msg}).second;
  if (lastPrinted_)
    diag_.error(loc, msg);
  return lastPrinted_;
}

void Lowerer::note(Loc loc, const std::string &msg) {
  if (lastPrinted_)
    diag_.note(loc, msg);
}

std::string Lowerer::suggest(llvm::StringRef name,
                             const std::vector<std::string> &candidates) {
  return didYouMean(name, candidates);
}

// ---- Blocks ----

void Lowerer::collectBlocks(const FileAST &file) {
  for (const BlockDecl &b : file.blocks) {
    auto prev = blocks_.find(b.name);
    if (prev != blocks_.end()) {
      error(b.loc, "duplicate definition of block '" + b.name + "'");
      note(prev->second->loc, "previous definition is here");
      continue;
    }
    // A model's own block shadows a built-in of its name, as a Python
    // definition shadows a builtin: a new built-in never breaks a model
    // written before it.
    if (lookupBuiltin(b.name))
      diag_.note(b.loc, "block '" + b.name + "' shadows the built-in " +
                            "function of that name: the model's calls of '" +
                            b.name + "' call the block");
    blocks_[b.name] = &b;
  }
}

// Blocks are inlined at every call, so a cycle of calls would never end:
// find cycles up front and report each at the call that closes it.
void Lowerer::checkRecursion() {
  std::map<const BlockDecl *, std::vector<std::pair<const BlockDecl *, Loc>>>
      calls;
  std::function<void(const Expr &, const BlockDecl *)> walk =
      [&](const Expr &e, const BlockDecl *from) {
        if (e.kind == ExprKind::Call) {
          auto it = blocks_.find(e.name);
          if (it != blocks_.end())
            calls[from].push_back({it->second, e.loc});
        }
        for (const ExprPtr &a : e.args)
          if (a)
            walk(*a, from);
        for (const KeywordArg &kw : e.kwargs)
          if (kw.value)
            walk(*kw.value, from);
      };
  for (auto &[name, b] : blocks_)
    for (const Stmt &s : b->body) {
      if (s.kind == StmtKind::Shard)
        continue; // a hint, not a call
      if (s.value)
        walk(*s.value, b);
      if (s.count)
        walk(*s.count, b);
    }
  enum Color { White, Grey, Black };
  std::map<const BlockDecl *, Color> color;
  std::vector<const BlockDecl *> stack;
  std::function<void(const BlockDecl *)> dfs = [&](const BlockDecl *b) {
    color[b] = Grey;
    stack.push_back(b);
    for (auto &[callee, loc] : calls[b]) {
      if (color[callee] == Grey) {
        std::string cycle;
        auto it = std::find(stack.begin(), stack.end(), callee);
        for (; it != stack.end(); ++it) {
          cycle += (*it)->name + " -> ";
          badBlocks_.insert(*it);
        }
        error(loc, "block '" + callee->name + "' is called recursively (" +
                       cycle + callee->name +
                       "); blocks are expanded inline and cannot recurse");
      } else if (color[callee] == White) {
        dfs(callee);
      }
    }
    stack.pop_back();
    color[b] = Black;
  };
  for (auto &[name, b] : blocks_)
    if (color[b] == White)
      dfs(b);
}

// ---- Statements ----

bool Lowerer::checkNewName(const std::string &name, Loc loc, Frame &frame) {
  auto prev = frame.names.find(name);
  if (prev != frame.names.end()) {
    error(loc, "duplicate definition of '" + name + "'");
    note(prev->second.loc, "previous definition is here");
    return false;
  }
  auto c = consts_.find(name);
  if (c != consts_.end()) {
    error(loc, "'" + name + "' is already defined as a constant");
    note(c->second.loc, "previous definition is here");
    return false;
  }
  return true;
}

void Lowerer::lowerStmts(const std::vector<Stmt> &stmts, Frame &frame) {
  for (const Stmt &s : stmts) {
    if (aborted_)
      return;
    if (frame.returned) {
      error(s.loc, "statement after 'return'");
      return;
    }
    lowerStmt(s, frame);
  }
}

// The batch is declared by how it is written, never guessed from sizes:
// the first input's leading dimension (`B` in `tokens: i32[B, T]`) is the
// batch, and an input whose leading dimension is written otherwise
// (`pos: i32[T]`, even where T = B) is not batched: it gets the hint dp=R,
// whole on every data-parallel device (a shard() hint may say otherwise).
void Lowerer::markBatch(const TypeExpr &type, ir::Value *input) {
  if (type.dims.empty())
    return;
  const Expr &lead = *type.dims.front();
  std::string written = lead.kind == ExprKind::Name  ? "name " + lead.name
                        : lead.kind == ExprKind::Int ? "int " +
                                                         std::to_string(
                                                             lead.intValue)
                                                     : "";
  if (!batchDim_) {
    batchDim_ = written.empty() ? "input " + input->name() : written;
    return;
  }
  if (written != *batchDim_) {
    ir::Sharding hint = input->sharding();
    hint.set(ir::kDataAxis, ir::Placement::replicate());
    input->setSharding(hint);
  }
}

void Lowerer::lowerStmt(const Stmt &s, Frame &frame) {
  bool inBlock = frame.block != nullptr;
  switch (s.kind) {
  case StmtKind::Input: {
    if (inBlock) {
      error(s.loc, "inputs are declared in the model; a block takes its "
                   "inputs as arguments");
      return;
    }
    std::optional<TensorType> type = evalType(s.type);
    if (!checkNewName(s.name, s.nameLoc, frame) || !type) {
      frame.names[s.name] =
          Binding{Val::poison(), s.nameLoc, BindingKind::Input};
      return;
    }
    argumentNames_.insert(s.name);
    ir::Value *v = module_->graph().addInput(s.name, *type, s.nameLoc);
    markBatch(s.type, v);
    frame.names[s.name] =
        Binding{Val::ofTensor(v), s.nameLoc, BindingKind::Input};
    return;
  }
  case StmtKind::Param: {
    std::optional<TensorType> type = evalType(s.type);
    std::optional<ir::Init> init =
        type ? evalInit(s.init.get(), *type) : std::nullopt;
    if (!checkNewName(s.name, s.nameLoc, frame) || !type || !init) {
      frame.names.emplace(
          s.name, Binding{Val::poison(), s.nameLoc, BindingKind::Param});
      return;
    }
    if (init->kind == ir::InitKind::Xavier && type->rank() < 2) {
      error(s.init->loc, "xavier initialisation needs a parameter of rank at "
                         "least 2, got " +
                             type->str());
      frame.names[s.name] =
          Binding{Val::poison(), s.nameLoc, BindingKind::Param};
      return;
    }
    std::string full = qualify(frame, s.name);
    if (!argumentNames_.insert(full).second) {
      error(s.nameLoc, "parameter name '" + full +
                           "' is already used by another argument");
      frame.names[s.name] =
          Binding{Val::poison(), s.nameLoc, BindingKind::Param};
      return;
    }
    ir::Value *v = module_->graph().addParam(full, *type, *init, s.nameLoc);
    v->setFrozen(s.frozen);
    frame.names[s.name] =
        Binding{Val::ofTensor(v), s.nameLoc, BindingKind::Param};
    return;
  }
  case StmtKind::Assign: {
    auto prev = frame.names.find(s.name);
    if (prev != frame.names.end() &&
        (prev->second.kind == BindingKind::Input ||
         prev->second.kind == BindingKind::Param)) {
      error(s.nameLoc,
            std::string("cannot assign to ") +
                (prev->second.kind == BindingKind::Input ? "input"
                                                         : "parameter") +
                " '" + s.name + "'");
      note(prev->second.loc, "'" + s.name + "' is declared here");
      return;
    }
    if (consts_.count(s.name)) {
      error(s.nameLoc, "cannot assign to constant '" + s.name + "'");
      note(consts_[s.name].loc, "'" + s.name + "' is declared here");
      return;
    }
    Val v = lowerExpr(*s.value, frame);
    frame.names[s.name] = Binding{v, s.nameLoc, BindingKind::Local};
    return;
  }
  case StmtKind::Repeat:
    lowerRepeat(s, frame);
    return;
  case StmtKind::Shard:
    lowerShard(s, frame);
    return;
  case StmtKind::Output:
  case StmtKind::Loss: {
    bool isLoss = s.kind == StmtKind::Loss;
    if (inBlock) {
      error(s.loc, std::string(isLoss ? "a loss" : "outputs") +
                       " can only be declared in the model; a block returns "
                       "its result");
      return;
    }
    Val v;
    if (s.value) {
      v = lowerExpr(*s.value, frame);
    } else {
      Expr name(ExprKind::Name, s.nameLoc);
      name.name = s.name;
      v = lowerName(name, frame);
    }
    Loc valueLoc = s.value ? s.value->loc : s.nameLoc;
    // `output y = ...` also binds y for later statements: to poison when
    // the value failed, so that its uses are not reported again as unknown.
    auto bind = [&](const Val &value) {
      if (s.value && !frame.names.count(s.name) && !consts_.count(s.name))
        frame.names[s.name] = Binding{value, s.nameLoc, BindingKind::Local};
    };
    if (isLoss && lossStmt_) {
      error(s.loc, "more than one loss: a model has at most one");
      note(lossStmt_->loc, "the first loss is here");
      return;
    }
    auto prev = outputLocs_.find(s.name);
    if (prev != outputLocs_.end()) {
      error(s.nameLoc, "duplicate output '" + s.name + "'");
      note(prev->second, "previous definition is here");
      return;
    }
    outputLocs_[s.name] = s.nameLoc;
    if (isLoss)
      lossStmt_ = &s;
    if (v.isPoison())
      return bind(Val::poison());
    if (v.kind == Val::Num)
      v = Val::ofTensor(toTensor(v, ir::DType::F32, valueLoc));
    if (v.kind != Val::Tensor) {
      error(valueLoc, "an output must be a tensor");
      return bind(Val::poison());
    }
    const TensorType &t = v.tensor->type();
    if (isLoss && (!t.isScalar() || !ir::isFloat(t.dtype))) {
      error(valueLoc,
            "the loss must be a floating-point scalar, got " + t.str());
      return bind(Val::poison());
    }
    module_->graph().addOutput(s.name, v.tensor, isLoss, s.nameLoc);
    bind(v);
    return;
  }
  case StmtKind::Return: {
    if (!inBlock) {
      error(s.loc, "'return' is only allowed in a block; the model names its "
                   "results with 'output' and 'loss'");
      return;
    }
    frame.result = lowerExpr(*s.value, frame);
    frame.returned = true;
    return;
  }
  }
}

void Lowerer::lowerRepeat(const Stmt &s, Frame &frame) {
  std::optional<Number> count = evalConst(*s.count);
  auto carried = frame.names.find(s.name);
  if (carried == frame.names.end()) {
    std::vector<std::string> names;
    for (auto &[n, b] : frame.names)
      names.push_back(n);
    error(s.nameLoc, "'" + s.name + "' must have a value before '" + s.name +
                         " = repeat ...': each copy reads the previous one's "
                         "result" +
                         suggest(s.name, names));
    frame.names[s.name] = Binding{Val::poison(), s.nameLoc, BindingKind::Local};
    return;
  }
  if (carried->second.kind == BindingKind::Input ||
      carried->second.kind == BindingKind::Param) {
    error(s.nameLoc, "cannot assign to '" + s.name + "'");
    note(carried->second.loc, "'" + s.name + "' is declared here");
    return;
  }
  if (!count)
    return;
  std::optional<int64_t> n = count->asInt();
  if (!n || *n < 0 || *n > kMaxRepeat) {
    error(s.count->loc, "repeat count must be an integer in 0.." +
                            std::to_string(kMaxRepeat) + ", got " +
                            count->str());
    return;
  }
  std::string prefix = qualify(frame, s.repeatName);
  module_->repeatLocs()[prefix] = s.count->loc;
  auto [firstUse, fresh] = repeatNames_.insert({prefix, s.repeatNameLoc});
  if (auto instance = instancePaths_.find(prefix);
      fresh && instance != instancePaths_.end()) {
    repeatNames_.erase(firstUse);
    error(s.repeatNameLoc, "the copies of this repeat need a name of their "
                           "own: '" +
                               s.repeatName + "' is already used");
    note(instance->second, "'" + s.repeatName + "' is first used here");
    return;
  }
  if (!fresh) {
    error(s.repeatNameLoc, "the copies of this repeat need a name of their "
                           "own: '" +
                               s.repeatName + "' is already used");
    note(firstUse->second, "'" + s.repeatName + "' is first used here");
    return;
  }
  const Expr &body = *s.value;
  if (!body.instanceName.empty()) {
    error(body.instanceLoc, "the copies of a repeat are named by it (" +
                                s.repeatName + ".0, " + s.repeatName +
                                ".1, ...): drop 'as " + body.instanceName +
                                "'");
    return;
  }
  std::string savedScope = builder_->scope();
  for (int64_t i = 0; i < *n && !aborted_; ++i) {
    // Nested repeats multiply: count every copy against the model's limit.
    if (++instances_ > kMaxInstances) {
      error(s.count->loc, "the model is too large: more than " +
                              std::to_string(kMaxInstances) +
                              " block instances and repeated copies");
      aborted_ = true;
      break;
    }
    std::string path = prefix + "." + std::to_string(i);
    Val v;
    auto block =
        body.kind == ExprKind::Call ? blocks_.find(body.name) : blocks_.end();
    if (block != blocks_.end()) {
      // The copy itself is the instance: blocks.3.w, not blocks.3.layer.w.
      v = callBlock(body, *block->second, path, frame);
    } else {
      Frame &f = frame;
      std::string savedPath = f.path;
      f.path = path;
      builder_->setScope(path);
      v = lowerExpr(body, f);
      builder_->setScope(savedScope);
      f.path = savedPath;
    }
    frame.names[s.name] = Binding{v, s.nameLoc, BindingKind::Local};
    if (v.isPoison())
      break;
  }
}

// ---- Train section ----

void Lowerer::lowerTrain(const FileAST &file) {
  if (file.trains.size() > 1) {
    error(file.trains[1].loc, "more than one train section");
    note(file.trains[0].loc, "the first one is here");
  }
  if (file.trains.empty())
    return;
  ir::Attrs &attrs = module_->attrs();
  std::map<std::string, Loc> seen;
  auto set = [&](const std::string &key, Loc loc, ir::AttrValue v) {
    std::string full = "train." + key;
    auto prev = seen.find(full);
    if (prev != seen.end()) {
      error(loc, "duplicate train setting '" + key + "'");
      note(prev->second, "previous definition is here");
      return;
    }
    seen[full] = loc;
    attrs.set(full, std::move(v));
  };
  auto valueOf = [&](const Expr &e) -> std::optional<ir::AttrValue> {
    if (e.kind == ExprKind::Bool)
      return ir::AttrValue(e.boolValue);
    if (e.kind == ExprKind::List) {
      // A list of integers (pipeline_layers = [6, 6]).
      std::vector<int64_t> list;
      for (const ExprPtr &x : e.args) {
        std::optional<Number> n = evalConst(*x);
        if (!n)
          return std::nullopt;
        if (!n->isInt) {
          error(x->loc, "expected a list of integers");
          return std::nullopt;
        }
        list.push_back(n->i);
      }
      return ir::AttrValue(std::move(list));
    }
    if (e.kind == ExprKind::Name && !consts_.count(e.name))
      return ir::AttrValue(e.name);
    std::optional<Number> n = evalConst(e);
    if (!n)
      return std::nullopt;
    if (n->isInt)
      return ir::AttrValue(n->i);
    return ir::AttrValue(n->f);
  };
  for (const TrainItem &item : file.trains[0].items) {
    const Expr &e = *item.value;
    if (e.kind == ExprKind::Call) {
      if (!e.args.empty()) {
        error(e.args[0]->loc, "settings of '" + e.name +
                                  "' are keyword arguments, as in " + e.name +
                                  "(lr = 3e-4)");
        continue;
      }
      set(item.name, item.loc, e.name);
      for (const KeywordArg &kw : e.kwargs)
        if (auto v = valueOf(*kw.value))
          set(kw.name, kw.loc, *v);
      continue;
    }
    if (auto v = valueOf(e))
      set(item.name, item.loc, *v);
  }
}

// ---- Warnings ----

void Lowerer::warnUnused() {
  ir::Graph &g = module_->graph();
  std::set<const ir::Value *> live;
  for (const ir::Output &o : g.outputs())
    live.insert(o.value);
  for (auto it = g.ops().rbegin(); it != g.ops().rend(); ++it) {
    ir::Op &op = **it;
    if (!live.count(op.result()))
      continue;
    for (ir::Value *v : op.operands())
      live.insert(v);
  }
  // One warning per declaration, however many copies a block made of it.
  // Keyed by source position, so warnings come out in file order.
  std::map<std::pair<uint32_t, uint32_t>, std::pair<const ir::Value *, int>>
      unused;
  for (const auto &arg : g.arguments()) {
    if (live.count(arg.get()))
      continue;
    auto key = std::make_pair(arg->loc().line, arg->loc().col);
    auto [it, fresh] = unused.insert({key, {arg.get(), 0}});
    ++it->second.second;
  }
  for (const auto &[key, entry] : unused) {
    auto [value, count] = entry;
    if (value->kind() == ir::ValueKind::Input) {
      diag_.warning(value->loc(),
                    "input '" + value->name() + "' is not used by any output");
      continue;
    }
    std::string more =
        count > 1
            ? " (nor are its " + std::to_string(count - 1) + " other copies)"
            : "";
    diag_.warning(value->loc(), "parameter '" + value->name() +
                                    "' is not used by any output" + more);
  }
}

// ---- The whole file ----

std::unique_ptr<ir::Module> Lowerer::run(const FileAST &file) {
  unsigned errorsAtStart = diag_.errorCount();
  auto hasNewErrors = [&] { return diag_.errorCount() != errorsAtStart; };
  lowerConsts(file);
  collectBlocks(file);
  checkRecursion();
  if (file.models.empty()) {
    error(Loc{file_, 1, 1}, "the file has no model (model NAME { ... })");
    return nullptr;
  }
  for (size_t i = 1; i < file.models.size(); ++i) {
    error(file.models[i].loc, "more than one model in a file");
    note(file.models[0].loc, "the first model is here");
  }
  const ModelDecl &model = file.models[0];
  module_ = std::make_unique<ir::Module>(model.name);
  builder_ = std::make_unique<ir::Builder>(module_->graph());
  Frame frame;
  frame.body = &model.body;
  lowerStmts(model.body, frame);
  // After any error (a parse error may have dropped the output statements)
  // a missing output is no news.
  if (!aborted_ && module_->graph().outputs().empty() && !diag_.hasErrors())
    error(model.loc, "model '" + model.name +
                         "' has no outputs (declare them with 'output NAME = "
                         "...' or 'loss = ...')");
  lowerTrain(file);
  if (hasNewErrors())
    return nullptr;
  if (options_.warnUnused)
    warnUnused();
  return std::move(module_);
}

} // namespace mgc::frontend
