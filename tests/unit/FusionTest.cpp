// The fuse pass and the `fused` op: expressions parse, print and reject
// what is wrong; a fused training step gives bit for bit the unfused
// step's outputs and updates on the CPU (f32, and bf16 chains, whose
// rounding the fused expression repeats); the groups are the chains. The
// matmul epilogues: which matmuls of the samples' steps take which, where
// they must not, and bit for bit the unfused results in every float type.
#include "CpuTestSupport.h"
#include "SourcePath.h"

#include "frontend/Frontend.h"
#include "ir/FusedExpr.h"
#include "ir/TargetModule.h"
#include "ir/TextParser.h"
#include "passes/MixedPrecision.h"
#include "passes/PassManager.h"

namespace mgc::backend::testing {
namespace {

TEST_CASE("fusion: expressions print as they parse") {
  std::string error;
  auto e =
      ir::FusedExpr::parse("mul(%0, %1); add(#0, 0.5);gelu( #1 )", 2, error);
  REQUIRE_MESSAGE(e, error);
  CHECK(e->str() == "mul(%0, %1); add(#0, 0.5); gelu(#1)");
  CHECK(e->instrs.size() == 3);
  CHECK(e->instrs[1].args[1].kind == ir::FusedArg::Kind::Literal);
}

TEST_CASE("fusion: bad expressions say what is wrong") {
  struct Bad {
    const char *text, *message;
  } cases[] = {
      {"mul(%0, %2)", "instruction 0 'mul(%0, %2)': '%2' is not an operand "
                      "(the op has 2)"},
      {"exp(#0)", "'#0' is not the result of an earlier instruction"},
      {"frob(%0)", "unknown instruction 'frob'"},
      {"add(%0)", "add takes 2 arguments, got 1"},
      {"exp %0", "expected NAME(ARG, ...)"},
      {"exp(x)", "'x' is not %OPERAND, #INSTRUCTION or a number"},
  };
  for (const Bad &b : cases) {
    INFO(b.text);
    std::string error;
    CHECK(!ir::FusedExpr::parse(b.text, 2, error));
    CHECK(error.find(b.message) != std::string::npos);
  }
}

// `m` through `pipeline`, then a copy through fuse as well.
std::pair<std::unique_ptr<ir::Module>, std::unique_ptr<ir::Module>>
withAndWithoutFusion(std::unique_ptr<ir::Module> m, const char *pipeline) {
  DiagnosticEngine diag;
  passes::PassManager pm;
  REQUIRE(succeeded(pm.parsePipeline(pipeline, diag)));
  REQUIRE(succeeded(pm.run(*m, diag)));
  auto fused = cloneModule(*m);
  passes::PassManagerOptions options;
  options.verifyEach = true;
  passes::PassManager fuse(options);
  REQUIRE(succeeded(fuse.parsePipeline("fuse", diag)));
  REQUIRE(succeeded(fuse.run(*fused, diag)));
  return {std::move(m), std::move(fused)};
}

size_t countOps(const ir::Module &m, ir::OpKind kind) {
  size_t n = 0;
  for (const auto &op : m.graph().ops())
    n += op->kind() == kind;
  return n;
}

void checkBitIdentical(const ir::Module &plain, const ir::Module &fused,
                       const ir::TensorMap &args) {
  cpu::RunResult a = runCpu(plain, args), b = runCpu(fused, args);
  REQUIRE(a.outputs.size() == b.outputs.size());
  for (const auto &[name, t] : a.outputs) {
    INFO("output " << name);
    CHECK(bitIdentical(t, b.outputs.at(name)));
  }
  REQUIRE(a.updates.size() == b.updates.size());
  for (const auto &[name, t] : a.updates) {
    INFO("update of " << name);
    CHECK(bitIdentical(t, b.updates.at(name)));
  }
}

TEST_CASE("fusion: a fused training step equals the unfused one bit for bit") {
  for (const char *file : {"mlp.mg", "gpt.mg"}) {
    INFO(file);
    DiagnosticEngine diag;
    frontend::CompileOptions options;
    options.defines =
        std::string(file) == "mlp.mg"
            ? frontend::ConstOverrides{{"B", "8"}, {"D", "12"}, {"H", "16"}}
            : frontend::ConstOverrides{{"V", "32"}, {"T", "8"}, {"D", "16"},
                                       {"H", "2"},  {"L", "2"}, {"B", "2"}};
    auto m = frontend::compileModelFile(
        mgc::test::sourceDir() + "/samples/" + file, options, diag);
    REQUIRE(m);
    auto [plain, fused] = withAndWithoutFusion(
        std::move(m), "autodiff,optimizer,canonicalize,cse,dce");
    // The optimizer's update chains and the backward's elementwise ops.
    CHECK(countOps(*fused, ir::OpKind::Fused) >= 10);
    CHECK(fused->graph().numOps() < plain->graph().numOps());
    checkBitIdentical(*plain, *fused, randomArguments(*plain, 3, 8, -1, 1));
  }
}

// The fused ops of `m` that `target` refuses (ir::exceedsTarget).
std::vector<std::string> refusedBy(const ir::Module &m,
                                   const ir::TargetLimits &target) {
  std::vector<std::string> out;
  for (const auto &op : m.graph().ops())
    if (std::string why = ir::exceedsTarget(*op, target); !why.empty())
      out.push_back(why);
  return out;
}

TEST_CASE("fusion: a step fused for CUDA stays within its limits, with the "
          "same bits") {
  // GPT's gradient norm is one add chain over a sum per parameter (34 of
  // them here): fused without limits it is one op of 34 operands, which
  // the CUDA backend refuses.
  DiagnosticEngine diag;
  frontend::CompileOptions options;
  options.defines = {{"V", "32"}, {"T", "8"}, {"D", "16"},
                     {"H", "2"},  {"L", "4"}, {"B", "2"}};
  auto m = frontend::compileModelFile(
      mgc::test::sourceDir() + "/samples/gpt.mg", options, diag);
  REQUIRE(m);
  m->attrs().set("train.clip_grad_norm", 1.0);
  const char *kStep = "autodiff,optimizer,canonicalize,cse,dce";
  auto [plain, forCpu] = withAndWithoutFusion(cloneModule(*m), kStep);
  std::vector<std::string> refused = refusedBy(*forCpu, ir::kCudaTarget);
  REQUIRE(!refused.empty());
  CHECK(refused.front().find("operands is not supported on the CUDA "
                             "backend (at most 48 and 8)") !=
        std::string::npos);

  m->attrs().set(ir::kTargetAttr, std::string(ir::kCudaTarget.name));
  auto [plain2, forCuda] = withAndWithoutFusion(std::move(m), kStep);
  CHECK(refusedBy(*forCuda, ir::kCudaTarget).empty());
  // Split into several fused ops, not left unfused.
  CHECK(countOps(*forCuda, ir::OpKind::Fused) >
        countOps(*forCpu, ir::OpKind::Fused));
  checkBitIdentical(*plain2, *forCuda, randomArguments(*plain2, 3, 8, -1, 1));
}

TEST_CASE("fusion: the limits split a long chain into fused ops that fit") {
  // y = x0 + x1 + ... + x19, then exp: one chain of 20 ops over 20 operands.
  std::string text = "module @chain attributes {target = \"cuda\"} {\n";
  for (int i = 0; i < 20; ++i)
    text += "  input %x" + std::to_string(i) + " : f32[3]\n";
  text += "  %0 = add(%x0, %x1) : f32[3]\n";
  for (int i = 2; i < 20; ++i)
    text += "  %" + std::to_string(i - 1) + " = add(%" + std::to_string(i - 2) +
            ", %x" + std::to_string(i) + ") : f32[3]\n";
  text += "  %19 = exp(%18) : f32[3]\n  output y = %19\n}\n";
  DiagnosticEngine diag;
  auto m = ir::parseModuleText("chain.mgir", text, diag);
  REQUIRE(m);
  auto [plain, fused] = withAndWithoutFusion(std::move(m), "dce");
  CHECK(refusedBy(*fused, ir::kCudaTarget).empty());
  // 20 operands, at most 8 per op, each op after the first also reading
  // the one before: 3 fused ops, nothing left unfused.
  CHECK(countOps(*fused, ir::OpKind::Fused) == 3);
  CHECK(fused->graph().numOps() == 3);
  checkBitIdentical(*plain, *fused, randomArguments(*plain, 5, 8, -1, 1));
}

TEST_CASE("fusion: bf16 chains round where the unfused ops round") {
  const char *text = R"(module @chain {
  input %x : bf16[4, 6]
  input %b : bf16[6]
  input %w : f32[4, 6]
  %0 = broadcast(%b) {shape = [4, 6]} : bf16[4, 6]
  %1 = add(%x, %0) : bf16[4, 6]
  %2 = gelu(%1) : bf16[4, 6]
  %3 = constant() {dtype = "bf16", value = 0.3} : bf16[]
  %4 = broadcast(%3) {shape = [4, 6]} : bf16[4, 6]
  %5 = mul(%2, %4) : bf16[4, 6]
  %6 = cast(%5) {dtype = "f32"} : f32[4, 6]
  %7 = mul(%6, %w) : f32[4, 6]
  %8 = exp(%7) : f32[4, 6]
  output y = %8
}
)";
  DiagnosticEngine diag;
  auto m = ir::parseModuleText("chain.mgir", text, diag);
  REQUIRE(m);
  auto [plain, fused] = withAndWithoutFusion(std::move(m), "dce");
  REQUIRE(countOps(*fused, ir::OpKind::Fused) == 1);
  CHECK(countOps(*fused, ir::OpKind::Broadcast) == 0);
  CHECK(countOps(*fused, ir::OpKind::Constant) == 0);
  const ir::Op &op = *fused->graph().ops().back();
  CHECK(op.attrs().getString("expr") ==
        "add(%0, %1); cast_bf16(#0); gelu(#1); cast_bf16(#2); "
        "mul(#3, 0.30078125); cast_bf16(#4); cast_f32(#5); mul(#6, %2); "
        "exp(#7)");
  for (uint64_t seed : {1, 2, 3})
    checkBitIdentical(*plain, *fused, randomArguments(*plain, seed, 1));
}

