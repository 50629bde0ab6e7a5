// Grouped launches and inputs handed over early on the CUDA backend: a
// group over tensors of very different sizes against the CPU kernels (bit
// for bit in f32) and against one launch per op; a training step run with
// a CUDA Graph whose inputs are copied in on the side stream, against
// direct launches. Device tests skip without a device; the device bytes of
// the second input set are checked everywhere.
#include "CudaTestSupport.h"
#include "SourcePath.h"

#include "backend/LaunchGroups.h"
#include "backend/cpu/Kernels.h"
#include "backend/cuda/CudaKernels.h"
#include "frontend/Frontend.h"
#include "ir/TargetModule.h"
#include "passes/PassManager.h"

#include <set>

namespace mgc::backend::testing {
namespace {

#if MGC_HAVE_CUDA

// One fused op per size, all with the expression of an AdamW-like update
// (mul, add, sqrt, div: exact operations, so the device and the CPU agree
// bit for bit), reading two full-size operands and one scalar.
std::unique_ptr<ir::Module> groupModule(const std::vector<int64_t> &sizes,
                                        const char *dtype) {
  std::string text = "module @group {\n  input %s : f32[]\n";
  for (size_t k = 0; k < sizes.size(); ++k)
    text += "  input %m" + std::to_string(k) + " : f32[" +
            std::to_string(sizes[k]) + "]\n  input %g" + std::to_string(k) +
            " : f32[" + std::to_string(sizes[k]) + "]\n";
  for (size_t k = 0; k < sizes.size(); ++k)
    text += "  %" + std::to_string(k) + " = fused(%m" + std::to_string(k) +
            ", %g" + std::to_string(k) + ", %s) {dtype = \"" + dtype +
            "\", expr = \"mul(%0, 0.8999999761581421); mul(%1, %2); "
            "add(#0, #1); mul(%1, %1); add(#3, 9.99999993922529e-09); "
            "sqrt(#4); div(#2, #5)\", shape = [" +
            std::to_string(sizes[k]) + "]} : " + dtype + "[" +
            std::to_string(sizes[k]) + "]\n";
  for (size_t k = 0; k < sizes.size(); ++k)
    text +=
        "  output y" + std::to_string(k) + " = %" + std::to_string(k) + "\n";
  text += "}\n";
  DiagnosticEngine diag;
  auto m = ir::parseModuleText("group.mgir", text, diag);
  REQUIRE(m);
  return m;
}

TEST_CASE("cuda: grouped fused launch over tensors of different sizes") {
  if (skipWithoutCuda())
    return;
  const std::vector<int64_t> sizes = {1, 3, 4097, 1 << 20, 4096, 0, 5};
  for (const char *dtype : {"f32", "bf16"}) {
    INFO(dtype);
    auto m = groupModule(sizes, dtype);
    auto exe = buildExecutable(cloneModule(*m), cpu::scratchBytes);
    LaunchPlan plan = planLaunches(*exe);
    REQUIRE(plan.launches() == 1);
    REQUIRE(plan.groupedOps() == sizes.size());
    uint64_t seed = freshSeed();
    INFO("seed " << seed);
    ir::TensorMap args = randomArguments(*m, seed, 1, -1, 1);
    cpu::RunResult grouped = runCuda(*m, args);
    cuda::CudaOptions single;
    single.groupLaunches = false;
    cpu::RunResult separate = runCuda(*m, args, single);
    cpu::RunResult host = runCpu(*m, args);
    for (size_t k = 0; k < sizes.size(); ++k) {
      std::string name = "y" + std::to_string(k);
      INFO(name << " of " << sizes[k] << " elements");
      CHECK(bitIdentical(grouped.outputs.at(name), separate.outputs.at(name)));
      if (std::string(dtype) == "f32")
        CHECK(bitIdentical(grouped.outputs.at(name), host.outputs.at(name)));
      else
        compareRelativeToLargest(grouped.outputs.at(name),
                                 host.outputs.at(name), 1e-2, name);
    }
  }
}

std::unique_ptr<ir::Module> stepModule(const char *file,
                                       frontend::ConstOverrides defines) {
  return cudaTrainingStep(file, std::move(defines));
}

// The inputs of step k (fresh values every step).
cpu::NamedTensors inputsOf(const ir::Module &m, uint64_t seed, int step) {
  ir::TensorMap all = randomArguments(m, seed + step, 8, -1, 1);
  cpu::NamedTensors out;
  for (const ir::Value *v : m.graph().inputs())
    out[v->name()] = runtime::Tensor::fromHost(all.at(v->name()));
  return out;
}

// `steps` training steps on one executor, parameters and state kept on the
// device as a session keeps them; with `early`, each run hands over the
// next run's inputs. Returns each step's outputs, then the final
// parameters and state as the last entry.
std::vector<cpu::NamedTensors> train(const Executable &exe, bool graph,
                                     bool early, int steps, uint64_t seed,
                                     const std::vector<bool> &stagedAt = {}) {
  const ir::Module &m = *exe.module;
  std::string text;
  llvm::raw_string_ostream os(text);
  DiagnosticEngine diag(os);
  cuda::CudaOptions options;
  options.graph = graph;
  auto ex = cuda::CudaExecutor::create(exe, options, diag);
  INFO(os.str());
  REQUIRE(ex);
  cpu::NamedTensors persistent = toTensors(randomArguments(m, 7, 8, -1, 1));
  for (const ir::Value *v : m.graph().inputs())
    persistent.erase(v->name());
  std::set<std::string> resident;
  std::vector<cpu::NamedTensors> results;
  bool staged = false;
  for (int step = 0; step < steps; ++step) {
    cpu::NamedTensors args = persistent;
    for (auto &[name, t] : inputsOf(m, seed, step))
      args.insert_or_assign(name, std::move(t));
    cpu::NamedTensors next;
    cuda::RunControl control{&resident, true};
    bool handOver =
        early && step + 1 < steps && (stagedAt.empty() || stagedAt[step + 1]);
    if (handOver) {
      next = inputsOf(m, seed, step + 1);
      control.next = &next;
    }
    control.staged = staged;
    auto r = ex->run(args, diag, control);
    INFO("step " << step + 1 << ": " << os.str());
    REQUIRE(r.succeeded());
    results.push_back(std::move(r->outputs));
    staged = handOver;
    for (const auto &[name, t] : persistent)
      resident.insert(name);
  }
  cpu::NamedTensors final;
  for (const auto &[name, t] : persistent) {
    auto v = ex->readArgument(name, diag);
    REQUIRE(v.succeeded());
    final.emplace(name, std::move(*v));
  }
  results.push_back(std::move(final));
  return results;
}

TEST_CASE("cuda: graph replays with inputs copied in on the side stream") {
  struct Model {
    const char *file;
    frontend::ConstOverrides defines;
  } models[] = {
      {"mlp.mg", {{"B", "8"}, {"D", "12"}, {"H", "16"}}},
      {"gpt.mg",
       {{"V", "32"},
        {"T", "8"},
        {"D", "16"},
        {"H", "2"},
        {"L", "2"},
        {"B", "2"}}},
  };
  // Built (and checked for CUDA) with or without a device.
  std::vector<std::unique_ptr<Executable>> exes;
  for (const Model &model : models) {
    INFO(std::string(model.file));
    exes.push_back(buildExecutable(stepModule(model.file, model.defines),
                                   cpu::scratchBytes));
  }
  if (skipWithoutCuda())
    return;
  for (size_t m = 0; m < exes.size(); ++m) {
    INFO(std::string(models[m].file));
    const Executable *exe = exes[m].get();
    uint64_t seed = freshSeed();
    INFO("seed " << seed);
    const int steps = 5;
    auto direct = train(*exe, false, false, steps, seed);
    auto replayed = train(*exe, true, true, steps, seed);
    // Handed over for some steps only: the run after one that was not reads
    // inputs copied at its start.
    auto mixed =
        train(*exe, true, true, steps, seed, {true, true, false, true, true});
    auto plainGraph = train(*exe, true, false, steps, seed);
    for (const auto *other : {&replayed, &mixed, &plainGraph}) {
      REQUIRE(other->size() == direct.size());
      for (size_t k = 0; k < direct.size(); ++k)
        for (const auto &[name, t] : direct[k]) {
          INFO((k < size_t(steps) ? "output " : "final ")
               << name << " after " << k + 1);
          CHECK(bitIdentical((*other)[k].at(name), t));
        }
    }
  }
}

TEST_CASE("cuda: inputs handed over early are checked") {
  if (skipWithoutCuda())
    return;
  auto exe = buildExecutable(
      stepModule("mlp.mg", {{"B", "4"}, {"D", "6"}, {"H", "8"}}),
      cpu::scratchBytes);
  cpu::NamedTensors args =
      toTensors(randomArguments(*exe->module, 1, 8, -1, 1));
  std::string text;
  llvm::raw_string_ostream os(text);
  DiagnosticEngine diag(os);
  auto plain = cuda::CudaExecutor::create(*exe, {}, diag);
  REQUIRE(plain);
  cpu::NamedTensors next = inputsOf(*exe->module, 2, 0);
  cuda::RunControl control;
  control.next = &next;
  CHECK(plain->run(args, diag, control).failed());
  CHECK(os.str().find("need a CUDA Graph") != std::string::npos);

  cuda::CudaOptions options;
  options.graph = true;
  auto ex = cuda::CudaExecutor::create(*exe, options, diag);
  REQUIRE(ex);
  text.clear();
  cuda::RunControl staged;
  staged.staged = true;
  CHECK(ex->run(args, diag, staged).failed());
  CHECK(os.str().find("no inputs were handed over early") != std::string::npos);
  text.clear();
  cpu::NamedTensors wrong = next;
  wrong.erase(wrong.begin());
  wrong.emplace("w1", args.begin()->second);
  control.next = &wrong;
  CHECK(ex->run(args, diag, control).failed());
  CHECK(os.str().find("among the next run's inputs") != std::string::npos);
}

TEST_CASE("cuda backend: a graph holds a second set of input buffers") {
  auto exe = buildExecutable(
      stepModule("mlp.mg", {{"B", "64"}, {"D", "12"}, {"H", "16"}}),
      cpu::scratchBytes);
  uint64_t inputs = 0;
  for (const ir::Value *v : exe->module->graph().inputs())
    inputs += typeBytes(v->type());
  cuda::CudaOptions graph;
  graph.graph = true;
  uint64_t plain = cuda::CudaExecutor::requiredBytes(*exe, {});
  uint64_t withGraph = cuda::CudaExecutor::requiredBytes(*exe, graph);
  CHECK(withGraph >= plain + inputs);
  CHECK(withGraph <= plain + inputs + 64 * 1024);
}

#endif

} // namespace
} // namespace mgc::backend::testing
