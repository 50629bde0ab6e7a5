// attention_grad, the fused backward of attention: its shape rule, the
// interpreter against finite differences and against the gradient of the
// composed attention (matmul, causal_mask, softmax), the CPU kernel against
// the interpreter (f64, f32, bf16; T = 1, odd T and Dh, a head wider than
// the kernel's column block), and what autodiff emits.
#include "CpuTestSupport.h"
#include "GradCheckSupport.h"

#include "ir/OpInfo.h"
#include "passes/Autodiff.h"

#include <cmath>
#include <string>
#include <vector>

namespace mgc::backend::testing {
namespace {

using gradcheck::GradCase;
using ir::DType;
using ir::OpKind;
using ir::Shape;
using ir::TensorType;
using ir::Value;
using Ints = std::vector<int64_t>;

ir::TypeOrError inferGrad(llvm::ArrayRef<TensorType> operands) {
  ir::Attrs attrs;
  attrs.set("causal", true);
  ir::ShapeQuery q{"attention_grad", operands, attrs};
  return ir::opInfo(OpKind::AttentionGrad).shapeRule(q);
}

TEST_CASE("attention_grad: the result holds dq, dk, dv per query head") {
  TensorType t(DType::F32, {2, 3, 7, 5});
  ir::TypeOrError r = inferGrad({t, t, t, t, t});
  REQUIRE(r.ok());
  CHECK(r.type() == TensorType(DType::F32, {2, 3, 21, 5}));
  TensorType one(DType::BF16, {1, 4});
  ir::TypeOrError r1 = inferGrad({one, one, one, one, one});
  REQUIRE(r1.ok());
  CHECK(r1.type() == TensorType(DType::BF16, {3, 4}));
  // Grouped-query cross attention: Tq = 7 query rows, Tk = 4 keys.
  TensorType kv(DType::F32, {2, 1, 4, 5});
  ir::TypeOrError cross = inferGrad({t, kv, kv, t, t});
  REQUIRE(cross.ok());
  CHECK(cross.type() == TensorType(DType::F32, {2, 3, 15, 5}));

  TensorType other(DType::F32, {2, 3, 6, 5});
  ir::TypeOrError bad = inferGrad({t, t, t, t, other});
  REQUIRE(!bad.ok());
  CHECK(bad.message() == "attention_grad needs dy of q's type, got "
                         "f32[2, 3, 6, 5] beside q f32[2, 3, 7, 5]");
  TensorType half(DType::F64, {2, 3, 7, 5});
  ir::TypeOrError mixed = inferGrad({t, t, t, half, t});
  REQUIRE(!mixed.ok());
  CHECK(mixed.message().find("needs y of q's type, got f64[2, 3, 7, 5]") !=
        std::string::npos);
  TensorType ints(DType::I32, {4, 2});
  ir::TypeOrError integer = inferGrad({ints, ints, ints, ints, ints});
  REQUIRE(!integer.ok());
  CHECK(integer.message() == "attention_grad needs floating-point q of shape "
                             "[..., T, Dh], got i32[4, 2]");
  TensorType vec(DType::F32, {4});
  CHECK(!inferGrad({vec, vec, vec, vec, vec}).ok());
}

// q k^T / sqrt(Dh), causal mask, softmax, @ v, from existing ops.
Value *composedAttention(GradCase &c, Value *q, Value *k, Value *v) {
  int64_t rank = q->type().rank();
  Ints perm;
  for (int64_t d = 0; d < rank; ++d)
    perm.push_back(d);
  std::swap(perm[rank - 1], perm[rank - 2]);
  Value *s =
      c.op(OpKind::Matmul, {q, c.op(OpKind::Transpose, {k}, {{"perm", perm}})});
  double scale = 1.0 / std::sqrt(double(q->type().shape.back()));
  Value *sc =
      c.op(OpKind::Broadcast, {c.b.constant(scale, DType::F64)},
           {{"shape", Ints(s->type().shape.begin(), s->type().shape.end())}});
  Value *p = c.op(OpKind::Softmax,
                  {c.op(OpKind::CausalMask, {c.op(OpKind::Mul, {s, sc})})});
  return c.op(OpKind::Matmul, {p, v});
}

// loss = sum(attention(q, k, v) * w), fused or composed, on params q, k, v.
void attentionCase(GradCase &c, Shape shape, bool fused) {
  Value *q = c.param("q", shape), *k = c.param("k", shape),
        *v = c.param("v", shape);
  c.finish(fused ? c.op(OpKind::Attention, {q, k, v})
                 : composedAttention(c, q, k, v));
}

const std::vector<Shape> kShapes = {
    {1, 1, 1, 3}, // T = 1: every gradient but dv is 0
    {2, 3, 7, 5}, // odd T and Dh
    {6, 4},       // one head, no leading axes
    {1, 2, 12, 1}};

TEST_CASE("attention_grad: gradients of attention match finite differences") {
  for (const Shape &shape : kShapes) {
    INFO("shape " << TensorType(DType::F64, shape).str());
    GradCase c, plain;
    attentionCase(c, shape, true);
    attentionCase(plain, shape, true);
    gradcheck::differentiateOrFail(c.module);
    CHECK(c.kinds().count(OpKind::AttentionGrad) == 1);
    CHECK(gradcheck::compareWithFiniteDifferences(plain.module, c.module,
                                                  c.args) > 0);
  }
}

// The fused gradient equals the gradient of the composed form (which
// materialises the scores) to rounding.
TEST_CASE("attention_grad: gradients equal those of the composed attention") {
  for (const Shape &shape : kShapes) {
    INFO("shape " << TensorType(DType::F64, shape).str());
    GradCase fused, composed;
    attentionCase(fused, shape, true);
    attentionCase(composed, shape, false);
    gradcheck::differentiateOrFail(fused.module);
    gradcheck::differentiateOrFail(composed.module);
    CHECK(composed.kinds().count(OpKind::AttentionGrad) == 0);
    ir::TensorMap a = gradcheck::evaluate(fused.module, fused.args);
    ir::TensorMap b = gradcheck::evaluate(composed.module, fused.args);
    for (const char *p : {"q", "k", "v"}) {
      std::string name = passes::gradOutputName(p);
      INFO(name);
      REQUIRE(a.count(name) == 1);
      const ir::HostTensor &ga = a.at(name), &gb = b.at(name);
      REQUIRE(ga.type == gb.type);
      double largest = 0;
      for (double x : gb.data)
        largest = std::max(largest, std::fabs(x));
      // With T = 1 every p is 1, so ds and with it dq and dk are 0.
      bool zero = shape[shape.size() - 2] == 1 && std::string(p) != "v";
      CHECK((largest > 0) != zero);
      for (size_t i = 0; i < ga.data.size(); ++i) {
        INFO("element " << i << ": fused " << ga.data[i] << ", composed "
                        << gb.data[i]);
        CHECK(std::fabs(ga.data[i] - gb.data[i]) <= 1e-12 * largest);
      }
    }
  }
}

// With y not the forward result, D = rowsum(dy * y) still comes from the y
// operand: the op is what its definition says, not the true gradient.
TEST_CASE("attention_grad: D comes from the y operand") {
  OpCase c(DType::F64);
  Shape s{1, 3, 2};
  Value *q = c.x("q", s), *k = c.x("k", s), *v = c.x("v", s), *y = c.x("y", s),
        *dy = c.x("dy", s);
  c.out("g", c.op(OpKind::AttentionGrad, {q, k, v, y, dy}));
  ir::TensorMap args = randomArguments(c.module, 11, 1);
  DiagnosticEngine diag;
  auto r1 = ir::interpret(c.module, args, diag);
  REQUIRE(r1.succeeded());
  for (double &x : args.at("y").data)
    x += 0.5;
  auto r2 = ir::interpret(c.module, args, diag);
  REQUIRE(r2.succeeded());
  const std::vector<double> &g1 = r1->at("g").data, &g2 = r2->at("g").data;
  // Row 0 sees one key: p = 1, ds = dy.v - dy.y changes with y, and dq_0 =
  // ds * k_0 / sqrt(2). dv does not depend on y.
  CHECK(g1[0] != g2[0]);
  for (size_t i = 12; i < 18; ++i)
    CHECK(g1[i] == g2[i]);
}

// One output per shape; inputs uniform in [-2, 2), y = attention(q, k, v)
// so that the values are those of training.
void addCase(OpCase &c, const std::string &name, Shape shape) {
  Value *q = c.x(name + "q", shape), *k = c.x(name + "k", shape),
        *v = c.x(name + "v", shape), *dy = c.x(name + "dy", shape);
  Value *y = c.op(OpKind::Attention, {q, k, v});
  c.out(name, c.op(OpKind::AttentionGrad, {q, k, v, y, dy}));
}

void buildKernelCases(OpCase &c) {
  addCase(c, "one", {2, 1, 3});       // T = 1
  addCase(c, "odd", {2, 3, 7, 5});    // odd T and Dh
  addCase(c, "rows", {1, 33, 8});     // more rows than a parallel chunk
  addCase(c, "wide", {1, 2, 5, 300}); // Dh above the kernel's column block
  addCase(c, "long", {1, 1030, 3});   // rows longer than the score cache
}

TEST_CASE("attention_grad: the CPU kernel matches the interpreter") {
  for (DType f : {DType::F64, DType::F32, DType::BF16}) {
    INFO(ir::dtypeName(f).str());
    OpCase c(f);
    buildKernelCases(c);
    // f64 to rounding; f32 sums rows of up to 1030 products in f32; bf16
    // rounds each result once after f32 arithmetic (2^-9), but its inputs
    // here include a y rounded to bf16 by the forward (so D is off by up to
    // 2^-9 of |dy||y|): within 2^-6 of max(|value|, 1).
    double tol = f == DType::F64 ? 1e-12 : f == DType::F32 ? 1e-5 : 1.0 / 64;
    compareWithInterpreter(c.module, randomArguments(c.module, 5, 1), tol);
  }
}

TEST_CASE("attention_grad: the CPU kernel is the same on 1 and 4 threads") {
  OpCase c(DType::F32);
  buildKernelCases(c);
  ir::TensorMap args = randomArguments(c.module, 9, 1);
  cpu::RunResult one = runCpu(c.module, args, 1),
                 four = runCpu(c.module, args, 4);
  for (const auto &[name, t] : one.outputs) {
    INFO(name);
    CHECK(bitIdentical(t, four.outputs.at(name)));
  }
}

// The scratch space (row statistics) is planned for attention_grad only.
TEST_CASE("attention_grad: the CPU kernel's scratch space") {
  OpCase c(DType::F32);
  addCase(c, "g", {2, 3, 7, 5});
  for (const auto &op : c.module.graph().ops())
    if (op->kind() == OpKind::AttentionGrad)
      CHECK(cpu::scratchBytes(*op) == 2 * 3 * 7 * 2 * sizeof(double));
    else
      CHECK(cpu::scratchBytes(*op) == 0);
}

// Autodiff emits one attention_grad and a slice for each needed gradient.
TEST_CASE("attention_grad: autodiff slices only the needed gradients") {
  GradCase c;
  Shape s{2, 4, 3};
  Value *q = c.param("q", s);
  Value *kv = c.module.graph().addInput("kv", TensorType(DType::F64, s));
  c.args["kv"] = ir::HostTensor(TensorType(DType::F64, s),
                                gradcheck::randomValues(24, 3, "kv", -1, 1));
  c.finish(c.op(OpKind::Attention, {q, kv, kv}));
  gradcheck::differentiateOrFail(c.module);
  int grads = 0, slices = 0;
  for (const auto &op : c.module.graph().ops()) {
    grads += op->kind() == OpKind::AttentionGrad;
    slices += op->kind() == OpKind::Slice;
  }
  CHECK(grads == 1);
  CHECK(slices == 1);
}

} // namespace
} // namespace mgc::backend::testing
