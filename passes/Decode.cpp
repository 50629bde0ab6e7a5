// The decoding program: a copy of the inference program's ops that lead to
// the logits, in order, each rebuilt for one position. Every value keeps
// track of its sequence axis (the axis that holds the T positions, -1 for a
// value that does not depend on the position: parameters and what is made
// from them alone). An op whose operands have no sequence axis is copied
// as it is; the others follow one rule per op kind, which says where the
// sequence axis goes, or refuses an op that would combine positions.
#include "passes/Decode.h"

#include "ir/Builder.h"
#include "passes/ModuleCut.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"


namespace mgc::passes {

namespace {

using ir::Op;
using ir::OpKind;
using ir::TensorType;
using ir::Value;

// An axis attribute (possibly negative) as an index into `rank` axes.
int64_t normalizeAxis(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}

class DecodeBuilder {
public:
  DecodeBuilder(const ir::Module &from, const DecodeSpec &spec,
                DiagnosticEngine &diag)
      : from_(from), spec_(spec), diag_(diag) {}

  FailureOr<DecodeProgram> build();

private:
  struct Mapped {
    Value *value = nullptr;
    int64_t axis = -1; // the sequence axis, -1 for none
  };

  LogicalResult checkArguments();
  Mapped argument(const Value *arg);
  Value *position(ir::DType dtype);
  bool readsPositions(const Op &op) const;
  LogicalResult rebuild(const Op &op);
  FailureOr<Mapped> rule(const Op &op, llvm::ArrayRef<Mapped> in);
  FailureOr<Mapped> elementwise(const Op &op, llvm::ArrayRef<Mapped> in);
  FailureOr<Mapped> attention(const Op &op, llvm::ArrayRef<Mapped> in);
  FailureOr<Value *> create(const Op &op, OpKind kind,
                            llvm::ArrayRef<Value *> operands, ir::Attrs attrs);
  LogicalResult refuse(const Op &op, const llvm::Twine &why);

