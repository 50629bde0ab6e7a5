// attention beyond one causal self-attention: grouped-query heads, query and
// key lengths that differ (causal rows aligned at the end), no causal mask,
// additive and padding masks that broadcast. The interpreter's forward and
// gradients against the same attention written with matmul, softmax and
// repeated keys; gradients against finite differences; the CPU kernels
// against the interpreter (rows that see no key included); the shape
// rule's errors; the sharding of grouped heads; the mask's missing
// gradient named by autodiff.
#include "AttentionVariants.h"
#include "CpuTestSupport.h"
#include "GradCheckSupport.h"

#include "ir/AttentionShape.h"
#include "ir/OpInfo.h"
#include "passes/Autodiff.h"
#include "passes/ShardingRules.h"

#include <cmath>
#include <limits>
#include <optional>
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
using attention::kInf;
using attention::kVariants;
using attention::Variant;

Ints lastTwoSwapped(int64_t rank) {
  Ints perm;
  for (int64_t d = 0; d < rank; ++d)
    perm.push_back(d);
  std::swap(perm[rank - 1], perm[rank - 2]);
  return perm;
}

Ints shapeOf(const Value *v) {
  return Ints(v->type().shape.begin(), v->type().shape.end());
}

// k[L..., Hkv, Tk, Dh] repeated to [L..., H, Tk, Dh]: each key/value head
// once per query head of its group.
Value *repeatHeads(GradCase &c, Value *k, int64_t heads) {
  Ints s = shapeOf(k);
  int64_t r = static_cast<int64_t>(s.size());
  if (r < 3 || s[r - 3] == heads)
    return k;
  Ints one = s, many = s, out = s;
  one.insert(one.begin() + (r - 2), 1);
  many.insert(many.begin() + (r - 2), heads / s[r - 3]);
  out[r - 3] = heads;
  Value *x = c.op(OpKind::Reshape, {k}, {{"shape", one}});
  x = c.op(OpKind::Broadcast, {x}, {{"shape", many}});
  return c.op(OpKind::Reshape, {x}, {{"shape", out}});
}

// softmax(q k^T / sqrt(Dh) + mask + causal) v with the keys repeated, the
// mask broadcast and the causal mask an additive input of 0 and -inf.
Value *composedAttention(GradCase &c, const Variant &var, Value *q, Value *k,
                         Value *v, Value *mask) {
  int64_t r = q->type().rank(), tq = var.q[r - 2], tk = var.kv[r - 2];
  Value *kr = repeatHeads(c, k, r >= 3 ? var.q[r - 3] : 1);
  Value *vr = repeatHeads(c, v, r >= 3 ? var.q[r - 3] : 1);
  Value *s = c.op(OpKind::Matmul,
                  {q, c.op(OpKind::Transpose, {kr},
                           {{"perm", lastTwoSwapped(r)}})});
  Ints scores = shapeOf(s);
  double scale = 1.0 / std::sqrt(double(var.q.back()));
  s = c.op(OpKind::Mul,
           {s, c.op(OpKind::Broadcast, {c.b.constant(scale, DType::F64)},
                    {{"shape", scores}})});
  if (mask)
    s = c.op(OpKind::Add,
             {s, c.op(OpKind::Broadcast, {mask}, {{"shape", scores}})});
  if (var.causal) {
    std::vector<double> bias(static_cast<size_t>(tq * tk));
    for (int64_t i = 0; i < tq; ++i)
      for (int64_t j = 0; j < tk; ++j)
        bias[i * tk + j] = j <= i + tk - tq ? 0.0 : -kInf;
    TensorType bt(DType::F64, {tq, tk});
    Value *b = c.module.graph().addInput("causal_bias", bt);
    c.args["causal_bias"] = ir::HostTensor(bt, bias);
    s = c.op(OpKind::Add,
             {s, c.op(OpKind::Broadcast, {b}, {{"shape", scores}})});
  }
  return c.op(OpKind::Matmul, {c.op(OpKind::Softmax, {s}), vr});
}

// The variant's mask as an input of the case (random in [-1, 1), -inf at
// the padded entries), or null.
Value *addMask(GradCase &c, const Variant &var) {
  if (!var.mask)
    return nullptr;
  TensorType mt(DType::F64, *var.mask);
  std::vector<double> data = gradcheck::randomValues(
      static_cast<size_t>(mt.size()), 5, "mask", -1, 1);
  for (size_t i : var.padded)
    data[i] = -kInf;
  Value *m = c.module.graph().addInput("mask", mt);
  c.args["mask"] = ir::HostTensor(mt, data);
  return m;
}

