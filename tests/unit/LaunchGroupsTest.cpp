// Grouped launches (backend/LaunchGroups.h), which need no device: launch
// keys, runs split where an op reads another's result, lifetimes that keep
// a group's operands from sharing bytes with its results, the optimizer's
// update ops brought together (one launch per update expression), and the
// reordered step giving bit for bit the results of the original order on
// the CPU backend.
#include "CpuTestSupport.h"
#include "SourcePath.h"

#include "backend/LaunchGroups.h"
#include "backend/cpu/Kernels.h"
#include "frontend/Frontend.h"
#include "passes/PassManager.h"

#include "llvm/ADT/StringMap.h"

#include <set>

namespace mgc::backend::testing {
namespace {

std::unique_ptr<ir::Module> parse(const char *text) {
  DiagnosticEngine diag;
  auto m = ir::parseModuleText("groups.mgir", text, diag);
  REQUIRE(m);
  return m;
}

const ir::Op &opAt(const ir::Module &m, size_t i) {
  auto it = m.graph().ops().begin();
  std::advance(it, i);
  return **it;
}

TEST_CASE("launch groups: keys say which ops one kernel can run") {
  auto m = parse(R"IR(module @keys {
  input %a : f32[4, 3]
  input %b : f32[4, 3]
  input %s : f32[]
  input %r : f32[3]
  input %i : i32[4, 3]
  input %h : bf16[4, 3]
  %0 = mul(%a, %b) : f32[4, 3]
  %1 = fused(%a, %s) {dtype = "f32", expr = "mul(%0, %1); exp(#0)", shape = [4, 3]} : f32[4, 3]
  %2 = fused(%b, %s) {dtype = "f32", expr = "mul(%0, %1); exp(#0)", shape = [4, 3]} : f32[4, 3]
  %3 = fused(%a, %r) {dtype = "f32", expr = "mul(%0, %1); exp(#0)", shape = [4, 3]} : f32[4, 3]
  %4 = add(%i, %i) : i32[4, 3]
  %5 = fused(%h, %s) {dtype = "f32", expr = "mul(%0, %1); exp(#0)", shape = [4, 3]} : f32[4, 3]
  %6 = transpose(%a) {perm = [1, 0]} : f32[3, 4]
  output o0 = %0
  output o1 = %1
  output o2 = %2
  output o3 = %3
  output o4 = %4
  output o5 = %5
  output o6 = %6
}
)IR");
  CHECK(elementwiseExpr(opAt(*m, 0)) == "mul(%0, %1)");
  CHECK(launchKey(opAt(*m, 0)) == "mul(%0, %1) | f32 f32 f32");
  CHECK(launchKey(opAt(*m, 1)) == "mul(%0, %1); exp(#0) | f32 f32 f32[scalar]");
  CHECK(launchKey(opAt(*m, 1)) == launchKey(opAt(*m, 2)));
  CHECK(launchKey(opAt(*m, 3)).empty()); // a row broadcast along columns
  CHECK(launchKey(opAt(*m, 4)).empty()); // integers
  CHECK(launchKey(opAt(*m, 5)) != launchKey(opAt(*m, 1))); // bf16 operand
  CHECK(launchKey(opAt(*m, 6)).empty());
  CHECK(operandClass(ir::TensorType(ir::DType::F32, {1, 1}),
                     ir::TensorType(ir::DType::F32, {5})) ==
        OperandClass::Scalar);
}

TEST_CASE("launch groups: a run ends where an op reads another's result") {
  auto m = parse(R"IR(module @chain {
  input %x : f32[8]
  input %y : f32[8]
  input %z : f32[8]
  %0 = mul(%x, %y) : f32[8]
  %1 = mul(%0, %y) : f32[8]
  %2 = mul(%x, %z) : f32[8]
  %3 = mul(%y, %z) : f32[8]
  %4 = exp(%3) : f32[8]
  output a = %1
  output b = %2
  output c = %4
}
)IR");
  auto exe = buildExecutable(std::move(m), cpu::scratchBytes);
  LaunchPlan plan = planLaunches(*exe);
  CHECK(checkLaunchPlan(*exe, plan) == "");
  REQUIRE(plan.runs.size() == 3);
  CHECK(plan.runs[0].size() == 1);
  CHECK(plan.runs[1].size() == 3); // %1, %2, %3: none reads another
  CHECK(plan.runs[2].size() == 1);
  CHECK(plan.launches() == 3);
  CHECK(plan.groups() == 1);
  CHECK(plan.groupedOps() == 3);
  LaunchPlan single = planLaunches(*exe, {true, false});
  CHECK(single.launches() == 5);
  CHECK(single.groups() == 0);
}