  const ir::Module &from_;
  const DecodeSpec &spec_;
  DiagnosticEngine &diag_;
  const Value *tokens_ = nullptr, *positions_ = nullptr;
  int64_t context_ = 0;
  std::unique_ptr<ir::Module> module_;
  std::unique_ptr<ir::Builder> builder_;
  llvm::DenseMap<const Value *, Mapped> map_;
  llvm::DenseMap<const Value *, llvm::SmallVector<std::pair<const Op *, unsigned>, 2>>
      uses_;
  Value *position_ = nullptr, *mask_ = nullptr;
  std::vector<DecodeCache> caches_;
  std::vector<std::pair<Value *, Value *>> newKeysValues_;
};

LogicalResult DecodeBuilder::checkArguments() {
  const ir::Graph &g = from_.graph();
  auto inputNames = [&] {
    std::string names;
    for (const Value *v : g.inputs())
      names += (names.empty() ? "" : ", ") + v->name();
    return names.empty() ? std::string("none") : names;
  };
  tokens_ = g.findArgument(spec_.tokens);
  if (!tokens_ || tokens_->kind() != ir::ValueKind::Input) {
    diag_.error("model '" + from_.name() + "' has no input '" + spec_.tokens +
                "' to take the tokens (its inputs: " + inputNames() + ")");
    return failure();
  }
  const TensorType &t = tokens_->type();
  if (!ir::isInteger(t.dtype) || t.rank() < 1) {
    diag_.error(tokens_->loc(), "the tokens input '" + spec_.tokens +
                                    "' is " + t.str() +
                                    ": decoding needs integer token ids, "
                                    "the sequence on the last axis");
    return failure();
  }
  context_ = t.shape.back();
  if (!spec_.positions.empty()) {
    positions_ = g.findArgument(spec_.positions);
    if (!positions_ || positions_->kind() != ir::ValueKind::Input ||
        !ir::isInteger(positions_->type().dtype) ||
        positions_->type().shape != llvm::SmallVector<int64_t, 4>{context_}) {
      diag_.error("the positions input '" + spec_.positions +
                  "' must be an integer input [" + std::to_string(context_) +
                  "] of model '" + from_.name() + "' (its inputs: " +
                  inputNames() + ")");
      return failure();
    }
  }
  for (const ir::Output &o : g.outputs())
    if (o.name == spec_.logits)
      return success();
  std::string names;
  for (const ir::Output &o : g.outputs())
    names += (names.empty() ? "" : ", ") + o.name;
  diag_.error("model '" + from_.name() + "' has no output '" + spec_.logits +
              "' (its outputs: " + (names.empty() ? "none" : names) +
              "): decoding samples the next token from the logits");
  return failure();
}

Value *DecodeBuilder::position(ir::DType dtype) {
  if (!position_)
    position_ = module_->graph().addInput(
        kDecodePosition, TensorType(ir::DType::I32, {1}));
  if (dtype == ir::DType::I32)
    return position_;
  ir::Attrs attrs;
  attrs.set("dtype", std::string(ir::dtypeName(dtype)));
  return builder_->create(OpKind::Cast, {position_}, attrs).value;
}

DecodeBuilder::Mapped DecodeBuilder::argument(const Value *arg) {
  if (arg == tokens_) {
    TensorType t = arg->type();
    t.shape.back() = 1;
    Value *v = module_->graph().addArgumentLike(*arg, t);
    return {v, t.rank() - 1};
  }
  if (arg == positions_)
    return {position(arg->type().dtype), 0};
  return {module_->graph().addArgumentLike(*arg, arg->type()), -1};
}

// Whether `op` is arange(T) read as positions: by rope or as embedding ids.
bool DecodeBuilder::readsPositions(const Op &op) const {
  if (op.kind() != OpKind::Iota ||
      op.type().shape != llvm::SmallVector<int64_t, 4>{context_})
    return false;
  auto it = uses_.find(op.result());
  if (it == uses_.end())
    return false;
  return llvm::any_of(it->second, [](const auto &use) {
    return use.second == 1 && (use.first->kind() == OpKind::Rope ||
                               use.first->kind() == OpKind::Embedding);
  });
}

LogicalResult DecodeBuilder::refuse(const Op &op, const llvm::Twine &why) {
  diag_.error(op.loc(), "cannot decode one position at a time through " +
                            describeOp(op) + ": " + why);
  return failure();
}

FailureOr<Value *> DecodeBuilder::create(const Op &op, OpKind kind,
                                         llvm::ArrayRef<Value *> operands,
                                         ir::Attrs attrs) {
  ir::ValueOrError r = builder_->create(kind, operands, std::move(attrs));
  if (!r.ok()) {
    (void)refuse(op, r.error);
    return failure();
  }
  return r.value;
}

FailureOr<DecodeBuilder::Mapped>
DecodeBuilder::elementwise(const Op &op, llvm::ArrayRef<Mapped> in) {
  int64_t axis = -1;
  for (const Mapped &m : in) {
    if (m.axis < 0)
      continue;
    if (axis >= 0 && m.axis != axis) {
      (void)refuse(op, "its operands hold the positions on different axes");
      return failure();
    }
    axis = m.axis;
  }
  if (op.kind() == OpKind::Dropout) // inference: the identity
    return in[0];
  llvm::SmallVector<Value *, 3> operands;
  for (unsigned i = 0; i < in.size(); ++i) {
    const Value *old = op.operand(i);
    const TensorType &t = old->type();
    if (in[i].axis >= 0 || t.rank() != op.type().rank() ||
        t.shape[axis] == 1) {
      operands.push_back(in[i].value);
      continue;
    }
    // An operand the same at every position, spread over them by a
    // broadcast (a bias): spread it over one position instead.
    const Op *def = old->definingOp();
    int64_t lead = def ? t.rank() - def->operand(0)->type().rank() : 0;
    if (!def || def->kind() != OpKind::Broadcast ||
        (axis >= lead && def->operand(0)->type().shape[axis - lead] != 1)) {
      (void)refuse(op, "operand " + llvm::Twine(i) + " (" + t.str() +
                           ") holds all " + llvm::Twine(context_) +
                           " positions but is not made from the tokens");
      return failure();
    }
    ir::Attrs attrs = def->attrs();
    std::vector<int64_t> shape = attrs.getInts("shape");
    shape[axis] = 1;
    attrs.set("shape", shape);
    auto b = create(*def, OpKind::Broadcast, {map_.lookup(def->operand(0)).value},
                    attrs);
    if (b.failed())
      return failure();
    operands.push_back(*b);
  }
  auto v = create(op, op.kind(), operands, op.attrs());
  if (v.failed())
    return failure();
  return Mapped{*v, axis};
}

FailureOr<DecodeBuilder::Mapped>
DecodeBuilder::attention(const Op &op, llvm::ArrayRef<Mapped> in) {
  if (in.size() != 3 || !op.attrs().getBool("causal")) {
    (void)refuse(op, "decoding reads a cache of the keys and values before "
                     "each position, which only a causal attention without "
                     "a mask can use");
    return failure();
  }
  int64_t seq = op.type().rank() - 2;
  for (const Mapped &m : in)
    if (m.axis != seq) {
      (void)refuse(op, "q, k and v must each hold the positions on their "
                       "second-to-last axis");
      return failure();
    }
  ir::Graph &g = module_->graph();
  std::string index = std::to_string(caches_.size());
  DecodeCache cache;
  cache.keys = "decode.cache_k." + index;
  cache.values = "decode.cache_v." + index;
  cache.newKeys = "decode.k." + index;
  cache.newValues = "decode.v." + index;
  cache.type = op.operand(1)->type();
  if (op.operand(2)->type() != cache.type) {
    (void)refuse(op, "keys and values of different types are not decoded");
    return failure();
  }
  Value *cacheK = g.addInput(cache.keys, cache.type);
  Value *cacheV = g.addInput(cache.values, cache.type);
  ir::Attrs along;
  along.set("axis", seq);
  auto keys = create(op, OpKind::Concat, {cacheK, in[1].value}, along);
  auto values = create(op, OpKind::Concat, {cacheV, in[2].value}, along);
  if (keys.failed() || values.failed())
    return failure();
  ir::DType dtype = op.operand(0)->type().dtype;
  if (!mask_)
    mask_ = g.addInput(kDecodeMask, TensorType(dtype, {1, context_ + 1}));
  Value *mask = mask_;
  if (mask->type().dtype != dtype) {
    ir::Attrs cast;
    cast.set("dtype", std::string(ir::dtypeName(dtype)));
    auto c = create(op, OpKind::Cast, {mask_}, cast);
    if (c.failed())
      return failure();
    mask = *c;
  }
  ir::Attrs attrs = op.attrs();
  attrs.set("causal", false);
  auto y = create(op, OpKind::Attention, {in[0].value, *keys, *values, mask},
                  attrs);
  if (y.failed())
    return failure();
  caches_.push_back(cache);
  newKeysValues_.push_back({in[1].value, in[2].value});
  return Mapped{*y, seq};
}

FailureOr<DecodeBuilder::Mapped>
DecodeBuilder::rule(const Op &op, llvm::ArrayRef<Mapped> in) {
  auto operands = [&] {
    llvm::SmallVector<Value *, 3> v;
    for (const Mapped &m : in)
      v.push_back(m.value);
    return v;
  };
  auto same = [&](int64_t axis) -> FailureOr<Mapped> {
    auto v = create(op, op.kind(), operands(), op.attrs());
    if (v.failed())
      return failure();
    return Mapped{*v, axis};
  };
  auto mixes = [&](const llvm::Twine &how) -> FailureOr<Mapped> {
    (void)refuse(op, how);
    return failure();
  };
  const int64_t a = in[0].axis;
  const int64_t rank = op.operand(0)->type().rank();
  if (op.info().has(ir::kElementwise))
    return elementwise(op, in);
  switch (op.kind()) {
  case OpKind::Attention:
    return attention(op, in);
  case OpKind::Embedding:
    if (in[0].axis >= 0)
      return mixes("the table depends on the tokens");
    return same(in[1].axis);
  case OpKind::Matmul:
    if (in[1].axis >= 0)
      return mixes("both operands depend on the tokens (an attention written "
                   "with matmuls: use the attention op)");
    if (a == rank - 1)
      return mixes("it sums over the positions");
    return same(a + op.type().rank() - rank);
  case OpKind::Transpose: {
    const std::vector<int64_t> &perm = op.attrs().getInts("perm");
    return same(llvm::find(perm, a) - perm.begin());
  }
  case OpKind::Broadcast: {
    int64_t axis = a + op.type().rank() - rank;
    ir::Attrs attrs = op.attrs();
    std::vector<int64_t> shape = attrs.getInts("shape");
    shape[axis] = 1;
    attrs.set("shape", shape);
    auto v = create(op, op.kind(), operands(), attrs);
    if (v.failed())
      return failure();
    return Mapped{*v, axis};
  }
  case OpKind::Reshape: {
    // The sequence axis must stay an axis of its own: the same elements
    // before it, the same size.
    llvm::ArrayRef<int64_t> from = op.operand(0)->type().shape;
    std::vector<int64_t> to = op.attrs().getInts("shape");
    // (Shapes of verified values: their element counts fit.)
    int64_t before = *ir::numElements(from.take_front(a));
    for (size_t j = 0; j < to.size(); ++j)
      if (ir::numElements(llvm::ArrayRef<int64_t>(to).take_front(j)) ==
              before &&
          to[j] == context_) {
        to[j] = 1;
        ir::Attrs attrs = op.attrs();
        attrs.set("shape", to);
        auto v = create(op, op.kind(), operands(), attrs);
        if (v.failed())
          return failure();
        return Mapped{*v, static_cast<int64_t>(j)};
      }
    return mixes("it merges the positions with another axis or splits them");
  }
  case OpKind::Sum:
  case OpKind::Mean:
  case OpKind::Max: {
    int64_t out = a;
    for (int64_t axis : op.attrs().getInts("axes")) {
      axis = normalizeAxis(axis, rank);
      if (axis == a)
        return mixes("it reduces over the positions");
      if (axis < a && !op.attrs().getBool("keepdims"))
        --out;
    }
    return same(out);
  }
  case OpKind::Softmax:
  case OpKind::LogSoftmax:
    if (normalizeAxis(op.attrs().getInt("axis"), rank) == a)
      return mixes("it normalises over the positions");
    return same(a);
  case OpKind::Layernorm:
  case OpKind::Rmsnorm:
    if (a == rank - 1 || llvm::any_of(in.drop_front(), [](const Mapped &m) {
          return m.axis >= 0;
        }))
      return mixes("it normalises over the positions");
    return same(a);
  case OpKind::Rope:
    if (a != rank - 2 || in[1].axis != 0)
      return mixes("its positions are not the tokens' positions (rope's "
                   "positions must be arange(T) or the positions input)");
    return same(a);
  case OpKind::Slice:
    if (normalizeAxis(op.attrs().getInt("axis"), rank) == a)
      return mixes("it slices the positions");
    return same(a);
  case OpKind::Concat:
    if (normalizeAxis(op.attrs().getInt("axis"), rank) == a ||
        llvm::any_of(in, [&](const Mapped &m) { return m.axis != a; }))
      return mixes("it joins values that do not all hold the positions on "
                   "one axis");
    return same(a);
  default:
    return mixes("mgc has no rule for decoding it (ops that keep positions "
                 "apart are decoded: elementwise ops, matmuls, norms, "
                 "reshapes, rope and causal attention)");
  }
}

LogicalResult DecodeBuilder::rebuild(const Op &op) {
  builder_->setLoc(op.loc());
  builder_->setScope(op.scope());
  if (readsPositions(op)) {
    map_[op.result()] = {position(op.type().dtype), 0};
    return success();
  }
  llvm::SmallVector<Mapped, 3> in;
  for (const Value *v : op.operands()) {
    auto it = map_.find(v);
    if (it == map_.end())
      it = map_.insert({v, argument(v)}).first;
    in.push_back(it->second);
  }
  if (llvm::none_of(in, [](const Mapped &m) { return m.axis >= 0; })) {
    llvm::SmallVector<Value *, 3> operands;
    for (const Mapped &m : in)
      operands.push_back(m.value);
    Op *copy = module_->graph().createOp(op.kind(), operands, op.attrs(),
                                         op.type(), op.loc(), op.scope());
    map_[op.result()] = {copy->result(), -1};
    return success();
  }
  auto mapped = rule(op, in);
  if (mapped.failed())
    return failure();
  map_[op.result()] = *mapped;
  return success();
}

FailureOr<DecodeProgram> DecodeBuilder::build() {
  if (failed(checkArguments()))
    return failure();
  const ir::Graph &g = from_.graph();
  const Value *logits = nullptr;
  for (const ir::Output &o : g.outputs())
    if (o.name == spec_.logits)
      logits = o.value;
  // The ops the logits need, found from the last op back.
  llvm::DenseSet<const Value *> needed{logits};
  std::vector<const Op *> ops;
  for (auto it = g.ops().rbegin(); it != g.ops().rend(); ++it)
    if (needed.contains((*it)->result())) {
      ops.push_back(it->get());
      for (const Value *v : (*it)->operands())
        needed.insert(v);
    }
  std::reverse(ops.begin(), ops.end());
  for (const Op *op : ops)
    for (unsigned i = 0; i < op->numOperands(); ++i)
      uses_[op->operand(i)].push_back({op, i});

  module_ = std::make_unique<ir::Module>(from_.name());
  module_->attrs() = from_.attrs();
  builder_ = std::make_unique<ir::Builder>(module_->graph());
  for (const Op *op : ops)
    if (failed(rebuild(*op)))
      return failure();

  auto it = map_.find(logits);
  if (it == map_.end() || it->second.axis < 0) {
    diag_.error("the output '" + spec_.logits +
                "' does not depend on the tokens' positions: it is not the "
                "logits of a language model");
    return failure();
  }
  ir::Graph &out = module_->graph();
  out.addOutput(spec_.logits, it->second.value);
  for (size_t i = 0; i < caches_.size(); ++i) {
    out.addOutput(caches_[i].newKeys, newKeysValues_[i].first);
    out.addOutput(caches_[i].newValues, newKeysValues_[i].second);
  }
  DecodeProgram program;
  program.module = std::move(module_);
  program.context = context_;
  program.caches = std::move(caches_);
  return program;
}

} // namespace

FailureOr<DecodeProgram> buildDecodeProgram(const ir::Module &forward,
                                            const DecodeSpec &spec,
                                            DiagnosticEngine &diag) {
  return DecodeBuilder(forward, spec, diag).build();
}

} // namespace mgc::passes
