// The CPU executor end to end: the sample models (forward and, through the
// autodiff pass, their gradients) against the interpreter within float32
// tolerance; bit-identical results run to run and for 1, 2 or 3 threads;
// updates of parameters and state.
#include "CpuTestSupport.h"
#include "SourcePath.h"

#include "frontend/Frontend.h"
#include "ir/Builder.h"
#include "passes/Autodiff.h"
#include "passes/PassManager.h"

namespace mgc::backend::testing {
namespace {

// Sums of up to ~1000 f32 products (sgemm over K = 784 or 1024) and f32
// elementwise chains between them: 1e-4 of max(|value|, 1).
constexpr double kModelTolerance = 1e-4;

std::unique_ptr<ir::Module> compileSample(const char *file,
                                          frontend::ConstOverrides defines,
                                          bool gradients) {
  DiagnosticEngine diag;
  frontend::CompileOptions options;
  options.defines = std::move(defines);
  auto m = frontend::compileModelFile(
      mgc::test::sourceDir() + "/samples/" + file, options, diag);
  REQUIRE(m);
  if (gradients)
    REQUIRE(succeeded(passes::differentiate(*m, diag)));
  return m;
}

frontend::ConstOverrides tinyGpt() {
  return {{"V", "64"}, {"T", "8"}, {"D", "16"},
          {"H", "2"},  {"L", "2"}, {"B", "2"}};
}

// Inputs random (ids below `ids`; `pos` holds 0, 1, ...), parameters from
// their initialisers.
ir::TensorMap modelArguments(const ir::Module &m, int64_t ids) {
  ir::TensorMap args = randomArguments(m, 11, ids, -1, 1);
  if (args.count("pos"))
    for (size_t i = 0; i < args.at("pos").data.size(); ++i)
      args.at("pos").data[i] = static_cast<double>(i);
  for (const auto &arg : m.graph().arguments())
    if (arg->kind() != ir::ValueKind::Input) {
      ir::HostTensor t = ir::initParameter(*arg, 5);
      for (double &v : t.data)
        v = ir::roundToDType(v, t.type.dtype);
      args[arg->name()] = t;
    }
  return args;
}

TEST_CASE("CPU executor: the MLP sample matches the interpreter") {
  auto m = compileSample("mlp.mg", {}, false);
  compareWithInterpreter(*m, modelArguments(*m, 10), kModelTolerance);
  auto g =
      compileSample("mlp.mg", {{"B", "8"}, {"D", "32"}, {"H", "24"}}, true);
  compareWithInterpreter(*g, modelArguments(*g, 10), kModelTolerance);
}

TEST_CASE("CPU executor: the tiny GPT sample matches the interpreter") {
  auto m = compileSample("gpt.mg", tinyGpt(), false);
  compareWithInterpreter(*m, modelArguments(*m, 64), kModelTolerance);
  auto g = compileSample("gpt.mg", tinyGpt(), true);
  compareWithInterpreter(*g, modelArguments(*g, 64), kModelTolerance);
}

TEST_CASE("CPU executor: bit-identical run to run and for any thread count") {
  // Large enough that every parallel loop runs several chunks.
  auto m = compileSample("gpt.mg",
                         {{"V", "128"},
                          {"T", "32"},
                          {"D", "64"},
                          {"H", "4"},
                          {"L", "2"},
                          {"B", "4"}},
                         true);
  ir::TensorMap args = modelArguments(*m, 128);
  cpu::RunResult one = runCpu(*m, args, 1);
  cpu::RunResult again = runCpu(*m, args, 1);
  cpu::RunResult two = runCpu(*m, args, 2);
  cpu::RunResult three = runCpu(*m, args, 3);
  REQUIRE(!one.outputs.empty());
  for (const auto &[name, t] : one.outputs) {
    INFO("output " << name);
    CHECK(bitIdentical(t, again.outputs.at(name)));
    CHECK(bitIdentical(t, two.outputs.at(name)));
    CHECK(bitIdentical(t, three.outputs.at(name)));
  }
}

// Training steps (autodiff, then the optimizer pass from the model's train
// section): several steps on the CPU, the updates fed back as the next
// step's parameters and state, against the interpreter doing the same.
void checkTraining(const char *file, frontend::ConstOverrides defines,
                   int64_t ids) {
  auto m = compileSample(file, std::move(defines), false);
  DiagnosticEngine diag;
  passes::PassManager pm;
  REQUIRE(succeeded(pm.parsePipeline("autodiff,optimizer", diag)));
  REQUIRE(succeeded(pm.run(*m, diag)));
  REQUIRE(!m->graph().updates().empty());
  ir::TensorMap ref = modelArguments(*m, ids);
  cpu::NamedTensors cpuArgs = toTensors(ref);
  auto exe = buildExecutable(cloneModule(*m), cpu::scratchBytes);
  auto ex = cpu::CpuExecutor::create(*exe, {}, diag);
  REQUIRE(ex);
  for (int step = 1; step <= 3; ++step) {
    INFO("step " << step);
    ir::TensorMap updated;
    auto want = ir::interpret(*m, ref, diag, &updated);
    REQUIRE(want.succeeded());
    auto got = ex->run(cpuArgs, diag);
    REQUIRE(got.succeeded());
    for (const auto &[name, t] : *want)
      compareTensors(got->outputs.at(name), t, kModelTolerance, name);
    REQUIRE(got->updates.size() == updated.size());
    for (const auto &[name, t] : updated)
      compareTensors(got->updates.at(name), t, kModelTolerance,
                     "update of " + name);
    ir::applyUpdates(ref, updated);
    for (auto &[name, t] : got->updates)
      cpuArgs[name] = std::move(t);
  }
}

TEST_CASE("CPU executor: training steps of the samples match the interpreter") {
  checkTraining("mlp.mg", {{"B", "8"}, {"D", "32"}, {"H", "24"}}, 10);
  checkTraining("gpt.mg", tinyGpt(), 64);
}

TEST_CASE("CPU executor: updates give the new values of parameters and state") {
  ir::Module m;
  ir::Builder b(m.graph());
  ir::Graph &g = m.graph();
  ir::TensorType t(ir::DType::F32, {3});
  ir::Value *w = g.addParam("w", t, ir::Init{});
  ir::Value *s = g.addState("s", t, ir::Init{});
  ir::Value *x = g.addInput("x", t);
  auto sum = b.create(ir::OpKind::Add, {w, x});
  REQUIRE(sum.ok());
  auto prod = b.create(ir::OpKind::Mul, {s, x});
  REQUIRE(prod.ok());
  g.addOutput("y", sum.value);
  g.addUpdate(w, sum.value);
  g.addUpdate(s, prod.value);
  ir::TensorMap args = randomArguments(m, 12, 1);
  compareWithInterpreter(m, args, 1e-6); // one f32 rounding
  cpu::RunResult r = runCpu(m, args);
  CHECK(r.updates.size() == 2);
  CHECK(r.updates.at("w").get(1) ==
        doctest::Approx(args.at("w").data[1] + args.at("x").data[1]));
}

} // namespace
} // namespace mgc::backend::testing