TEST_CASE("fusion: a value used twice ends its group") {
  const char *text = R"(module @twice {
  input %x : f32[5]
  %0 = exp(%x) : f32[5]
  %1 = neg(%0) : f32[5]
  %2 = tanh(%1) : f32[5]
  %3 = add(%1, %2) : f32[5]
  %4 = sqrt(%3) : f32[5]
  output y = %4
  output z = %0
}
)";
  DiagnosticEngine diag;
  auto m = ir::parseModuleText("twice.mgir", text, diag);
  REQUIRE(m);
  auto [plain, fused] = withAndWithoutFusion(std::move(m), "dce");
  // exp is an output and neg has two uses: exp alone; neg alone; tanh, add
  // and sqrt fused.
  CHECK(countOps(*fused, ir::OpKind::Exp) == 1);
  CHECK(countOps(*fused, ir::OpKind::Neg) == 1);
  REQUIRE(countOps(*fused, ir::OpKind::Fused) == 1);
  CHECK(fused->graph().ops().back()->attrs().getString("expr") ==
        "tanh(%0); add(%0, #0); sqrt(#1)");
  checkBitIdentical(*plain, *fused, randomArguments(*plain, 5, 1, 0, 2));
}

// --- Matmul epilogues (passes/FusionEpilogue.cpp).