// loss = sum(attention(q, k, v[, mask]) * w) on params q, k, v, fused or
// composed.
void buildCase(GradCase &c, const Variant &var, bool fused) {
  Value *q = c.param("q", var.q), *k = c.param("k", var.kv),
        *v = c.param("v", var.kv);
  Value *mask = addMask(c, var);
  if (!fused) {
    c.finish(composedAttention(c, var, q, k, v, mask));
    return;
  }
  std::vector<Value *> operands{q, k, v};
  if (mask)
    operands.push_back(mask);
  c.finish(c.op(OpKind::Attention, operands, {{"causal", var.causal}}));
}

double largestAbs(const std::vector<double> &xs) {
  double m = 0;
  for (double x : xs)
    m = std::max(m, std::fabs(x));
  return m;
}

TEST_CASE("attention variants: forward and gradients equal the composed "
          "attention") {
  for (const Variant &var : kVariants) {
    if (!var.everyRowSees)
      continue;
    INFO(var.name);
    GradCase fused, composed;
    buildCase(fused, var, true);
    buildCase(composed, var, false);
    gradcheck::differentiateOrFail(fused.module);
    gradcheck::differentiateOrFail(composed.module);
    CHECK(fused.kinds().count(OpKind::AttentionGrad) == 1);
    ir::TensorMap a = gradcheck::evaluate(fused.module, fused.args);
    ir::TensorMap b = gradcheck::evaluate(composed.module, composed.args);
    std::vector<std::string> names{"loss"};
    for (const char *p : {"q", "k", "v"})
      names.push_back(passes::gradOutputName(p));
    for (const std::string &name : names) {
      INFO(name);
      REQUIRE(a.count(name) == 1);
      const ir::HostTensor &ga = a.at(name), &gb = b.at(name);
      REQUIRE(ga.type == gb.type);
      double largest = largestAbs(gb.data);
      CHECK(largest > 0);
      for (size_t i = 0; i < ga.data.size(); ++i) {
        INFO("element " << i << ": fused " << ga.data[i] << ", composed "
                        << gb.data[i]);
        CHECK(std::fabs(ga.data[i] - gb.data[i]) <= 1e-12 * largest);
      }
    }
  }
}

TEST_CASE("attention variants: gradients match finite differences") {
  for (const Variant &var : kVariants) {
    INFO(var.name);
    GradCase c, plain;
    buildCase(c, var, true);
    buildCase(plain, var, true);
    gradcheck::differentiateOrFail(c.module);
    CHECK(gradcheck::compareWithFiniteDifferences(plain.module, c.module,
                                                  c.args) > 0);
  }
}

// Rows that see no key (before the first key, or masked out) are 0, and so
// are their gradients: no NaN anywhere.
TEST_CASE("attention variants: a row that sees no key is 0") {
  for (const Variant &var : kVariants) {
    if (var.everyRowSees)
      continue;
    INFO(var.name);
    GradCase c;
    buildCase(c, var, true);
    gradcheck::differentiateOrFail(c.module);
    ir::Value *y = nullptr;
    for (const auto &op : c.module.graph().ops())
      if (op->kind() == OpKind::Attention)
        y = op->result();
    REQUIRE(y);
    c.module.graph().addOutput("y", y);
    ir::TensorMap out = gradcheck::evaluate(c.module, c.args);
    const std::vector<double> &yd = out.at("y").data;
    int64_t dh = var.q.back();
    size_t zeroRows = 0;
    for (size_t row = 0; row * dh < yd.size(); ++row) {
      bool zero = true;
      for (int64_t e = 0; e < dh; ++e) {
        CHECK(std::isfinite(yd[row * dh + e]));
        zero &= yd[row * dh + e] == 0;
      }
      zeroRows += zero;
    }
    CHECK(zeroRows > 0);
    for (const char *p : {"q", "k", "v"})
      for (double g : out.at(passes::gradOutputName(p)).data)
        CHECK(std::isfinite(g));
  }
}

TEST_CASE("attention variants: the CPU kernels match the interpreter") {
  for (DType f : {DType::F64, DType::F32, DType::BF16}) {
    INFO(ir::dtypeName(f).str());
    OpCase c(f);
    attention::buildKernelCases(c);
    // As for causal self-attention (AttentionGradTest.cpp).
    double tol = f == DType::F64 ? 1e-12 : f == DType::F32 ? 1e-5 : 1.0 / 64;
    compareWithInterpreter(c.module, attention::kernelArguments(c, 5), tol);
  }
}

TEST_CASE("attention variants: the CPU kernels are the same on 1 and 4 "
          "threads") {
  OpCase c(DType::F32);
  attention::buildKernelCases(c);
  ir::TensorMap args = attention::kernelArguments(c, 9);
  cpu::RunResult one = runCpu(c.module, args, 1),
                 four = runCpu(c.module, args, 4);
  for (const auto &[name, t] : one.outputs) {
    INFO(name);
    CHECK(bitIdentical(t, four.outputs.at(name)));
  }
}

ir::TypeOrError infer(llvm::ArrayRef<TensorType> operands, bool causal) {
  ir::Attrs attrs;
  attrs.set("causal", causal);
  ir::ShapeQuery q{"attention", operands, attrs};
  return ir::opInfo(OpKind::Attention).shapeRule(q);
}

