// The flash-style attention kernels against the CPU kernels on fresh random
// inputs (the seed is printed on failure): attention and attention_grad in
// f32 (within 1e-5 of the result's largest element) and bf16 (within 1e-2)
// for T in {1, 17, 64, 200, 1024} and Dh in {8, 64}, plus wider and odd
// heads; the results are the same run to run. The device tests skip without
// a device; the create-time limits are checked everywhere.
#include "AttentionVariants.h"
#include "CudaTestSupport.h"

#include "ir/Builder.h"

namespace mgc::backend::testing {
namespace {

#if MGC_HAVE_CUDA

using ir::DType;
using ir::OpKind;
using ir::Shape;
using ir::Value;

// Outputs "y" = attention(q, k, v) and "g" = attention_grad(q, k, v, y, dy)
// on [heads..., t, dh].
void attentionCase(OpCase &c, Shape shape) {
  Value *q = c.x("q", shape), *k = c.x("k", shape), *v = c.x("v", shape),
        *dy = c.x("dy", shape);
  Value *y = c.op(OpKind::Attention, {q, k, v});
  c.out("y", y);
  c.out("g", c.op(OpKind::AttentionGrad, {q, k, v, y, dy}));
}

void compareAttention(DType f, Shape shape, double tol) {
  uint64_t seed = freshSeed();
  INFO(ir::TensorType(f, shape).str() << ", seed " << seed);
  OpCase c(f);
  attentionCase(c, shape);
  ir::TensorMap args = randomArguments(c.module, seed, 1);
  cpu::RunResult want = runCpu(c.module, args, 4);
  cpu::RunResult got = runCuda(c.module, args);
  for (const char *name : {"y", "g"})
    compareRelativeToLargest(got.outputs.at(name), want.outputs.at(name), tol,
                             std::string("output ") + name);
  // Every sum has a fixed order: a second run is bit for bit the same.
  cpu::RunResult again = runCuda(c.module, args);
  for (const char *name : {"y", "g"})
    CHECK(bitIdentical(again.outputs.at(name), got.outputs.at(name)));
}

std::vector<Shape> shapes() {
  std::vector<Shape> out;
  for (int64_t t : {1, 17, 64, 200, 1024})
    for (int64_t dh : {8, 64})
      out.push_back(t >= 1024 ? Shape{1, 2, t, dh} : Shape{2, 3, t, dh});
  out.push_back({2, 33, 128}); // the widest head, a partial last tile
  out.push_back({3, 65, 100}); // a width that is no multiple of 16
  out.push_back({5, 1});       // one column
  return out;
}

TEST_CASE("cuda: flash attention and its backward match the CPU in f32") {
  if (skipWithoutCuda())
    return;
  for (const Shape &s : shapes())
    compareAttention(DType::F32, s, 1e-5);
}

TEST_CASE("cuda: flash attention and its backward match the CPU in bf16") {
  if (skipWithoutCuda())
    return;
  for (const Shape &s : shapes())
    compareAttention(DType::BF16, s, 1e-2);
}

TEST_CASE("cuda: flash attention in f64 computes in f64") {
  if (skipWithoutCuda())
    return;
  compareAttention(DType::F64, {2, 70, 16}, 1e-12);
}

// Grouped-query heads, differing lengths, no causal mask, broadcast masks
// and rows that see no key (AttentionVariants.h), against the CPU kernels.
TEST_CASE("cuda: attention variants match the CPU") {
  if (skipWithoutCuda())
    return;
  for (DType f : {DType::F32, DType::BF16}) {
    INFO(ir::dtypeName(f).str());
    OpCase c(f);
    attention::buildKernelCases(c);
    ir::TensorMap args = attention::kernelArguments(c, freshSeed());
    cpu::RunResult want = runCpu(c.module, args, 4);
    cpu::RunResult got = runCuda(c.module, args);
    for (const auto &[name, t] : want.outputs)
      compareRelativeToLargest(got.outputs.at(name), t,
                               f == DType::F32 ? 1e-5 : 1e-2,
                               "output " + name);
  }
}

// No device needed: what the backend refuses and the scratch it plans.
TEST_CASE("cuda: attention heads wider than the kernels take are named") {
  for (OpKind kind : {OpKind::Attention, OpKind::AttentionGrad}) {
    for (int64_t dh : {128, 129}) {
      OpCase c(ir::DType::F32);
      ir::Shape s{2, 5, dh};
      std::vector<ir::Value *> operands;
      for (const char *n : {"q", "k", "v", "y", "dy"})
        if (kind == OpKind::AttentionGrad || operands.size() < 3)
          operands.push_back(c.x(n, s));
      ir::Value *r = c.op(kind, operands);
      std::string why = cuda::cudaUnsupported(*r->definingOp());
      INFO(ir::opName(kind).str() << " Dh " << dh << ": " << why);
      if (dh <= cuda::kMaxAttentionDh)
        CHECK(why.empty());
      else
        CHECK(why == ir::opName(kind).str() +
                         " on heads of width 129 is not supported on the "
                         "CUDA backend (at most 128)");
    }
  }
}

TEST_CASE("cuda: attention_grad plans two statistics per row of scratch") {
  OpCase c(ir::DType::BF16);
  ir::Shape s{2, 3, 7, 16};
  ir::Value *r =
      c.op(OpKind::AttentionGrad,
           {c.x("q", s), c.x("k", s), c.x("v", s), c.x("y", s), c.x("dy", s)});
  CHECK(cuda::cudaScratchBytes(*r->definingOp()) == 2 * 3 * 7 * 2 * 8);
  ir::Value *f =
      c.op(OpKind::Attention, {c.x("a", s), c.x("b", s), c.x("d", s)});
  CHECK(cuda::cudaScratchBytes(*f->definingOp()) == 0);
}

#endif

} // namespace
} // namespace mgc::backend::testing
