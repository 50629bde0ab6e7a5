// The sharding rule table, the rules of elementwise, shape and reduction
// ops, and the localisation of an op to one device's parts. The rules of the
// neural-network ops are in ShardingRulesNN.cpp.
#include "passes/ShardingRulesImpl.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <iterator>

namespace mgc::passes {

namespace sharding {

ShardingSignature uniformSig(const ir::Op &op, Placement p, Placement result) {
  ShardingSignature s;
  s.operands.assign(op.numOperands(), p);
  s.result = result;
  return s;
}

bool splittable(int64_t n, const ir::MeshAxis &axis) {
  if (axis.size < 1 || n < axis.size)
    return false;
  return llvm::all_of(ir::splitSizes(n, axis),
                      [](int64_t part) { return part > 0; });
}

void ruleNone(const ir::Op &, const ir::MeshAxis &, Signatures &) {}

namespace {

// Axes normalised against `rank`; out-of-range ones dropped (the verifier
// rejects them before any rule runs).
llvm::SmallVector<int64_t, 4> normalizedAxes(llvm::ArrayRef<int64_t> axes,
                                             int64_t rank) {
  llvm::SmallVector<int64_t, 4> out;
  for (int64_t a : axes)
    if (auto n = ir::normalizeAxis(a, rank))
      out.push_back(*n);
  return out;
}

int64_t product(llvm::ArrayRef<int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims)
    p *= d;
  return p;
}

// Whether partial sums pass a cast: between floating-point types. To
// itself or a wider type the sum is exact; to a narrower one (f32 -> bf16
// in a mixed-precision step) each device rounds its part before the sum
// instead of the sum once, a difference of bf16's rounding, and the sum
// then travels in the narrow type, as Megatron's bf16 all-reduces do.
// Refusing it forced the shard pass to resolve layernorm's partial input
// gradient by a reduce-scatter before its cast, at twice the traffic.
bool castKeepsSums(ir::DType from, ir::DType to) {
  return ir::isFloat(from) && ir::isFloat(to);
}

} // namespace

// dropout: the mask of an element depends on its index in the whole
// tensor, which a device knows when the tensor is split by its first
// dimension over dp (the batch): it becomes dropout_part with the part's
// rows (localizeOp). Other splits would need every dimension's offset.
void ruleDropout(const ir::Op &op, const ir::MeshAxis &axis, Signatures &out) {
  const ir::TensorType &t = op.type();
  if (axis.name == ir::kDataAxis && t.rank() >= 1 &&
      splittable(t.shape[0], axis))
    out.push_back(uniformSig(op, S(0), S(0)));
}

// Operands of identical shape, result[i] from operand[i]: any dimension
// splits. Partial sums pass only through the ops linear in them.
void ruleElementwise(const ir::Op &op, const ir::MeshAxis &axis,
                     Signatures &out) {
  const ir::TensorType &t = op.type();
  for (int64_t d = 0; d < t.rank(); ++d)
    if (splittable(t.shape[d], axis))
      out.push_back(uniformSig(op, S(d), S(d)));
  switch (op.kind()) {
  case ir::OpKind::Add:
  case ir::OpKind::Sub:
  case ir::OpKind::ModeSelect:
    out.push_back(sig({P(), P()}, P()));
    break;
  case ir::OpKind::Neg:
    out.push_back(sig({P()}, P()));
    break;
  case ir::OpKind::Mul:
    out.push_back(sig({P(), R()}, P()));
    out.push_back(sig({R(), P()}, P()));
    break;
  case ir::OpKind::Div:
    // Integer division truncates each part: not linear.
    if (ir::isFloat(t.dtype))
      out.push_back(sig({P(), R()}, P()));
    break;
  case ir::OpKind::ReluGrad:
  case ir::OpKind::GeluGrad:
  case ir::OpKind::SigmoidGrad:
  case ir::OpKind::TanhGrad:
    // Linear in dy.
    out.push_back(sig({P(), R()}, P()));
    break;
  case ir::OpKind::MinMaxGrad:
    out.push_back(sig({P(), R(), R()}, P()));
    break;
  case ir::OpKind::Where:
    // Linear in the two choices together.
    out.push_back(sig({R(), P(), P()}, P()));
    break;
  case ir::OpKind::Cast:
    if (castKeepsSums(op.operand(0)->type().dtype, t.dtype))
      out.push_back(sig({P()}, P()));
    break;
  default:
    break;
  }
}

// NumPy broadcast, right-aligned: a dimension kept splits as itself; a new
// or stretched dimension of the result splits from a replicated operand,
// each device broadcasting straight to its part.
void ruleBroadcast(const ir::Op &op, const ir::MeshAxis &axis,
                   Signatures &out) {
  const ir::TensorType &x = op.operand(0)->type();
  const ir::TensorType &y = op.type();
  int64_t diff = y.rank() - x.rank();
  if (diff < 0)
    return;
  for (int64_t d = 0; d < x.rank(); ++d)
    if (x.shape[d] == y.shape[d + diff] && splittable(x.shape[d], axis))
      out.push_back(sig({S(d)}, S(d + diff)));
  for (int64_t e = 0; e < y.rank(); ++e) {
    bool created = e < diff || x.shape[e - diff] != y.shape[e];
    if (created && splittable(y.shape[e], axis))
      out.push_back(sig({R()}, S(e)));
  }
  out.push_back(sig({P()}, P()));
}

namespace {

// Dimensions [inBegin, inEnd) of a reshape's input hold the same elements
// as [outBegin, outEnd) of its output, and no smaller groups do.
struct ReshapeGroup {
  size_t inBegin, inEnd, outBegin, outEnd;
};

// The minimal groups, size-1 dimensions at a group's start each on their
// own; empty when the shapes do not match up (not a valid reshape).
llvm::SmallVector<ReshapeGroup, 4> reshapeGroups(llvm::ArrayRef<int64_t> in,
                                                 llvm::ArrayRef<int64_t> out) {
  llvm::SmallVector<ReshapeGroup, 4> groups;
  size_t i = 0, j = 0;
  while (i < in.size() || j < out.size()) {
    bool inOne = i < in.size() && in[i] == 1;
    bool outOne = j < out.size() && out[j] == 1;
    if (inOne && !outOne) {
      groups.push_back({i, i + 1, j, j});
      ++i;
      continue;
    }
    if (outOne && !inOne) {
      groups.push_back({i, i, j, j + 1});
      ++j;
      continue;
    }
    if (i >= in.size() || j >= out.size())
      return {};
    ReshapeGroup g{i, 0, j, 0};
    int64_t pi = in[i++], pj = out[j++];
    while (pi != pj) {
      if (pi < pj) {
        if (i >= in.size() || in[i] == 0)
          return {};
        pi *= in[i++];
      } else {
        if (j >= out.size() || out[j] == 0)
          return {};
        pj *= out[j++];
      }
    }
    g.inEnd = i;
    g.outEnd = j;
    groups.push_back(g);
  }
  return groups;
}

} // namespace

// A split survives a reshape when it is of the outermost dimension of its
// group and every device's part is whole rows of the output group's
// outermost dimension, in the sizes the axis gives that dimension.
void ruleReshape(const ir::Op &op, const ir::MeshAxis &axis, Signatures &out) {
  llvm::ArrayRef<int64_t> in = op.operand(0)->type().shape;
  llvm::ArrayRef<int64_t> res = op.type().shape;
  for (const ReshapeGroup &g : reshapeGroups(in, res)) {
    if (g.inBegin == g.inEnd || g.outBegin == g.outEnd)
      continue;
    int64_t d = static_cast<int64_t>(g.inBegin);
    int64_t e = static_cast<int64_t>(g.outBegin);
    if (!splittable(in[d], axis))
      continue;
    int64_t restIn = product(in.slice(g.inBegin + 1, g.inEnd - g.inBegin - 1));
    int64_t restOut =
        product(res.slice(g.outBegin + 1, g.outEnd - g.outBegin - 1));
    std::vector<int64_t> inParts = ir::splitSizes(in[d], axis);
    std::vector<int64_t> outParts = ir::splitSizes(res[e], axis);
    bool exact = restOut > 0;
    for (size_t k = 0; exact && k < inParts.size(); ++k)
      exact = (inParts[k] * restIn) % restOut == 0 &&
              inParts[k] * restIn / restOut == outParts[k];
    if (exact)
      out.push_back(sig({S(d)}, S(e)));
  }
  out.push_back(sig({P()}, P()));
}

void ruleTranspose(const ir::Op &op, const ir::MeshAxis &axis,
                   Signatures &out) {
  const ir::TensorType &x = op.operand(0)->type();
  llvm::SmallVector<int64_t, 4> perm =
      normalizedAxes(op.attrs().getInts("perm"), x.rank());
  for (int64_t d = 0; d < x.rank(); ++d) {
    const int64_t *pos = llvm::find(perm, d);
    if (pos != perm.end() && splittable(x.shape[d], axis))
      out.push_back(sig({S(d)}, S(pos - perm.begin())));
  }
  out.push_back(sig({P()}, P()));
}

void ruleSlice(const ir::Op &op, const ir::MeshAxis &axis, Signatures &out) {
  const ir::TensorType &x = op.operand(0)->type();
  auto a = ir::normalizeAxis(op.attrs().getInt("axis"), x.rank());
  for (int64_t d = 0; d < x.rank(); ++d)
    if (d != a && splittable(x.shape[d], axis))
      out.push_back(sig({S(d)}, S(d)));
  out.push_back(sig({P()}, P()));
}

void ruleConcat(const ir::Op &op, const ir::MeshAxis &axis, Signatures &out) {
  const ir::TensorType &y = op.type();
  auto a = ir::normalizeAxis(op.attrs().getInt("axis"), y.rank());
  for (int64_t d = 0; d < y.rank(); ++d)
    if (d != a && splittable(y.shape[d], axis))
      out.push_back(uniformSig(op, S(d), S(d)));
  out.push_back(uniformSig(op, P(), P()));
}

// sum, mean and max. A dimension not reduced splits as itself (renumbered
// when the reduced ones are dropped). Reducing a split dimension leaves
// partial sums: for mean, each device's mean is over its own part, so its
// result is scaled by part / whole. The maximum leaves partial maxima, and
// the maximum of partial maxima is partial maxima again.
void ruleReduce(const ir::Op &op, const ir::MeshAxis &axis, Signatures &out) {
  const ir::TensorType &x = op.operand(0)->type();
  llvm::SmallVector<int64_t, 4> axes =
      normalizedAxes(op.attrs().getInts("axes"), x.rank());
  bool keep = op.attrs().getBool("keepdims");
  bool isMax = op.kind() == ir::OpKind::Max;
  int64_t kept = 0;
  for (int64_t d = 0; d < x.rank(); ++d) {
    bool reduced = llvm::is_contained(axes, d);
    if (!reduced && splittable(x.shape[d], axis))
      out.push_back(sig({S(d)}, S(keep ? d : kept)));
    if (!reduced || keep)
      ++kept;
  }
  if (isMax) {
    for (int64_t d : axes)
      if (splittable(x.shape[d], axis))
        out.push_back(sig({S(d)}, Pmax()));
    out.push_back(sig({Pmax()}, Pmax()));
    return;
  }
  bool isMean = op.kind() == ir::OpKind::Mean;
  // An integer mean truncates each device's quotient.
  if (isMean && !ir::isFloat(op.type().dtype))
    return;
  for (int64_t d : axes)
    if (splittable(x.shape[d], axis))
      out.push_back(isMean ? sig({S(d)}, P(), 0, d) : sig({S(d)}, P()));
  out.push_back(sig({P()}, P()));
}

// max_grad(dy, x, y): rows kept by the max split with their maxima; linear
// in dy.
void ruleMaxGrad(const ir::Op &op, const ir::MeshAxis &axis, Signatures &out) {
  const ir::TensorType &x = op.operand(1)->type();
  llvm::SmallVector<int64_t, 4> axes =
      normalizedAxes(op.attrs().getInts("axes"), x.rank());
  bool keep = op.attrs().getBool("keepdims");
  int64_t kept = 0;
  for (int64_t d = 0; d < x.rank(); ++d) {
    bool reduced = llvm::is_contained(axes, d);
    if (!reduced && splittable(x.shape[d], axis)) {
      int64_t r = keep ? d : kept;
      out.push_back(sig({S(r), S(d), S(r)}, S(d)));
    }
    if (!reduced || keep)
      ++kept;
  }
  out.push_back(sig({P(), R(), R()}, P()));
}

} // namespace sharding

