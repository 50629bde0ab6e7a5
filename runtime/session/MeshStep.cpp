#include "runtime/session/MeshStep.h"

#include "runtime/session/Pipeline.h"

#include "backend/cpu/Kernels.h"
#include "passes/Optimizer.h"
#include "passes/PassManager.h"
#include "passes/ShardStrategy.h"
#include "runtime/ShardTensor.h"

#include <map>

namespace mgc::session {

std::vector<const backend::Executable *> MeshPart::perDevice() const {
  std::vector<const backend::Executable *> out;
  for (size_t p : programs.programOf)
    out.push_back(executables[p].get());
  return out;
}

namespace {

LogicalResult compilePart(MeshPart &part, DiagnosticEngine &diag) {
  for (const auto &program : part.programs.programs) {
    auto copy = cloneModule(*program, diag);
    if (!copy || failed(runPipeline(*copy, kDeviceProgramPipeline, diag)))
      return failure();
    part.executables.push_back(backend::buildExecutable(
        std::move(copy), backend::cpu::scratchBytes));
  }
  return success();
}

// Gradient accumulation splits the batch (the first dimension of the first
// input, as shard-strategy splits it on dp) into `k` micro-batches per dp
// device; each must have at least one example, and without dp weights all
// must be equal.
LogicalResult checkMicroBatches(const ir::Module &model, const ir::Mesh &mesh,
                                int64_t k, DiagnosticEngine &diag) {
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
  const ir::MeshAxis &dp = *micro.findAxis("dp");
  std::vector<int64_t> sizes = ir::splitSizes(batch, dp);
  bool ok = dp.weights.empty() ? batch % dp.size == 0
                               : *std::min_element(sizes.begin(),
                                                   sizes.end()) > 0;
  if (!ok) {
    diag.error(x->loc(),
               "input '" + x->name() + "': its batch of " +
                   std::to_string(batch) + " does not split into " +
                   std::to_string(dp.size) +
                   (dp.weights.empty() ? " equal" : " non-empty") +
                   " micro-batches (" + std::to_string(k) +
                   " micro-batches on each of the " +
                   std::to_string(dp.size / k) + " dp devices)");
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
  int dpAxis = raw.mesh.axisIndex("dp");
  for (int64_t v = 0; v < raw.mesh.numDevices(); ++v) {
    size_t p = raw.programOf[v];
    bool splits = false;
    for (const auto &op : raw.programs[p]->graph().ops())
      splits |= op->kind() == ir::OpKind::LocalSplit &&
                op->attrs().getString("axis") == "dp";
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
  bool accumulate = config.accumulate > 1;
  out.mesh = accumulate ? passes::withDataAxis(config.mesh) : config.mesh;
  if (accumulate &&
      failed(checkMicroBatches(model, out.mesh, config.accumulate, diag)))
    return failure();
  ir::Mesh placement =
      accumulate ? passes::microBatchMesh(out.mesh, config.accumulate)
                 : out.mesh;

  out.sharded = cloneModule(model, diag);
  if (!out.sharded)
    return failure();
  out.sharded->attrs().set(ir::kMeshAttr, placement.str());
  out.sharded->attrs().set(passes::kZeroAttr, int64_t(config.zero));
  out.sharded->attrs().set(passes::kBucketAttr, config.bucketMiB);
  passes::PassManagerOptions options;
  options.verifyEach = true;
  passes::PassManager pm(options);
  if (failed(pm.parsePipeline(kMeshTrainingPipeline, diag)) ||
      failed(pm.run(*out.sharded, diag)))
    return failure();

  if (!accumulate) {
    auto programs = passes::partitionModule(*out.sharded, diag);
    if (programs.failed())
      return failure();
    out.step.programs = std::move(*programs);
    if (failed(compilePart(out.step, diag)))
      return failure();
    return out;
  }

  auto split = passes::splitAccumulation(*out.sharded, out.mesh, diag);
  if (split.failed())
    return failure();
  out.step.logical = std::move(split->apply);
  out.micro.logical = std::move(split->micro);
  auto apply = passes::partitionModule(*out.step.logical, diag);
  if (apply.failed())
    return failure();
  out.step.programs = std::move(*apply);
  auto micro = passes::partitionModule(*out.micro.logical, diag);
  if (micro.failed())
    return failure();
  auto fixed = fixMicroPrograms(*micro, diag);
  if (fixed.failed())
    return failure();
  out.micro.programs = std::move(*fixed);
  if (failed(compilePart(out.step, diag)) ||
      failed(compilePart(out.micro, diag)))
    return failure();
  return out;
}

std::unique_ptr<MeshRunner>
MeshRunner::create(MeshStep step, const backend::cpu::MeshOptions &options,
                   DiagnosticEngine &diag) {
  std::unique_ptr<MeshRunner> r(new MeshRunner(std::move(step)));
  const MeshStep &s = r->step_;
  r->options_ = options;
  r->executor_ = backend::cpu::MeshExecutor::create(
      s.mesh, s.step.perDevice(), options, diag);
  if (!r->executor_)
    return nullptr;
  if (s.accumulate <= 1)
    return r;
  // Micro-batches whose devices run the same programs share an executor.
  std::map<std::vector<size_t>, size_t> byPrograms;
  int64_t n = s.mesh.numDevices();
  for (int64_t i = 0; i < s.accumulate; ++i) {
    std::vector<size_t> programs;
    std::vector<const backend::Executable *> exes;
    for (int64_t d = 0; d < n; ++d) {
      size_t p = s.micro.programs.programOf[passes::microBatchDevice(
          s.mesh, s.accumulate, d, i)];
      programs.push_back(p);
      exes.push_back(s.micro.executables[p].get());
    }
    auto [it, inserted] =
        byPrograms.try_emplace(programs, r->microExecutors_.size());
    if (inserted) {
      auto e =
          backend::cpu::MeshExecutor::create(s.mesh, exes, options, diag);
      if (!e)
        return nullptr;
      r->microExecutors_.push_back(std::move(e));
    }
    r->microExecutorOf_.push_back(it->second);
  }
  return r;
}

FailureOr<std::vector<backend::cpu::RunResult>>
MeshRunner::runExecutor(backend::cpu::MeshExecutor &executor,
                        const std::vector<backend::cpu::NamedTensors> &parts,
                        DiagnosticEngine &diag) {
  auto ran = executor.run(parts, diag);
  if (options_.trace) {
    trace_.insert(trace_.end(), executor.trace().begin(),
                  executor.trace().end());
    executor.clearTrace();
    executor.setTraceOrigin(origin_);
  }
  return ran;
}

namespace {

// The parts device `device` of `mesh` holds of the arguments `program`
// takes (by name from the whole tensors `whole`); `onlySplitOn` limits it
// to the arguments split on that axis (the others are already there).
LogicalResult shardArguments(const ir::Module &program, const ir::Mesh &mesh,
                             int64_t device,
                             const backend::cpu::NamedTensors &whole,
                             backend::cpu::NamedTensors &into,
                             DiagnosticEngine &diag,
                             llvm::StringRef onlySplitOn = {}) {
  for (const auto &arg : program.graph().arguments()) {
    if (llvm::StringRef(arg->name()).startswith(passes::kMicroSumPrefix))
      continue;
    if (!onlySplitOn.empty() &&
        !arg->sharding().get(onlySplitOn).isSplit())
      continue;
    auto it = whole.find(arg->name());
    if (it == whole.end()) {
      diag.error("tensor '" + arg->name() + "' is missing");
      return failure();
    }
    into.insert_or_assign(arg->name(),
                          runtime::shardTensor(it->second, arg->sharding(),
                                               mesh, device));
  }
  return success();
}

// The whole tensor `name` from the parts of every device of `mesh`.
LogicalResult join(const std::string &name, const ir::Sharding &sharding,
                   const ir::TensorType &type, const ir::Mesh &mesh,
                   std::vector<runtime::Tensor> pieces,
                   backend::cpu::NamedTensors &into, DiagnosticEngine &diag) {
  runtime::Tensor whole;
  std::string error;
  if (!runtime::unshardTensor(pieces, sharding, mesh, type, whole, error)) {
    diag.error("joining '" + name + "': " + error);
    return failure();
  }
  into.insert_or_assign(name, std::move(whole));
  return success();
}

// Moves tensor `name` out of `from`; reports a device that returned none.
FailureOr<runtime::Tensor> take(backend::cpu::NamedTensors &from,
                                const std::string &name,
                                DiagnosticEngine &diag) {
  auto it = from.find(name);
  if (it == from.end()) {
    diag.error("a device returned no '" + name + "'");
    return failure();
  }
  return std::move(it->second);
}

// The whole outputs and updates of a part run once on every device of
// `programs.mesh` (results[d] from device d).
LogicalResult joinResults(const ir::Module &logical,
                          const passes::DevicePrograms &programs,
                          std::vector<backend::cpu::RunResult> &results,
                          backend::cpu::RunResult &out,
                          DiagnosticEngine &diag) {
  // Placements from device 0's program (every program places the same
  // values the same way), logical types from the logical module.
  const ir::Graph &local = programs.programFor(0).graph();
  const ir::Graph &g = logical.graph();
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const ir::Output &o = g.outputs()[i];
    if (llvm::StringRef(o.name).startswith(passes::kMicroSumPrefix))
      continue;
    std::vector<runtime::Tensor> pieces;
    for (auto &r : results) {
      auto t = take(r.outputs, o.name, diag);
      if (t.failed())
        return failure();
      pieces.push_back(std::move(*t));
    }
    if (failed(join(o.name, local.outputs()[i].value->sharding(),
                    o.value->type(), programs.mesh, std::move(pieces),
                    out.outputs, diag)))
      return failure();
  }
  for (size_t i = 0; i < g.updates().size(); ++i) {
    const ir::Update &u = g.updates()[i];
    std::vector<runtime::Tensor> pieces;
    for (auto &r : results) {
      auto t = take(r.updates, u.target->name(), diag);
      if (t.failed())
        return failure();
      pieces.push_back(std::move(*t));
    }
    if (failed(join(u.target->name(), local.updates()[i].value->sharding(),
                    u.target->type(), programs.mesh, std::move(pieces),
                    out.updates, diag)))
      return failure();
  }
  return success();
}

} // namespace

LogicalResult MeshRunner::runMicroBatch(
    int64_t micro, const backend::cpu::NamedTensors &arguments,
    std::vector<backend::cpu::NamedTensors> &parts,
    std::vector<backend::cpu::NamedTensors> &sums,
    std::vector<backend::cpu::RunResult> &pieces, DiagnosticEngine &diag) {
  const MeshStep &s = step_;
  int64_t n = s.mesh.numDevices();
  // Parameters and state are the same for every micro-batch: only the
  // batch's parts change after the first.
  for (int64_t d = 0; d < n; ++d) {
    int64_t v = passes::microBatchDevice(s.mesh, s.accumulate, d, micro);
    if (failed(shardArguments(s.micro.programs.programFor(v),
                              s.micro.programs.mesh, v, arguments, parts[d],
                              diag, micro == 0 ? "" : "dp")))
      return failure();
  }
  auto ran = runExecutor(*microExecutors_[microExecutorOf_[micro]], parts,
                         diag);
  if (ran.failed())
    return failure();
  for (int64_t d = 0; d < n; ++d) {
    int64_t v = passes::microBatchDevice(s.mesh, s.accumulate, d, micro);
    backend::cpu::RunResult &r = (*ran)[d];
    for (auto &[name, tensor] : r.outputs) {
      if (!llvm::StringRef(name).startswith(passes::kMicroSumPrefix))
        continue;
      auto it = sums[d].find(name);
      if (it == sums[d].end())
        sums[d].emplace(name, std::move(tensor));
      else
        it->second = runtime::sumTensors({it->second, tensor});
    }
    pieces[v] = std::move(r);
  }
  return success();
}

FailureOr<backend::cpu::RunResult>
MeshRunner::run(const backend::cpu::NamedTensors &arguments,
                DiagnosticEngine &diag) {
  const MeshStep &s = step_;
  int64_t n = s.mesh.numDevices();
  if (options_.trace && !traceStarted_) {
    // One timeline for every executor, from the first step.
    origin_ = std::chrono::steady_clock::now();
    executor_->setTraceOrigin(origin_);
    for (auto &e : microExecutors_)
      e->setTraceOrigin(origin_);
    traceStarted_ = true;
  }
  backend::cpu::RunResult out;
  std::vector<backend::cpu::NamedTensors> parts(n);
  if (s.accumulate > 1) {
    std::vector<backend::cpu::NamedTensors> microParts(n);
    std::vector<backend::cpu::RunResult> pieces(
        s.micro.programs.mesh.numDevices());
    for (int64_t i = 0; i < s.accumulate; ++i)
      if (failed(runMicroBatch(i, arguments, microParts, parts, pieces,
                               diag)))
        return failure();
    if (failed(joinResults(s.logicalOf(s.micro), s.micro.programs, pieces,
                           out, diag)))
      return failure();
  }
  for (int64_t d = 0; d < n; ++d)
    if (failed(shardArguments(s.step.programs.programFor(d), s.mesh, d,
                              arguments, parts[d], diag)))
      return failure();
  auto ran = runExecutor(*executor_, parts, diag);
  if (ran.failed() ||
      failed(joinResults(s.logicalOf(s.step), s.step.programs, *ran, out,
                         diag)))
    return failure();
  return out;
}

} // namespace mgc::session