TEST_CASE("launch groups: a group's operands never share bytes with its "
          "results") {
  // %2 reads %0 for the last time, so the arena of the op order gives %3
  // the bytes of %0; run as one launch, %3 would overwrite %0 while %2
  // still reads it.
  auto m = parse(R"IR(module @reuse {
  input %x : f32[64]
  input %y : f32[64]
  %0 = neg(%x) : f32[64]
  %1 = neg(%y) : f32[64]
  %2 = mul(%0, %0) : f32[64]
  %3 = mul(%1, %1) : f32[64]
  output a = %2
  output b = %3
}
)IR");
  auto exe = buildExecutable(std::move(m), cpu::scratchBytes);
  LaunchPlan plan = planLaunches(*exe);
  REQUIRE(plan.runs.size() == 2); // neg, neg; mul, mul
  CHECK(plan.groups() == 2);
  CHECK(checkLaunchPlan(*exe, plan) == "");
  // The same runs with the lifetimes of single launches: the check finds
  // the shared bytes.
  LaunchPlan naive = plan;
  BufferPlacement placed =
      placeBuffers(resultBuffers(exe->module->graph(), naive.order));
  naive.offsets = placed.offsets;
  naive.peak = placed.peak;
  CHECK(naive.offsets[3] == naive.offsets[0]);
  CHECK(checkLaunchPlan(*exe, naive).find("shares bytes with an operand") !=
        std::string::npos);
}

struct Model {
  const char *file;
  frontend::ConstOverrides defines;
  std::map<std::string, ir::AttrValue> train;
};

std::unique_ptr<ir::Module> buildStep(const Model &model) {
  DiagnosticEngine diag;
  frontend::CompileOptions options;
  options.defines = model.defines;
  auto m = frontend::compileModelFile(
      mgc::test::sourceDir() + "/samples/" + model.file, options, diag);
  REQUIRE(m);
  for (const auto &[key, value] : model.train)
    m->attrs().set(key, value);
  passes::PassManagerOptions pmOptions;
  pmOptions.verifyEach = true;
  passes::PassManager pm(pmOptions);
  REQUIRE(succeeded(pm.parsePipeline(
      "mixed-precision,autodiff,optimizer,canonicalize,cse,dce,fuse", diag)));
  REQUIRE(succeeded(pm.run(*m, diag)));
  return m;
}

const Model kModels[] = {
    {"gpt.mg",
     {{"V", "32"}, {"T", "8"}, {"D", "16"}, {"H", "2"}, {"L", "2"}, {"B", "2"}},
     {}},
    {"gpt.mg",
     {{"V", "32"}, {"T", "8"}, {"D", "16"}, {"H", "2"}, {"L", "2"}, {"B", "2"}},
     {{"train.precision", std::string("bf16")}, {"train.clip_grad_norm", 1.0}}},
    {"mlp.mg", {{"B", "8"}, {"D", "12"}, {"H", "16"}}, {}},
    {"mlp.mg",
     {{"B", "8"}, {"D", "12"}, {"H", "16"}},
     {{"train.optimizer", std::string("sgd")},
      {"train.momentum", 0.9},
      {"train.weight_decay", 0.01},
      {"train.clip_grad_norm", 0.5}}},
};

std::string describe(const Model &model) {
  std::string s = model.file;
  for (const auto &[key, value] : model.train)
    s += " " + key + "=" + ir::formatAttrValue(value);
  return s;
}

TEST_CASE("launch groups: the optimizer's updates of one expression are one "
          "launch") {
  for (const Model &model : kModels) {
    INFO(describe(model));
    auto exe = buildExecutable(buildStep(model), cpu::scratchBytes);
    const ir::Graph &g = exe->module->graph();
    LaunchPlan plan = planLaunches(*exe);
    CHECK(checkLaunchPlan(*exe, plan) == "");
    LaunchPlan before = planLaunches(*exe, {false, false});
    CHECK(checkLaunchPlan(*exe, before) == "");
    CHECK(before.launches() == g.numOps());
    CHECK(plan.launches() < before.launches());

    // The ops making the new parameters and their state, by key: each key's
    // ops form one run.
    std::vector<const ir::Op *> ops;
    for (const auto &op : g.ops())
      ops.push_back(op.get());
    std::set<const ir::Value *> updateValues;
    size_t params = g.params().size();
    for (const ir::Update &u : g.updates())
      if (u.target->kind() == ir::ValueKind::Param ||
          llvm::StringRef(u.target->name()).startswith("opt.m") ||
          llvm::StringRef(u.target->name()).startswith("opt.v.") ||
          llvm::StringRef(u.target->name()).startswith("opt.momentum."))
        updateValues.insert(u.value);
    llvm::StringMap<size_t> opsOfKey;
    for (const ir::Op *op : ops)
      if (updateValues.count(op->result())) {
        std::string key = launchKey(*op);
        REQUIRE(!key.empty());
        ++opsOfKey[key];
      }
    CHECK(opsOfKey.size() >= 1);
    for (const auto &entry : opsOfKey) {
      INFO("key " << entry.first().str());
      CHECK(entry.second == params);
      size_t runs = 0;
      for (const LaunchPlan::Run &run : plan.runs)
        if (launchKey(*ops[plan.order[run.begin]]) == entry.first()) {
          ++runs;
          CHECK(run.size() == params);
        }
      CHECK(runs == 1);
    }
    MESSAGE(describe(model)
            << ": " << before.launches() << " launches, " << plan.launches()
            << " grouped (" << plan.groups() << " groups of "
            << plan.groupedOps() << " ops); arena " << exe->plan.peak
            << " bytes, grouped " << plan.peak);
  }
}