namespace mgc::backend::testing {
namespace {

// Transposes of matrices that only matmuls read are skipped, the matmuls
// reading the matrix through GEMM's transpose flags: arguments as a, as b,
// both, in matmul_epilogue, in bf16, in a batched matmul's b; results of
// ops (whose arena bytes must survive until the matmul); a transpose that
// is also an output, or that another op reads, is kept. Every output
// agrees with the interpreter.
TEST_CASE("CPU executor: matmuls read transposed matrices in place") {
  for (ir::DType f : {ir::DType::F32, ir::DType::F64, ir::DType::BF16}) {
    INFO(ir::dtypeName(f).str());
    OpCase c(f);
    ir::Value *x = c.x("x", {5, 7}), *w = c.x("w", {9, 7});
    ir::Value *v = c.x("v", {7, 5}), *bias = c.x("bias", {9});
    ir::Value *x3 = c.x("x3", {2, 5, 7});
    ir::Attrs swap;
    swap.set("perm", std::vector<int64_t>{1, 0});
    ir::Value *wT = c.op(ir::OpKind::Transpose, {w}, swap); // [7, 9]
    ir::Value *vT = c.op(ir::OpKind::Transpose, {v}, swap); // [5, 7]
    ir::Value *xT = c.op(ir::OpKind::Transpose, {x}, swap); // [7, 5]
    c.out("b_transposed", c.op(ir::OpKind::Matmul, {x, wT}));      // [5, 9]
    c.out("a_transposed", c.op(ir::OpKind::Matmul, {vT, wT}));     // [5, 9]
    c.out("batched", c.op(ir::OpKind::Matmul, {x3, wT}));          // [2, 5, 9]
    ir::Attrs epilogue;
    epilogue.set("epilogue", std::string("bias_gelu"));
    c.out("epilogue", c.op(ir::OpKind::MatmulEpilogue, {x, wT, bias}, epilogue));
    // Kept: an output, and read by an add.
    c.out("x_transposed", xT);
    c.out("v_sum", c.op(ir::OpKind::Add, {vT, vT}));
    c.out("a_kept", c.op(ir::OpKind::Matmul, {xT, x}));             // [7, 7]
    // Transposes of results: of x + x as a, of w * w as b.
    ir::Value *u = c.x("u", {5, 3});
    ir::Value *sumT = c.op(ir::OpKind::Transpose,
                           {c.op(ir::OpKind::Add, {x, x})}, swap); // [7, 5]
    c.out("result_a", c.op(ir::OpKind::Matmul, {sumT, u}));       // [7, 3]
    ir::Value *sqT = c.op(ir::OpKind::Transpose,
                          {c.op(ir::OpKind::Mul, {w, w})}, swap);  // [7, 9]
    c.out("result_b", c.op(ir::OpKind::Matmul, {x, sqT}));         // [5, 9]
    compareWithInterpreter(c.module, randomArguments(c.module, 3, 0, -1, 1),
                           f == ir::DType::BF16 ? 2e-2 : 1e-5);
  }
}

} // namespace
} // namespace mgc::backend::testing

