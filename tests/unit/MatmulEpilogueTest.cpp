// The matmul_epilogue op (ir/MatmulEpilogue.h): its shape rule and errors,
// the CPU kernel against the float64 interpreter for each epilogue (row
// blocks of GEMM, batched operands, an empty contraction, bf16 storage),
// and the clear errors of autodiff and sharding, which never see it.
#include "CpuTestSupport.h"

#include "ir/TextParser.h"
#include "passes/PassManager.h"

namespace mgc::backend::testing {
namespace {

using ir::DType;
using ir::OpKind;
using ir::TensorType;

ir::Attrs epilogue(const char *name) {
  return {{"epilogue", std::string(name)}};
}

std::string shapeError(std::vector<TensorType> operands, const char *name) {
  ir::TypeOrError r =
      ir::inferResultType(OpKind::MatmulEpilogue, operands, epilogue(name));
  return r.ok() ? "" : r.message();
}

TEST_CASE("matmul_epilogue: result types") {
  TensorType a(DType::BF16, {2, 5, 3}), b(DType::BF16, {3, 4});
  ir::TypeOrError r = ir::inferResultType(OpKind::MatmulEpilogue,
                                          {a, b, TensorType(DType::BF16, {4})},
                                          epilogue("bias_gelu"));
  REQUIRE(r.ok());
  CHECK(r.type() == TensorType(DType::BF16, {2, 5, 4}));
  TensorType h(DType::BF16, {2, 5, 4});
  r = ir::inferResultType(OpKind::MatmulEpilogue,
                          {a, TensorType(DType::BF16, {2, 3, 4}), h},
                          epilogue("gelu_grad"));
  REQUIRE(r.ok());
  CHECK(r.type() == h);
}

TEST_CASE("matmul_epilogue: shape rule errors say what is wrong") {
  TensorType a(DType::F32, {5, 3}), b(DType::F32, {3, 4});
  TensorType bias(DType::F32, {4}), h(DType::F32, {5, 4});
  CHECK(shapeError({a, b, bias}, "relu") ==
        "matmul_epilogue: unknown epilogue 'relu' (known: bias, bias_gelu, "
        "gelu_grad)");
  CHECK(shapeError({a, b}, "bias") ==
        "matmul_epilogue: epilogue 'bias' takes 3 operands (a, b, bias), "
        "got 2");
  CHECK(shapeError({a, b, h, h}, "gelu_grad") ==
        "matmul_epilogue: epilogue 'gelu_grad' takes 3 operands (a, b, h), "
        "got 4");
  CHECK(shapeError({a, TensorType(DType::F32, {4, 4}), bias}, "bias")
            .find("matmul_epilogue: matmul contracting dimensions differ") ==
        0);
  CHECK(shapeError({a, b, TensorType(DType::F32, {1, 4})}, "bias") ==
        "matmul_epilogue: bias must be f32[4] (one value per column of "
        "f32[5, 4]), got f32[1, 4]");
  CHECK(shapeError({a, b, TensorType(DType::BF16, {4})}, "bias_gelu") ==
        "matmul_epilogue: bias must be f32[4] (one value per column of "
        "f32[5, 4]), got bf16[4]");
  CHECK(shapeError({a, b, bias}, "gelu_grad") ==
        "matmul_epilogue: h must have the product's type f32[5, 4], got "
        "f32[4]");
  TensorType i(DType::I32, {5, 3}), j(DType::I32, {3, 4});
  CHECK(shapeError({i, j, TensorType(DType::I32, {4})}, "bias") ==
        "matmul_epilogue: needs floating-point operands, got i32[5, 3] @ "
        "i32[3, 4]");
}

// Each epilogue on a product of several row blocks (shared b), a batched
// one, and an empty contraction (the epilogue of zeros).
void buildCases(OpCase &c) {
  for (const char *e : {"bias", "bias_gelu", "gelu_grad"}) {
    std::string name(e);
    bool grad = name == "gelu_grad";
    auto extra = [&](const std::string &tag, ir::Shape out) {
      return grad ? c.x(tag + "_h", out) : c.x(tag + "_bias", {out.back()});
    };
    c.out(name + "_blocks",
          c.op(OpKind::MatmulEpilogue,
               {c.x(name + "_a", {2, 75, 9}), c.x(name + "_b", {9, 13}),
                extra(name + "_blocks", {2, 75, 13})},
               epilogue(e)));
    c.out(name + "_batched",
          c.op(OpKind::MatmulEpilogue,
               {c.x(name + "_p", {3, 6, 5}), c.x(name + "_q", {3, 5, 7}),
                extra(name + "_batched", {3, 6, 7})},
               epilogue(e)));
    c.out(name + "_empty",
          c.op(OpKind::MatmulEpilogue,
               {c.x(name + "_u", {4, 0}), c.x(name + "_v", {0, 3}),
                extra(name + "_empty", {4, 3})},
               epilogue(e)));
  }
}

TEST_CASE("matmul_epilogue: the CPU kernel matches the interpreter") {
  // f64 to rounding order, f32 to a few ulps of a 9-term product, bf16
  // (the product, the bias add and gelu each rounded) to 2^-6.
  struct Tol {
    DType f;
    double tol;
  } tols[] = {{DType::F64, 1e-12}, {DType::F32, 1e-5}, {DType::BF16, 1.0 / 64}};
  for (const Tol &t : tols) {
    INFO(ir::dtypeName(t.f).str());
    OpCase c(t.f);
    buildCases(c);
    for (uint64_t seed : {1, 2})
      compareWithInterpreter(c.module, randomArguments(c.module, seed, 1),
                             t.tol);
    // Whatever the number of threads, the same bits.
    ir::TensorMap args = randomArguments(c.module, 3, 1);
    cpu::RunResult one = runCpu(c.module, args, 1),
                   four = runCpu(c.module, args, 4);
    for (const auto &[name, tensor] : one.outputs) {
      INFO(name);
      CHECK(bitIdentical(tensor, four.outputs.at(name)));
    }
  }
}

std::string runPasses(const char *text, const char *pipeline) {
  std::string out;
  llvm::raw_string_ostream os(out);
  DiagnosticEngine diag(os);
  auto m = ir::parseModuleText("e.mgir", text, diag);
  REQUIRE(m);
  passes::PassManager pm;
  REQUIRE(succeeded(pm.parsePipeline(pipeline, diag)));
  CHECK(failed(pm.run(*m, diag)));
  return os.str();
}

TEST_CASE("matmul_epilogue: autodiff says why it has no gradient") {
  std::string diags = runPasses(R"(module @m {
  input %x : f32[4, 3]
  input %y : f32[4, 2]
  param %w : f32[3, 2] = normal(0.0, 0.02)
  param %b : f32[2] = zeros
  %0 = matmul_epilogue(%x, %w, %b) {epilogue = "bias_gelu"} : f32[4, 2]
  %1 = mse(%0, %y) : f32[]
  output loss = %1 [loss]
}
)",
                                "autodiff");
  INFO(diags);
  CHECK(diags.find("matmul_epilogue is made by the fuse pass after the "
                   "training step is built") != std::string::npos);
}

} // namespace
} // namespace mgc::backend::testing