TEST_CASE("attention variants: the shape rule names what does not fit") {
  TensorType q(DType::F32, {2, 6, 5, 8});
  TensorType kv(DType::F32, {2, 4, 7, 8});
  ir::TypeOrError heads = infer({q, kv, kv}, true);
  REQUIRE(!heads.ok());
  CHECK(heads.message() ==
        "attention needs query heads that the key/value heads divide, got 6 "
        "query heads (q f32[2, 6, 5, 8]) and 4 key/value heads (k f32[2, 4, "
        "7, 8])");
  TensorType kv3(DType::F32, {2, 3, 7, 8});
  REQUIRE(infer({q, kv3, kv3}, false).ok());
  CHECK(infer({q, kv3, kv3}, false).type() == q);

  TensorType wide(DType::F32, {2, 3, 7, 4});
  ir::TypeOrError width = infer({q, wide, wide}, true);
  REQUIRE(!width.ok());
  CHECK(width.message().find("with q's head width") != std::string::npos);
  ir::TypeOrError kvDiffer = infer({q, kv3, wide}, true);
  REQUIRE(!kvDiffer.ok());
  CHECK(kvDiffer.message() == "attention needs k and v of one type, got "
                              "f32[2, 3, 7, 8] and f32[2, 3, 7, 4]");
  TensorType batch(DType::F32, {3, 3, 7, 8});
  CHECK(!infer({q, batch, batch}, true).ok());

  TensorType padding(DType::F32, {2, 1, 1, 7});
  CHECK(infer({q, kv3, kv3, padding}, false).ok());
  TensorType square(DType::F32, {5, 5});
  ir::TypeOrError mask = infer({q, kv3, kv3, square}, false);
  REQUIRE(!mask.ok());
  CHECK(mask.message() ==
        "attention needs a mask of q's element type that broadcasts to the "
        "scores [2, 6, 5, 7] (each axis 1 or the scores' size, rank 2 to 4), "
        "got f32[5, 5]");
  TensorType f64mask(DType::F64, {5, 7});
  CHECK(!infer({q, kv3, kv3, f64mask}, false).ok());
  TensorType tooMany(DType::F32, {1, 2, 6, 5, 7});
  CHECK(!infer({q, kv3, kv3, tooMany}, false).ok());
  CHECK(!infer({q, kv3}, false).ok());
}

// Grouped heads split on tp with their key/value heads when every device's
// query heads are whole groups of its key/value heads; a padding mask is
// replicated along the heads and splits with the batch.
TEST_CASE("attention variants: grouped heads split with their key/value "
          "heads") {
  ir::Module m;
  ir::Builder b(m.graph());
  auto in = [&](const char *name, Shape s) {
    return m.graph().addInput(name, TensorType(DType::F32, s));
  };
  Value *q = in("q", {2, 8, 4, 2}), *k = in("k", {2, 2, 4, 2}),
        *mask = in("mask", {2, 1, 1, 4});
  ir::ValueOrError y =
      b.create(OpKind::Attention, {q, k, k, mask}, {{"causal", false}});
  REQUIRE(y.ok());
  const ir::Op &op = *y.value->definingOp();
  auto splitsHeads = [&](const ir::MeshAxis &axis) {
    for (const passes::ShardingSignature &s :
         passes::legalSignatures(op, axis))
      if (s.result == ir::Placement::split(1)) {
        CHECK(s.operands[1] == ir::Placement::split(1));
        CHECK(s.operands[3] == ir::Placement::replicate());
        return true;
      }
    return false;
  };
  CHECK(splitsHeads({"tp", 2, {}}));
  CHECK(!splitsHeads({"tp", 4, {}}));     // 2 key/value heads on 4 devices
  CHECK(!splitsHeads({"tp", 2, {3, 1}})); // 6 + 2 query heads: 1.5 groups
  bool batch = false;
  for (const passes::ShardingSignature &s :
       passes::legalSignatures(op, {"dp", 2, {}}))
    if (s.result == ir::Placement::split(0))
      batch = s.operands[3] == ir::Placement::split(0);
  CHECK(batch);
}

TEST_CASE("attention variants: a mask that needs a gradient is an error") {
  GradCase c;
  Value *q = c.param("q", {1, 3, 2}), *bias = c.param("bias", {3, 3});
  c.finish(c.op(OpKind::Attention, {q, q, q, bias}, {{"causal", false}}));
  std::string text;
  llvm::raw_string_ostream os(text);
  DiagnosticEngine diag(os);
  CHECK(failed(passes::differentiate(c.module, diag)));
  os.flush();
  CHECK(text.find("the mask of attention") != std::string::npos);
  CHECK(text.find("gets no gradient") != std::string::npos);
}

} // namespace
} // namespace mgc::backend::testing
