// matmul_epilogue on the CUDA backend: cuBLASLt's epilogues (bias, GELU
// after the bias, the GELU gradient) and the fallbacks after a plain GEMM,
// against the CPU kernel on fresh random inputs (f32 within 1e-5, bf16
// within 1e-2 of the result's largest element); which plan each case gets.
// Skips without a device.
#include "CudaTestSupport.h"

#include "ir/Builder.h"

namespace mgc::backend::testing {
namespace {

#if MGC_HAVE_CUDA

using ir::DType;
using ir::OpKind;

ir::Attrs epilogue(const char *name) {
  return {{"epilogue", std::string(name)}};
}

// Row lengths that are multiples of 8 (cuBLASLt's DGELU) and odd ones (the
// fallback), a shared b over several rows of batches and a batched b, and
// an empty contraction.
void buildCases(OpCase &c, const char *e) {
  std::string name(e);
  bool grad = name == "gelu_grad";
  auto extra = [&](const std::string &tag, ir::Shape out) {
    return grad ? c.x(tag + "_h", out) : c.x(tag + "_bias", {out.back()});
  };
  c.out("wide", c.op(OpKind::MatmulEpilogue,
                     {c.x("a", {4, 33, 48}), c.x("b", {48, 64}),
                      extra("wide", {4, 33, 64})},
                     epilogue(e)));
  c.out("odd",
        c.op(OpKind::MatmulEpilogue,
             {c.x("p", {37, 29}), c.x("q", {29, 13}), extra("odd", {37, 13})},
             epilogue(e)));
  c.out("batched", c.op(OpKind::MatmulEpilogue,
                        {c.x("u", {3, 17, 24}), c.x("v", {3, 24, 16}),
                         extra("batched", {3, 17, 16})},
                        epilogue(e)));
  c.out("empty",
        c.op(OpKind::MatmulEpilogue,
             {c.x("s", {5, 0}), c.x("t", {0, 8}), extra("empty", {5, 8})},
             epilogue(e)));
}

void compareEpilogue(const char *e, DType f, double tol) {
  uint64_t seed = freshSeed();
  INFO("epilogue " << e << " in " << ir::dtypeName(f).str() << ", seed "
                   << seed);
  OpCase c(f);
  buildCases(c, e);
  ir::TensorMap args = randomArguments(c.module, seed, 1);
  cpu::RunResult want = runCpu(c.module, args);
  cpu::RunResult got = runCuda(c.module, args);
  REQUIRE(got.outputs.size() == want.outputs.size());
  for (const auto &[name, t] : want.outputs)
    compareRelativeToLargest(got.outputs.at(name), t, tol, "output " + name);
}

TEST_CASE("cuda: matmul epilogue bias, bias_gelu and gelu_grad match the "
          "CPU kernel") {
  if (skipWithoutCuda())
    return;
  for (const char *e : {"bias", "bias_gelu", "gelu_grad"}) {
    compareEpilogue(e, DType::F32, 1e-5);
    compareEpilogue(e, DType::BF16, 1e-2);
  }
}

// The part cuBLASLt takes, decided when the plan is made.
TEST_CASE("cuda: matmul epilogue plans use cuBLASLt's epilogues where they "
          "can") {
  if (skipWithoutCuda())
    return;
  cublasLtHandle_t lt = nullptr;
  REQUIRE(cublasLtCreate(&lt) == CUBLAS_STATUS_SUCCESS);
  struct Want {
    DType f;
    const char *epilogue;
    int64_t n;
    cublasLtEpilogue_t lt;
    cuda::EpilogueAfter after;
  } wants[] = {
      {DType::BF16, "bias", 64, CUBLASLT_EPILOGUE_BIAS,
       cuda::EpilogueAfter::None},
      {DType::BF16, "bias_gelu", 64, CUBLASLT_EPILOGUE_GELU_BIAS,
       cuda::EpilogueAfter::None},
      {DType::BF16, "gelu_grad", 64, CUBLASLT_EPILOGUE_DGELU,
       cuda::EpilogueAfter::None},
      {DType::BF16, "gelu_grad", 13, CUBLASLT_EPILOGUE_DEFAULT,
       cuda::EpilogueAfter::GeluGrad},
      {DType::F32, "bias", 64, CUBLASLT_EPILOGUE_BIAS,
       cuda::EpilogueAfter::None},
      {DType::F32, "bias_gelu", 64, CUBLASLT_EPILOGUE_BIAS,
       cuda::EpilogueAfter::Gelu},
      {DType::F32, "gelu_grad", 64, CUBLASLT_EPILOGUE_DEFAULT,
       cuda::EpilogueAfter::GeluGrad},
      {DType::F64, "bias_gelu", 64, CUBLASLT_EPILOGUE_DEFAULT,
       cuda::EpilogueAfter::BiasGelu},
  };
  for (const Want &w : wants) {
    INFO(w.epilogue << " in " << ir::dtypeName(w.f).str() << ", N = " << w.n);
    OpCase c(w.f);
    bool grad = std::string(w.epilogue) == "gelu_grad";
    ir::Value *r = c.op(OpKind::MatmulEpilogue,
                        {c.x("a", {128, 96}), c.x("b", {96, w.n}),
                         grad ? c.x("h", {128, w.n}) : c.x("bias", {w.n})},
                        epilogue(w.epilogue));
    DiagnosticEngine diag;
    auto plan =
        cuda::MatmulPlan::create(*r->definingOp(), lt, size_t(32) << 20, diag);
    REQUIRE(plan);
    CHECK(plan->ltEpilogue() == w.lt);
    CHECK(plan->after() == w.after);
  }
  cublasLtDestroy(lt);
}

#endif

} // namespace
} // namespace mgc::backend::testing
