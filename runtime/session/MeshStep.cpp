#include "runtime/session/MeshStep.h"

#include "runtime/session/Pipeline.h"
#include "runtime/session/PlanFaults.h"

#include "backend/cpu/Kernels.h"
#include "passes/Optimizer.h"
#include "passes/PassManager.h"
#include "passes/ShardStrategy.h"

#include <map>

namespace mgc::session {

std::vector<const backend::Executable *> MeshPart::perDevice() const {
  std::vector<const backend::Executable *> out;
  for (size_t p : programs.programOf)
    out.push_back(executables[p].get());
  return out;
}

std::unique_ptr<backend::Executable>
compileDeviceProgram(const ir::Module &program, DiagnosticEngine &diag) {
  auto copy = cloneModule(program, diag);
  if (!copy)
    return nullptr;
  // A stage program's messages are the pipeline runner's to post.
  passes::lowerPipeMessages(*copy);
  auto fault = planFault(diag);
  if (fault.failed())
    return nullptr;
  if (*fault)
    injectPlanFault(*copy, **fault);
  if (failed(runPipeline(*copy, kDeviceProgramPipeline, diag)))
    return nullptr;
  return backend::buildExecutable(std::move(copy), backend::cpu::scratchBytes);
}

LogicalResult compilePart(MeshPart &part, DiagnosticEngine &diag) {
  for (const auto &program : part.programs.programs) {
    auto exe = compileDeviceProgram(*program, diag);
    if (!exe)
      return failure();
    part.executables.push_back(std::move(exe));
  }
  return success();
}

namespace {

// Partitions `logical` (placed) into `part`'s device programs and compiles
// them.
LogicalResult partitionPart(const ir::Module &logical, MeshPart &part,
                            DiagnosticEngine &diag) {
  auto programs = passes::partitionModule(logical, diag);
  if (programs.failed())
    return failure();
  part.programs = std::move(*programs);
  return compilePart(part, diag);
}

// Gradient accumulation splits the batch (the first dimension of the first
// input, as shard-strategy splits it on dp) into `k` micro-batches per dp
// device; each must have at least one example, and without dp weights all
// must be equal.
LogicalResult checkMicroBatches(const ir::Module &model, const ir::Mesh &mesh,
                                int64_t k, bool pipeline,
                                DiagnosticEngine &diag) {
  std::vector<ir::Value *> inputs = model.graph().inputs();
  if (inputs.empty() || inputs.front()->type().rank() == 0) {
    diag.error("gradient accumulation splits the batch (the first dimension "
               "of the first input), but model '" +
               model.name() + "' has no batched input");
    return failure();
  }
  const ir::Value *x = inputs.front();
  int64_t batch = x->type().shape[0];
  ir::Mesh micro = passes::microBatchMesh(mesh, k);
  const ir::MeshAxis &dp = *micro.findAxis(ir::kDataAxis);
  std::vector<int64_t> sizes = ir::splitSizes(batch, dp);
  bool ok = dp.weights.empty()
                ? batch % dp.size == 0
                : *std::min_element(sizes.begin(), sizes.end()) > 0;
  if (!ok) {
    std::string why =
        pipeline ? "the pipeline's micro-batches; --microbatches sets how "
                   "many"
                 : std::to_string(k) + " micro-batches on each of the " +
                       std::to_string(dp.size / k) + " dp devices";
    diag.error(x->loc(), "input '" + x->name() + "': its batch of " +
                             std::to_string(batch) + " does not split into " +
                             std::to_string(dp.size) +
                             (dp.weights.empty() ? " equal" : " non-empty") +
                             " micro-batches (" + why + ")");
    return failure();
  }
  return success();
}

// The micro-batch programs of every micro-batch device, with their dp
// splits fixed to the device's micro-batch (passes::fixDataAxisSplits);
// identical programs stay shared.
FailureOr<passes::DevicePrograms>
fixMicroPrograms(const passes::DevicePrograms &raw, DiagnosticEngine &diag) {
  passes::DevicePrograms out;
  out.mesh = raw.mesh;
  std::map<std::pair<size_t, int64_t>, size_t> byKey;
  std::vector<std::string> devicesOf;
  int dpAxis = raw.mesh.axisIndex(ir::kDataAxis);
  for (int64_t v = 0; v < raw.mesh.numDevices(); ++v) {
    size_t p = raw.programOf[v];
    // A program that takes its micro-batch's rows (a local split or a
    // dropout of them on dp) is its micro-batch device's own.
    bool splits = false;
    for (const auto &op : raw.programs[p]->graph().ops())
      splits |= (op->kind() == ir::OpKind::LocalSplit ||
                 op->kind() == ir::OpKind::DropoutPart) &&
                op->attrs().getString("axis") == ir::kDataAxis;
    int64_t key = splits ? raw.mesh.coords(v)[dpAxis] : -1;
    auto [it, inserted] = byKey.try_emplace({p, key}, out.programs.size());
    if (inserted) {
      auto copy = cloneModule(*raw.programs[p], diag);
      if (!copy)
        return failure();
      passes::fixDataAxisSplits(*copy, raw.mesh, v);
      out.programs.push_back(std::move(copy));
      devicesOf.emplace_back();
    }
    std::string &list = devicesOf[it->second];
    list += (list.empty() ? "" : ",") + std::to_string(v);
    out.programOf.push_back(it->second);
  }
  for (size_t i = 0; i < out.programs.size(); ++i)
    out.programs[i]->attrs().set(passes::kDevicesAttr, devicesOf[i]);
  return out;
}

} // namespace

FailureOr<MeshStep> buildMeshForward(const ir::Module &model,
                                     const ir::Mesh &mesh,
                                     DiagnosticEngine &diag) {
  if (mesh.findAxis(ir::kPipelineAxis)) {
    diag.error("evaluation on a mesh with a pp axis is not built: evaluate "
               "on the same mesh without pp");
    return failure();
  }
  MeshStep out;
  out.mesh = mesh;
  out.sharded = cloneModule(model, diag);
  if (!out.sharded)
    return failure();
  out.sharded->attrs().set(ir::kMeshAttr, mesh.str());
  if (failed(runPipeline(*out.sharded, kMeshForwardPipeline, diag)) ||
      failed(partitionPart(*out.sharded, out.step, diag)))
    return failure();
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
  if (config.accumulate < 1) {
    diag.error("gradient accumulation needs at least 1 micro-batch per "
               "step, got " +
               std::to_string(config.accumulate));
    return failure();
  }
  MeshStep out;
  out.accumulate = config.accumulate;
  // A pipeline runs the micro part, even of one micro-batch, on the mesh
  // without its pp axis.
  const ir::MeshAxis *pp = config.mesh.findAxis(ir::kPipelineAxis);
  ir::Mesh mesh = config.mesh;
  if (pp) {
    std::vector<ir::MeshAxis> rest;
    for (const ir::MeshAxis &a : config.mesh.axes())
      if (a.name != ir::kPipelineAxis)
        rest.push_back(a);
    mesh = ir::Mesh(std::move(rest));
  }
  bool accumulate = config.accumulate > 1 || pp;
  out.mesh = accumulate ? passes::withDataAxis(mesh) : mesh;
  if (accumulate &&
      failed(checkMicroBatches(model, out.mesh, config.accumulate, pp, diag)))
    return failure();
  ir::Mesh placement = accumulate
                           ? passes::microBatchMesh(out.mesh, config.accumulate)
                           : out.mesh;

  out.sharded = cloneModule(model, diag);
  if (!out.sharded)
    return failure();
  out.sharded->attrs().set(ir::kMeshAttr, placement.str());
  out.sharded->attrs().set(passes::kZeroAttr, int64_t(config.zero));
  // A pipeline sums each gradient on its own: a bucket would join the
  // gradients of different stages.
  out.sharded->attrs().set(passes::kBucketAttr, pp ? 0.0 : config.bucketMiB);
  if (failed(runPipeline(*out.sharded, kMeshTrainingPipeline, diag)))
    return failure();

  if (!accumulate) {
    if (failed(partitionPart(*out.sharded, out.step, diag)))
      return failure();
    return out;
  }

  auto split = passes::splitAccumulation(*out.sharded, out.mesh, diag);
  if (split.failed())
    return failure();
  out.step.logical = std::move(split->apply);
  out.micro.logical = std::move(split->micro);
  if (failed(partitionPart(*out.step.logical, out.step, diag)))
    return failure();
  auto micro = passes::partitionModule(*out.micro.logical, diag);
  if (micro.failed())
    return failure();
  auto fixed = fixMicroPrograms(*micro, diag);
  if (fixed.failed())
    return failure();
  out.micro.programs = std::move(*fixed);
  if (pp)
    return succeeded(buildPipelinePart(out, model, config, diag))
               ? FailureOr<MeshStep>(std::move(out))
               : failure();
  if (failed(compilePart(out.micro, diag)))
    return failure();
  return out;
}

} // namespace mgc::session