size_t countEpilogues(const ir::Module &m, const char *epilogue) {
  size_t n = 0;
  for (const auto &op : m.graph().ops())
    n += op->kind() == ir::OpKind::MatmulEpilogue &&
         op->attrs().getString("epilogue") == epilogue;
  return n;
}

std::unique_ptr<ir::Module> compileSample(const char *file,
                                          const char *precision) {
  DiagnosticEngine diag;
  frontend::CompileOptions options;
  options.warnUnused = false;
  options.defines =
      std::string(file) == "mlp.mg"
          ? frontend::ConstOverrides{{"B", "8"}, {"D", "12"}, {"H", "16"}}
          : frontend::ConstOverrides{{"V", "32"}, {"T", "8"}, {"D", "16"},
                                     {"H", "2"},  {"L", "2"}, {"B", "2"}};
  auto m = frontend::compileModelFile(
      mgc::test::sourceDir() + "/samples/" + file, options, diag);
  REQUIRE(m);
  m->attrs().set(passes::kPrecisionAttr, std::string(precision));
  return m;
}

TEST_CASE("fusion: matmul epilogues of the training steps, f32 and bf16") {
  // The GPT (L = 2) has five biased matmuls per layer (q, v, the attention
  // projection, the MLP's two) and one gelu_grad per layer; its GELU's
  // input is read again by gelu_grad, so no bias_gelu. The MLP has three
  // biased matmuls and ReLU.
  struct Want {
    const char *file;
    size_t bias, biasGelu, geluGrad;
  } wants[] = {{"mlp.mg", 3, 0, 0}, {"gpt.mg", 10, 0, 2}};
  for (const Want &w : wants)
    for (const char *precision : {"fp32", "bf16"}) {
      INFO(w.file << " in " << precision);
      auto [plain, fused] = withAndWithoutFusion(
          compileSample(w.file, precision),
          "mixed-precision,autodiff,optimizer,canonicalize,cse,dce");
      CHECK(countEpilogues(*fused, "bias") == w.bias);
      CHECK(countEpilogues(*fused, "bias_gelu") == w.biasGelu);
      CHECK(countEpilogues(*fused, "gelu_grad") == w.geluGrad);
      CHECK(countOps(*fused, ir::OpKind::Matmul) +
                countOps(*fused, ir::OpKind::MatmulEpilogue) ==
            countOps(*plain, ir::OpKind::Matmul));
      CHECK(countOps(*fused, ir::OpKind::GeluGrad) == 0);
      for (uint64_t seed : {3, 4})
        checkBitIdentical(*plain, *fused,
                          randomArguments(*plain, seed, 8, -1, 1));
    }
}

