// The fuse pass and the `fused` op: expressions parse, print and reject
// what is wrong; a fused training step gives bit for bit the unfused
// step's outputs and updates on the CPU (f32, and bf16 chains, whose
// rounding the fused expression repeats); the groups are the chains.
#include "CpuTestSupport.h"

#include "frontend/Frontend.h"
#include "ir/FusedExpr.h"
#include "ir/TextParser.h"
#include "passes/PassManager.h"

namespace mgc::backend::testing {
namespace {

TEST_CASE("fusion: expressions print as they parse") {
  std::string error;
  auto e = ir::FusedExpr::parse("mul(%0, %1); add(#0, 0.5);gelu( #1 )", 2,
                                error);
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
    options.defines = std::string(file) == "mlp.mg"
                          ? frontend::ConstOverrides{{"B", "8"},
                                                     {"D", "12"},
                                                     {"H", "16"}}
                          : frontend::ConstOverrides{{"V", "32"},
                                                     {"T", "8"},
                                                     {"D", "16"},
                                                     {"H", "2"},
                                                     {"L", "2"},
                                                     {"B", "2"}};
    auto m = frontend::compileModelFile(
        std::string(MGC_SOURCE_DIR) + "/samples/" + file, options, diag);
    REQUIRE(m);
    auto [plain, fused] = withAndWithoutFusion(
        std::move(m), "autodiff,optimizer,canonicalize,cse,dce");
    // The optimizer's update chains and the backward's elementwise ops.
    CHECK(countOps(*fused, ir::OpKind::Fused) >= 10);
    CHECK(fused->graph().numOps() < plain->graph().numOps());
    checkBitIdentical(*plain, *fused, randomArguments(*plain, 3, 8, -1, 1));
  }
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

} // namespace
} // namespace mgc::backend::testing
