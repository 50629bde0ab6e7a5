#include "ir/Verifier.h"
#include "ir/Builder.h"

#include <doctest/doctest.h>

using namespace mgc;
using namespace mgc::ir;

namespace {
std::string verifyToString(const Module &m, bool &ok) {
  std::string out;
  llvm::raw_string_ostream os(out);
  DiagnosticEngine diag(os);
  ok = succeeded(verify(m, diag));
  os.flush();
  return out;
}
} // namespace

TEST_CASE("a well-formed module verifies") {
  Module m("m");
  Graph &g = m.graph();
  Value *x = g.addInput("x", TensorType(DType::F32, {2, 3}));
  Value *w = g.addParam("w", TensorType(DType::F32, {3, 4}),
                        Init{InitKind::Normal, 0, 0.02});
  Builder b(g);
  auto y = b.create(OpKind::Matmul, {x, w});
  REQUIRE(y.ok());
  auto loss = b.create(OpKind::Mean, {y.value},
                       Attrs{{"axes", std::vector<int64_t>{0, 1}}});
  REQUIRE(loss.ok());
  g.addOutput("y", y.value);
  g.addOutput("loss", loss.value, /*isLoss=*/true);
  bool ok = false;
  CHECK(verifyToString(m, ok) == "");
  CHECK(ok);
}

TEST_CASE("the verifier reports wrong declared types, order and names") {
  Module m("m");
  Graph &g = m.graph();
  Value *x = g.addInput("x", TensorType(DType::F32, {2, 3}));
  g.addInput("x", TensorType(DType::F32, {2, 3}));
  Loc loc = Loc::make("t.mgir", 4, 3);
  // Declared type disagrees with the shape rule.
  g.createOp(OpKind::Relu, {x}, {}, TensorType(DType::F32, {3, 2}), loc);
  // Uses a value defined later.
  Op *later = g.createOp(OpKind::Exp, {x}, {}, TensorType(DType::F32, {2, 3}));
  g.createOpBefore(g.ops().begin(), OpKind::Neg, {later->result()}, {},
                   TensorType(DType::F32, {2, 3}));
  g.addOutput("loss", x, /*isLoss=*/true);
  bool ok = true;
  std::string out = verifyToString(m, ok);
  CHECK(!ok);
  CHECK(out.find("duplicate argument name 'x'") != std::string::npos);
  CHECK(out.find("t.mgir:4:3: error: op %1 (relu) declares result type "
                 "f32[3, 2] but its operands give f32[2, 3]") !=
        std::string::npos);
  CHECK(out.find("op %0 (neg) uses operand 0 before it is defined") !=
        std::string::npos);
  CHECK(out.find("loss output 'loss' must be a floating-point scalar, got "
                 "f32[2, 3]") != std::string::npos);
}

TEST_CASE("builder reports shape-rule errors without creating the op") {
  Module m;
  Graph &g = m.graph();
  Value *a = g.addInput("a", TensorType(DType::F32, {2, 3}));
  Value *b = g.addInput("b", TensorType(DType::F32, {4, 3}));
  Builder builder(g);
  auto r = builder.create(OpKind::Add, {a, b});
  CHECK(!r.ok());
  CHECK(r.error == "add operand shapes differ: f32[2, 3] and f32[4, 3]");
  CHECK(g.numOps() == 0);
}