TEST_CASE("fusion: a forward program takes GELU into the epilogue") {
  for (const char *precision : {"fp32", "bf16"}) {
    INFO(precision);
    auto [plain, fused] =
        withAndWithoutFusion(compileSample("gpt.mg", precision),
                             "mixed-precision,canonicalize,cse,dce");
    CHECK(countEpilogues(*fused, "bias_gelu") == 2);
    CHECK(countEpilogues(*fused, "bias") == 8);
    CHECK(countOps(*fused, ir::OpKind::Gelu) == 0);
    checkBitIdentical(*plain, *fused, randomArguments(*plain, 9, 8, -1, 1));
  }
}

TEST_CASE("fusion: an epilogue only where the product has no other use") {
  const char *text = R"(module @uses {
  input %x : f32[4, 8]
  input %w : f32[8, 6]
  input %b : f32[6]
  input %h : f32[4, 6]
  input %r : f32[1, 6]
  %0 = matmul(%x, %w) : f32[4, 6]
  %1 = broadcast(%b) {shape = [4, 6]} : f32[4, 6]
  %2 = add(%1, %0) : f32[4, 6]
  %3 = gelu(%2) : f32[4, 6]
  %4 = matmul(%x, %w) : f32[4, 6]
  %5 = add(%4, %1) : f32[4, 6]
  %6 = matmul(%x, %w) : f32[4, 6]
  %7 = gelu_grad(%6, %h) : f32[4, 6]
  %8 = matmul(%x, %w) : f32[4, 6]
  %9 = broadcast(%r) {shape = [4, 6]} : f32[4, 6]
  %10 = add(%8, %9) : f32[4, 6]
  output y = %3
  output z = %2
  output p = %4
  output q = %5
  output g = %7
  output s = %10
}
)";
  DiagnosticEngine diag;
  auto m = ir::parseModuleText("uses.mgir", text, diag);
  REQUIRE(m);
  auto [plain, fused] = withAndWithoutFusion(std::move(m), "dce");
  // %0 -> bias (operands in either order), its gelu stays (%2 is an
  // output); %4 is an output: no epilogue; %7 -> gelu_grad; a bias of
  // [1, 6] is not a bias[N].
  CHECK(countEpilogues(*fused, "bias") == 1);
  CHECK(countEpilogues(*fused, "gelu_grad") == 1);
  CHECK(countEpilogues(*fused, "bias_gelu") == 0);
  CHECK(countOps(*fused, ir::OpKind::Matmul) == 2);
  CHECK(countOps(*fused, ir::OpKind::Gelu) == 1);
  CHECK(countOps(*fused, ir::OpKind::Broadcast) == 2);
  for (uint64_t seed : {1, 2})
    checkBitIdentical(*plain, *fused, randomArguments(*plain, seed, 1));
}

// bias_gelu and gelu_grad on products of several GEMM row blocks (shared
// and batched b), in each floating type: the epilogue rounds where the
// unfused add and gelu round.
TEST_CASE("fusion: epilogues round as the unfused ops, in every float type") {
  const char *text = R"(module @mlp {
  input %x : DT[2, 70, 24]
  input %w : DT[24, 40]
  input %v : DT[2, 24, 40]
  input %b : DT[40]
  input %h : DT[2, 70, 40]
  %0 = matmul(%x, %w) : DT[2, 70, 40]
  %1 = broadcast(%b) {shape = [2, 70, 40]} : DT[2, 70, 40]
  %2 = add(%0, %1) : DT[2, 70, 40]
  %3 = gelu(%2) : DT[2, 70, 40]
  %4 = matmul(%x, %v) : DT[2, 70, 40]
  %5 = gelu_grad(%4, %h) : DT[2, 70, 40]
  output y = %3
  output g = %5
}
)";
  for (const char *dt : {"f32", "bf16", "f16", "f64"}) {
    INFO(dt);
    std::string src = text;
    for (size_t at; (at = src.find("DT")) != std::string::npos;)
      src.replace(at, 2, dt);
    DiagnosticEngine diag;
    auto m = ir::parseModuleText("mlp.mgir", src, diag);
    REQUIRE(m);
    auto [plain, fused] = withAndWithoutFusion(std::move(m), "dce");
    REQUIRE(countOps(*fused, ir::OpKind::MatmulEpilogue) == 2);
    CHECK(countEpilogues(*fused, "bias_gelu") == 1);
    CHECK(countEpilogues(*fused, "gelu_grad") == 1);
    CHECK(fused->graph().numOps() == 2);
    for (uint64_t seed : {1, 2, 3})
      checkBitIdentical(*plain, *fused, randomArguments(*plain, seed, 1));
  }
}

} // namespace
} // namespace mgc::backend::testing