namespace {

struct RuleRow {
  ir::OpKind kind;
  ShardingRule rule;
};

using namespace sharding;

// One row per op kind of ir/OpKinds.def (checked below).
constexpr RuleRow kRules[] = {
    {ir::OpKind::Constant, ruleNone},
    {ir::OpKind::Cast, ruleElementwise},
    {ir::OpKind::Add, ruleElementwise},
    {ir::OpKind::Sub, ruleElementwise},
    {ir::OpKind::Mul, ruleElementwise},
    {ir::OpKind::Div, ruleElementwise},
    {ir::OpKind::Neg, ruleElementwise},
    {ir::OpKind::Exp, ruleElementwise},
    {ir::OpKind::Log, ruleElementwise},
    {ir::OpKind::Sqrt, ruleElementwise},
    {ir::OpKind::Rsqrt, ruleElementwise},
    {ir::OpKind::Tanh, ruleElementwise},
    {ir::OpKind::Relu, ruleElementwise},
    {ir::OpKind::Gelu, ruleElementwise},
    {ir::OpKind::Sigmoid, ruleElementwise},
    {ir::OpKind::Dropout, ruleDropout},
    {ir::OpKind::Softmax, ruleAxisOp},
    {ir::OpKind::LogSoftmax, ruleAxisOp},
    {ir::OpKind::Layernorm, ruleLayernorm},
    {ir::OpKind::Matmul, ruleMatmul},
    {ir::OpKind::Embedding, ruleEmbedding},
    {ir::OpKind::Reshape, ruleReshape},
    {ir::OpKind::Transpose, ruleTranspose},
    {ir::OpKind::Slice, ruleSlice},
    {ir::OpKind::Concat, ruleConcat},
    {ir::OpKind::Broadcast, ruleBroadcast},
    {ir::OpKind::Sum, ruleReduce},
    {ir::OpKind::Mean, ruleReduce},
    {ir::OpKind::Max, ruleReduce},
    {ir::OpKind::CrossEntropy, ruleCrossEntropy},
    {ir::OpKind::Mse, ruleMse},
    {ir::OpKind::CausalMask, ruleCausalMask},
    {ir::OpKind::Attention, ruleAttention},
    {ir::OpKind::ReluGrad, ruleElementwise},
    {ir::OpKind::GeluGrad, ruleElementwise},
    {ir::OpKind::SigmoidGrad, ruleElementwise},
    {ir::OpKind::TanhGrad, ruleElementwise},
    {ir::OpKind::SoftmaxGrad, ruleAxisGrad},
    {ir::OpKind::LogSoftmaxGrad, ruleAxisGrad},
    {ir::OpKind::LayernormGradX, ruleLayernormGradX},
    {ir::OpKind::Rmsnorm, ruleLayernorm},
    {ir::OpKind::Rope, ruleRope},
    {ir::OpKind::RmsnormGradX, ruleLayernormGradX},
    {ir::OpKind::EmbeddingGrad, ruleEmbeddingGrad},
    {ir::OpKind::MaxGrad, ruleMaxGrad},
    {ir::OpKind::CrossEntropyGrad, ruleCrossEntropyGrad},
    {ir::OpKind::CausalMaskGrad, ruleCausalMaskGrad},
    {ir::OpKind::AttentionGrad, ruleAttentionGrad},
    {ir::OpKind::Cos, ruleElementwise},
    {ir::OpKind::Minimum, ruleElementwise},
    {ir::OpKind::Maximum, ruleElementwise},
    {ir::OpKind::Sin, ruleElementwise},
    {ir::OpKind::Abs, ruleElementwise},
    {ir::OpKind::Sign, ruleElementwise},
    {ir::OpKind::Pow, ruleElementwise},
    {ir::OpKind::Softplus, ruleElementwise},
    {ir::OpKind::Where, ruleElementwise},
    {ir::OpKind::Iota, ruleNone},
    {ir::OpKind::MinMaxGrad, ruleElementwise},
    {ir::OpKind::SumExp, ruleSumExp},
    {ir::OpKind::ClassLogit, ruleClassLogit},
    {ir::OpKind::CrossEntropyGradStats, ruleCrossEntropyGradStats},
    // The device versions of embedding and embedding_grad on a table split
    // by rows: localizeOp makes them, in device programs only.
    {ir::OpKind::EmbeddingPart, ruleNone},
    {ir::OpKind::EmbeddingGradPart, ruleNone},
    // Fusion runs on device programs and one-device steps, after placement.
    {ir::OpKind::Fused, ruleNone},
    {ir::OpKind::MatmulEpilogue, ruleNone},
    // Communication is inserted after propagation, from the placements.
    {ir::OpKind::AllReduce, ruleNone},
    {ir::OpKind::AllReduceMax, ruleNone},
    {ir::OpKind::ReduceScatter, ruleNone},
    {ir::OpKind::AllGather, ruleNone},
    {ir::OpKind::AllToAll, ruleNone},
    {ir::OpKind::LocalSplit, ruleNone},
    // The pipeline pass cuts device programs, after placement.
    {ir::OpKind::Send, ruleNone},
    {ir::OpKind::Recv, ruleNone},
    {ir::OpKind::DropoutPart, ruleNone},
    {ir::OpKind::ModeSelect, ruleElementwise},
    {ir::OpKind::Conv2d, ruleConv2d},
    {ir::OpKind::MaxPool2d, rulePool2d},
    {ir::OpKind::AvgPool2d, rulePool2d},
    {ir::OpKind::Conv2dGradX, ruleConv2dGradX},
    {ir::OpKind::Conv2dGradW, ruleConv2dGradW},
    {ir::OpKind::MaxPool2dGrad, rulePool2d},
    {ir::OpKind::AvgPool2dGrad, rulePool2d},
};

constexpr int timesListed(ir::OpKind kind) {
  int n = 0;
  for (const RuleRow &row : kRules)
    n += row.kind == kind;
  return n;
}

#define MGC_OP(Id, Name, Arity, Attrs, Rule, Traits, Summary)                  \
  static_assert(timesListed(ir::OpKind::Id) == 1,                              \
                "op '" Name "' needs exactly one row in the sharding rule "    \
                "table (passes/ShardingRules.cpp)");
#include "ir/OpKinds.def"

constexpr size_t kNumOpKinds = 0
#define MGC_OP(Id, Name, Arity, Attrs, Rule, Traits, Summary) +1
#include "ir/OpKinds.def"
    ;
static_assert(std::size(kRules) == kNumOpKinds,
              "the sharding rule table has a row that is not an op kind");

} // namespace