namespace mgc::backend::testing {
namespace {

// A run given its own argument tensors as the update targets writes each
// fused update into its target (no copy) where nothing reads the old value
// later, and copies it where something does; either way the arguments end
// with the interpreter's new values, as a run without targets returns them.
TEST_CASE("CPU executor: updates written into their targets in place") {
  const char *text = R"IR(module @m {
  input %g : f32[300]
  param %w : f32[300] = zeros
  param %v : f32[300] = zeros
  state %m : f32[300] = zeros
  %0 = fused(%m, %g) {dtype = "f32", expr = "mul(%0, 0.9); add(#0, %1)", shape = [300]} : f32[300]
  %1 = fused(%w, %0) {dtype = "f32", expr = "mul(%1, 0.5); sub(%0, #0)", shape = [300]} : f32[300]
  %2 = fused(%v, %0) {dtype = "f32", expr = "add(%0, %1)", shape = [300]} : f32[300]
  %3 = sum(%v) {axes = [0], keepdims = false} : f32[]
  %4 = sum(%1) {axes = [0], keepdims = false} : f32[]
  output old_v = %3
  output new_w = %4
  update %m = %0
  update %w = %1
  update %v = %2
}
)IR";
  DiagnosticEngine diag;
  auto m = ir::parseModuleText("inplace.mgir", text, diag);
  REQUIRE(m);
  ir::TensorMap args = randomArguments(*m, 7, 0, -1, 1);
  ir::TensorMap updated;
  auto want = ir::interpret(*m, args, diag, &updated);
  REQUIRE(want.succeeded());

  auto exe = backend::buildExecutable(cloneModule(*m), cpu::scratchBytes);
  auto ex = cpu::CpuExecutor::create(*exe, cpu::CpuOptions(), diag);
  REQUIRE(ex);
  cpu::NamedTensors tensors = toTensors(args);
  cpu::CpuExecutor::TensorRefs refs;
  cpu::CpuExecutor::UpdateTargets into;
  for (auto &[name, t] : tensors) {
    refs[name] = &t;
    if (name != "g")
      into[name] = &t;
  }
  for (int step = 0; step < 2; ++step) {
    auto ran = ex->run(refs, diag, &into);
    REQUIRE(ran.succeeded());
    CHECK(ran->updates.empty());
    compareTensors(ran->outputs.at("old_v"), want->at("old_v"), 1e-5,
                   "old_v");
    compareTensors(ran->outputs.at("new_w"), want->at("new_w"), 1e-5,
                   "new_w");
    for (const char *name : {"m", "w", "v"})
      compareTensors(tensors.at(name), updated.at(name), 1e-5, name);
    // The next step starts from the new values.
    ir::applyUpdates(args, updated);
    updated.clear();
    want = ir::interpret(*m, args, diag, &updated);
    REQUIRE(want.succeeded());
  }
}

} // namespace
} // namespace mgc::backend::testing