// The executable of `m` run in the planned order, with the CPU's memory
// plan for that order.
std::unique_ptr<Executable> reordered(const ir::Module &m) {
  auto exe = buildExecutable(cloneModule(m), cpu::scratchBytes);
  LaunchPlan plan = planLaunches(*exe);
  exe->order = plan.order;
  exe->plan = planMemory(exe->module->graph(), exe->order, cpu::scratchBytes);
  return exe;
}

cpu::RunResult runExecutable(const Executable &exe,
                             const cpu::NamedTensors &args) {
  std::string text;
  llvm::raw_string_ostream os(text);
  DiagnosticEngine diag(os);
  auto ex = cpu::CpuExecutor::create(exe, {}, diag);
  INFO(os.str());
  REQUIRE(ex);
  auto r = ex->run(args, diag);
  INFO(os.str());
  REQUIRE(r.succeeded());
  return std::move(*r);
}

TEST_CASE("launch groups: the reordered step equals the step bit for bit on "
          "the CPU") {
  for (const Model &model : kModels) {
    INFO(describe(model));
    auto m = buildStep(model);
    auto original = buildExecutable(cloneModule(*m), cpu::scratchBytes);
    auto moved = reordered(*m);
    CHECK(moved->order != original->order);
    cpu::NamedTensors args = toTensors(randomArguments(*m, 11, 8, -1, 1));
    // Two steps, the second from the first's updates.
    for (int step = 0; step < 2; ++step) {
      INFO("step " << step + 1);
      cpu::RunResult a = runExecutable(*original, args);
      cpu::RunResult b = runExecutable(*moved, args);
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
      for (auto &[name, t] : a.updates)
        args.insert_or_assign(name, std::move(t));
    }
  }
}

} // namespace
} // namespace mgc::backend::testing

namespace mgc::backend::testing {
namespace {

// The figures of docs/cuda-backend.md for the benchmark's GPT-2 124M step
// (batch 16, bf16, AdamW). Slow (the full model), so skipped unless asked
// for: mgc_unit_tests -tc='launch groups: GPT-2*' --no-skip
TEST_CASE("launch groups: GPT-2 124M bf16 AdamW step" * doctest::skip()) {
  Model model{
      "gpt.mg", {{"B", "16"}}, {{"train.precision", std::string("bf16")}}};
  auto exe = buildExecutable(buildStep(model), cpu::scratchBytes);
  LaunchPlan before = planLaunches(*exe, {false, false});
  LaunchPlan unordered = planLaunches(*exe, {false, true});
  LaunchPlan after = planLaunches(*exe);
  CHECK(checkLaunchPlan(*exe, after) == "");
  MemoryPlan cpuAfter =
      planMemory(exe->module->graph(), after.order, cpu::scratchBytes);
  auto mib = [](uint64_t b) { return static_cast<double>(b) / 1048576.0; };
  MESSAGE("ops " << exe->module->graph().numOps() << ", params "
                 << exe->module->graph().params().size());
  MESSAGE("launches per step: "
          << before.launches() << " one per op, " << unordered.launches()
          << " grouped in the executable's order, " << after.launches()
          << " grouped after "
          << "reordering (" << after.groups() << " groups of "
          << after.groupedOps() << " ops)");
  MESSAGE("arena MiB: executable plan "
          << mib(exe->plan.peak) << ", CPU plan of the new order "
          << mib(cpuAfter.peak) << ", CUDA results one per op "
          << mib(before.peak) << ", CUDA grouped " << mib(after.peak));
}

} // namespace
} // namespace mgc::backend::testing
