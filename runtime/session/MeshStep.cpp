#include "runtime/session/MeshStep.h"

#include "runtime/session/Pipeline.h"

#include "backend/cpu/Kernels.h"
#include "passes/Optimizer.h"
#include "passes/PassManager.h"
#include "passes/ShardStrategy.h"
#include "runtime/ShardTensor.h"

namespace mgc::session {

std::vector<const backend::Executable *> MeshStep::perDevice() const {
  std::vector<const backend::Executable *> out;
  for (size_t p : programs.programOf)
    out.push_back(executables[p].get());
  return out;
}

FailureOr<MeshStep> buildMeshStep(const ir::Module &model,
                                  const MeshConfig &config,
                                  DiagnosticEngine &diag) {
  if (!model.graph().lossOutput()) {
    diag.error("model '" + model.name() +
               "' has no loss: only a training step runs on a mesh");
    return failure();
  }
  if (passes::readOptimizerConfig(model.attrs(), diag).failed())
    return failure();
  MeshStep out;
  out.sharded = cloneModule(model, diag);
  if (!out.sharded)
    return failure();
  out.sharded->attrs().set(ir::kMeshAttr, config.mesh.str());
  out.sharded->attrs().set(passes::kZeroAttr, int64_t(config.zero));
  out.sharded->attrs().set(passes::kBucketAttr, config.bucketMiB);
  passes::PassManagerOptions options;
  options.verifyEach = true;
  passes::PassManager pm(options);
  if (failed(pm.parsePipeline(kMeshTrainingPipeline, diag)) ||
      failed(pm.run(*out.sharded, diag)))
    return failure();
  FailureOr<passes::DevicePrograms> programs =
      passes::partitionModule(*out.sharded, diag);
  if (programs.failed())
    return failure();
  out.programs = std::move(*programs);
  for (const auto &program : out.programs.programs) {
    auto copy = cloneModule(*program, diag);
    if (!copy)
      return failure();
    out.executables.push_back(backend::buildExecutable(
        std::move(copy), backend::cpu::scratchBytes));
  }
  return out;
}

std::unique_ptr<MeshRunner>
MeshRunner::create(MeshStep step, const backend::cpu::MeshOptions &options,
                   DiagnosticEngine &diag) {
  std::unique_ptr<MeshRunner> r(new MeshRunner(std::move(step)));
  r->executor_ = backend::cpu::MeshExecutor::create(
      r->step_.programs.mesh, r->step_.perDevice(), options, diag);
  if (!r->executor_)
    return nullptr;
  return r;
}

FailureOr<backend::cpu::RunResult>
MeshRunner::run(const backend::cpu::NamedTensors &arguments,
                DiagnosticEngine &diag) {
  const ir::Mesh &mesh = step_.programs.mesh;
  int64_t n = mesh.numDevices();
  std::vector<backend::cpu::NamedTensors> parts(n);
  for (int64_t d = 0; d < n; ++d)
    for (const auto &arg : step_.programs.programFor(d).graph().arguments()) {
      auto it = arguments.find(arg->name());
      if (it == arguments.end()) {
        diag.error("tensor '" + arg->name() + "' is missing");
        return failure();
      }
      parts[d].emplace(arg->name(), runtime::shardTensor(
                                        it->second, arg->sharding(), mesh, d));
    }
  auto ran = executor_->run(parts, diag);
  if (ran.failed())
    return failure();
  // Whole tensors back: placements from device 0's program (every program
  // places the same values the same way), logical types from the step.
  const ir::Graph &local = step_.programs.programFor(0).graph();
  const ir::Graph &logical = step_.sharded->graph();
  backend::cpu::RunResult out;
  auto join = [&](const std::string &name, const ir::Sharding &sharding,
                  const ir::TensorType &type, bool isOutput,
                  backend::cpu::NamedTensors &into) -> LogicalResult {
    std::vector<runtime::Tensor> pieces;
    for (auto &r : *ran) {
      auto &src = isOutput ? r.outputs : r.updates;
      auto it = src.find(name);
      if (it == src.end()) {
        diag.error("a device returned no '" + name + "'");
        return failure();
      }
      pieces.push_back(std::move(it->second));
    }
    runtime::Tensor whole;
    std::string error;
    if (!runtime::unshardTensor(pieces, sharding, mesh, type, whole, error)) {
      diag.error("joining '" + name + "': " + error);
      return failure();
    }
    into.emplace(name, std::move(whole));
    return success();
  };
  for (size_t i = 0; i < logical.outputs().size(); ++i) {
    const ir::Output &o = logical.outputs()[i];
    if (failed(join(o.name, local.outputs()[i].value->sharding(),
                    o.value->type(), true, out.outputs)))
      return failure();
  }
  for (size_t i = 0; i < logical.updates().size(); ++i) {
    const ir::Update &u = logical.updates()[i];
    if (failed(join(u.target->name(), local.updates()[i].value->sharding(),
                    u.target->type(), false, out.updates)))
      return failure();
  }
  return out;
}

} // namespace mgc::session
