// Sharding rules of conv2d and the 2-d poolings on NCHW images, with their
// backward ops. The table is in ShardingRules.cpp.
//
// conv2d(x[N, C, H, W], w[K, C/g, R, S]) -> y[N, K, OH, OW] is a matmul
// per pixel with C*R*S as the contracted dimension, and splits as one:
//   S0, R  -> S0   the batch (data parallel)
//   R,  S0 -> S1   the output channels (column-parallel), g = 1
//   S1, S1 -> P    the input channels (row-parallel: partial sums), g = 1
//   S1, S0 -> S1   whole groups per device, g > 1 (depthwise included)
// Pooling works on each (image, channel) plane alone: batch and channels
// split freely.
#include "passes/ShardingRulesImpl.h"

#include "ir/WindowShape.h"

#include <vector>

namespace mgc::passes::sharding {

namespace {

// Whether the channels C (input) and K (output) of a grouped convolution
// split on `axis` so that every device holds whole groups of both.
bool wholeGroups(const ir::WindowDims &d, const ir::MeshAxis &axis) {
  if (d.groups < 2 || !splittable(d.groups, axis))
    return false;
  std::vector<int64_t> gs = ir::splitSizes(d.groups, axis);
  std::vector<int64_t> cs = ir::splitSizes(d.c, axis);
  std::vector<int64_t> ks = ir::splitSizes(d.k, axis);
  for (size_t i = 0; i < gs.size(); ++i)
    if (cs[i] != gs[i] * d.cg() || ks[i] != gs[i] * d.kg())
      return false;
  return true;
}

// The signatures of one of the three conv ops, whose operand pairs are
// (x, w), (dy, w) and (dy, x): `batch`, `outChannels`, `inChannels` and
// `groups` are each the signature of that split, or none when it does not
// apply.
struct ConvSplits {
  std::optional<ShardingSignature> batch, outChannels, inChannels, groups;
};

void emit(const ConvSplits &s, Signatures &out) {
  for (const auto *sig : {&s.batch, &s.outChannels, &s.inChannels, &s.groups})
    if (*sig)
      out.push_back(**sig);
  // Linear in each operand.
  out.push_back(sharding::sig({P(), R()}, P()));
  out.push_back(sharding::sig({R(), P()}, P()));
}

} // namespace

void ruleConv2d(const ir::Op &op, const ir::MeshAxis &axis, Signatures &out) {
  ir::WindowDims d = ir::windowDims(op);
  ConvSplits s;
  if (splittable(d.n, axis))
    s.batch = sig({S(0), R()}, S(0));
  if (d.groups == 1 && splittable(d.k, axis))
    s.outChannels = sig({R(), S(0)}, S(1));
  if (d.groups == 1 && splittable(d.c, axis))
    s.inChannels = sig({S(1), S(1)}, P());
  if (wholeGroups(d, axis))
    s.groups = sig({S(1), S(0)}, S(1));
  emit(s, out);
}

// conv2d_grad_x(dy[N, K, OH, OW], w) -> dx[N, C, H, W]: K is contracted.
void ruleConv2dGradX(const ir::Op &op, const ir::MeshAxis &axis,
                     Signatures &out) {
  ir::WindowDims d = ir::windowDims(op);
  ConvSplits s;
  if (splittable(d.n, axis))
    s.batch = sig({S(0), R()}, S(0));
  if (d.groups == 1 && splittable(d.k, axis))
    s.outChannels = sig({S(1), S(0)}, P());
  if (d.groups == 1 && splittable(d.c, axis))
    s.inChannels = sig({R(), S(1)}, S(1));
  if (wholeGroups(d, axis))
    s.groups = sig({S(1), S(0)}, S(1));
  emit(s, out);
}

// conv2d_grad_w(dy[N, K, OH, OW], x[N, C, H, W]) -> dw[K, C/g, R, S]: the
// batch is contracted.
void ruleConv2dGradW(const ir::Op &op, const ir::MeshAxis &axis,
                     Signatures &out) {
  ir::WindowDims d = ir::windowDims(op);
  ConvSplits s;
  if (splittable(d.n, axis))
    s.batch = sig({S(0), S(0)}, P());
  if (d.groups == 1 && splittable(d.k, axis))
    s.outChannels = sig({S(1), R()}, S(0));
  if (d.groups == 1 && splittable(d.c, axis))
    s.inChannels = sig({R(), S(1)}, S(1));
  if (wholeGroups(d, axis))
    s.groups = sig({S(1), S(1)}, S(0));
  emit(s, out);
}

// Pools and their backward ops: every operand split alike along the batch
// or the channels; avg_pool2d and its backward are linear as well.
void rulePool2d(const ir::Op &op, const ir::MeshAxis &axis, Signatures &out) {
  const ir::TensorType &first = op.operand(0)->type();
  for (int64_t dim : {0, 1})
    if (splittable(first.shape[dim], axis))
      out.push_back(uniformSig(op, S(dim), S(dim)));
  if (op.kind() == ir::OpKind::AvgPool2d ||
      op.kind() == ir::OpKind::AvgPool2dGrad)
    out.push_back(sig({P()}, P()));
}

} // namespace mgc::passes::sharding