ShardingRule shardingRule(ir::OpKind kind) {
  for (const RuleRow &row : kRules)
    if (row.kind == kind)
      return row.rule;
  return nullptr; // unreachable: the table lists every kind
}

llvm::SmallVector<ShardingSignature, 8>
legalSignatures(const ir::Op &op, const ir::MeshAxis &axis) {
  llvm::SmallVector<ShardingSignature, 8> out;
  if (ShardingRule rule = shardingRule(op.kind()))
    rule(op, axis, out);
  out.push_back(uniformSig(op, R(), R()));
  return out;
}

std::optional<ShardingSignature>
signatureFor(const ir::Op &op, const ir::MeshAxis &axis,
             llvm::ArrayRef<ir::Placement> operands, ir::Placement result) {
  for (const ShardingSignature &sig : legalSignatures(op, axis))
    if (sig.result == result &&
        llvm::ArrayRef<ir::Placement>(sig.operands) == operands)
      return sig;
  return std::nullopt;
}

ir::ValueOrError localizeOp(ir::Builder &b, const ir::Op &op,
                            llvm::ArrayRef<ir::Value *> operands,
                            const ir::TensorType &localResult, double scale,
                            const IndexPart *index) {
  // The new ops belong where the logical op was written.
  Loc savedLoc = b.loc();
  std::string savedScope = b.scope();
  b.setLoc(op.loc());
  b.setScope(op.scope());
  auto restore = [&](ir::ValueOrError r) {
    b.setLoc(savedLoc);
    b.setScope(savedScope);
    return r;
  };
  auto fail = [&](std::string message) {
    ir::ValueOrError r;
    r.error = std::move(message);
    return restore(std::move(r));
  };

  ir::Attrs attrs = op.attrs();
  ir::OpKind kind = op.kind();
  std::vector<int64_t> localShape(localResult.shape.begin(),
                                  localResult.shape.end());
  switch (kind) {
  case ir::OpKind::Broadcast:
  case ir::OpKind::Reshape:
    attrs.set("shape", localShape);
    break;
  case ir::OpKind::EmbeddingGrad:
    if (localResult.rank() == 2)
      attrs.set("rows", localShape[0]);
    break;
  case ir::OpKind::Conv2d:
  case ir::OpKind::Conv2dGradX:
  case ir::OpKind::Conv2dGradW: {
    // A grouped convolution split by whole groups: the device's share of
    // the groups is its share of the output channels (w's rows for conv2d,
    // dy's channels for the backward ops).
    int64_t groups = attrs.getInt("groups");
    bool isConv = kind == ir::OpKind::Conv2d;
    int64_t logical = op.operand(isConv ? 1 : 0)->type().shape[isConv ? 0 : 1];
    int64_t local = operands[isConv ? 1 : 0]->type().shape[isConv ? 0 : 1];
    if (groups > 1 && logical > 0)
      attrs.set("groups", groups * local / logical);
    break;
  }
  default:
    break;
  }
  if (index) {
    switch (kind) {
    case ir::OpKind::Embedding:
      kind = ir::OpKind::EmbeddingPart;
      attrs = ir::Attrs();
      break;
    case ir::OpKind::EmbeddingGrad:
      kind = ir::OpKind::EmbeddingGradPart;
      attrs = ir::Attrs();
      break;
    case ir::OpKind::Dropout:
      kind = ir::OpKind::DropoutPart;
      break;
    case ir::OpKind::ClassLogit:
    case ir::OpKind::CrossEntropyGradStats:
      break;
    default:
      return fail(op.name().str() + " indexes no dimension that a device " +
                  "can hold a part of");
    }
    attrs.set("axis", index->axis);
    attrs.set("sizes", index->sizes);
    attrs.set("part", index->part);
  }
  ir::ValueOrError r = b.create(kind, operands, std::move(attrs));
  if (!r.ok())
    return fail("cannot localize " + op.name().str() + ": " + r.error);
  if (r.value->type() != localResult)
    return fail("localized " + op.name().str() + " has type " +
                r.value->type().str() + ", expected " + localResult.str());
  if (scale == 1.0)
    return restore(r);

  if (!ir::isFloat(localResult.dtype))
    return fail("cannot scale the " + localResult.str() + " result of " +
                op.name().str() + " by a part's share");
  ir::Value *factor = b.constant(scale, localResult.dtype);
  if (!factor)
    return fail("cannot create a constant of type " +
                ir::dtypeName(localResult.dtype).str());
  if (!localResult.isScalar()) {
    ir::ValueOrError f =
        b.create(ir::OpKind::Broadcast, {factor}, {{"shape", localShape}});
    if (!f.ok())
      return fail("cannot broadcast the scale of " + op.name().str() + ": " +
                  f.error);
    factor = f.value;
  }
  ir::ValueOrError scaled = b.create(ir::OpKind::Mul, {r.value, factor});
  if (!scaled.ok())
    return fail("cannot scale " + op.name().str() + ": " + scaled.error);
  return restore(scaled);
}

} // namespace mgc::passes
