#include "runtime/session/MeshRunner.h"

#include "runtime/session/HostExchange.h"

#include "backend/cpu/ThreadPool.h"
#include "ir/Interpreter.h"
#include "passes/Optimizer.h"
#include "runtime/ShardTensor.h"

#include <map>
#include <set>
#include <thread>

namespace mgc::session {

using backend::NamedTensors;
using backend::RunResult;

namespace {

// Whether a micro-batch program's part of a persistent tensor is the part
// the step program holds on the same device: the same placement on every
// axis, and not split on dp, whose size differs between the two meshes.
bool samePart(const ir::Sharding &step, const ir::Sharding &micro,
              const ir::Mesh &mesh) {
  for (const ir::MeshAxis &axis : mesh.axes()) {
    ir::Placement a = step.get(axis.name), b = micro.get(axis.name);
    if (a != b || (axis.name == ir::kDataAxis && a.isSplit()))
      return false;
  }
  return true;
}

} // namespace

MeshDevices cpuMeshDevices(const backend::cpu::MeshOptions &options) {
  MeshDevices devices;
  devices.trace = options.trace;
  devices.make = [options](const ir::Mesh &mesh,
                           std::vector<const backend::Executable *> programs,
                           const backend::CommunicatorFactory &communicators,
                           backend::DeviceMesh *stateOf, DiagnosticEngine &diag)
      -> std::unique_ptr<backend::DeviceMesh> {
    // The CPU's devices keep no state of their own (keepState() is false),
    // so no mesh is ever made to share it.
    (void)stateOf;
    backend::cpu::MeshOptions o = options;
    if (communicators)
      o.communicators = communicators;
    return backend::cpu::MeshExecutor::create(mesh, std::move(programs), o,
                                              diag);
  };
  return devices;
}

std::unique_ptr<MeshRunner> MeshRunner::create(MeshStep step,
                                               const MeshDevices &devices,
                                               backend::ProcessGroup *processes,
                                               DiagnosticEngine &diag) {
  std::unique_ptr<MeshRunner> r(new MeshRunner(std::move(step)));
  const MeshStep &s = r->step_;
  r->devices_ = devices;
  bool several = processes && processes->size() > 1;
  r->processes_ = processes;
  auto fault = planFault(diag);
  if (fault.failed())
    return nullptr;
  r->fault_ = *fault;
  if (s.pipeline)
    return succeeded(r->createPipeline(diag)) ? std::move(r) : nullptr;
  if (several)
    r->communicators_ = devices.acrossProcesses
                            ? devices.acrossProcesses(*processes)
                            : processes->communicators();
  r->executor_ = devices.make(s.mesh, s.step.perDevice(), r->communicators_,
                              nullptr, diag);
  if (!r->executor_)
    return nullptr;
  r->local_.assign(r->executor_->localDevices().begin(),
                   r->executor_->localDevices().end());
  r->resident_.resize(r->local_.size());
  for (int64_t d : r->local_)
    r->times_.push_back({d, 0, 0});
  // The step's executor holds everything a device keeps: its devices may
  // keep it, and then the micro-batch executors of accumulation share it
  // on the devices (their gradient sums stay there too).
  r->stateOnDevices_ = r->executor_->keepState();
  if (s.accumulate <= 1)
    return r;
  // Micro-batches whose devices run the same programs share an executor.
  std::map<std::vector<size_t>, size_t> byPrograms;
  int64_t n = s.mesh.numDevices();
  for (int64_t i = 0; i < s.accumulate; ++i) {
    std::vector<size_t> programs;
    std::vector<const backend::Executable *> exes;
    for (int64_t d = 0; d < n; ++d) {
      int64_t v = passes::microBatchDevice(s.mesh, s.accumulate, d, i);
      size_t p = s.micro.programs.programOf[v];
      programs.push_back(p);
      exes.push_back(s.micro.executables[p].get());
      // A micro-batch reads the parameters the device holds for the step.
      const ir::Graph &stepGraph = s.step.programs.programFor(d).graph();
      for (const auto &arg :
           s.micro.programs.programFor(v).graph().arguments()) {
        if (!arg->isPersistent())
          continue;
        const ir::Value *held = stepGraph.findArgument(arg->name());
        if (!held || !samePart(held->sharding(), arg->sharding(), s.mesh)) {
          diag.error("gradient accumulation: device " + std::to_string(d) +
                     " holds '" + arg->name() + "' as " +
                     (held ? held->sharding().str() : "nothing") +
                     " but its micro-batch " + std::to_string(i) +
                     " needs it as " + arg->sharding().str());
          return nullptr;
        }
      }
    }
    auto [it, inserted] =
        byPrograms.try_emplace(programs, r->microExecutors_.size());
    if (inserted) {
      auto e =
          devices.make(s.mesh, exes, r->communicators_,
                       r->stateOnDevices_ ? r->executor_.get() : nullptr, diag);
      if (!e)
        return nullptr;
      r->microExecutors_.push_back(std::move(e));
    }
    r->microExecutorOf_.push_back(it->second);
  }
  return r;
}

LogicalResult MeshRunner::createPipeline(DiagnosticEngine &diag) {
  const MeshStep &s = step_;
  const PipelinePart &part = *s.pipeline;
  bool several = processes_ && processes_->size() > 1;
  perStage_ = s.mesh.numDevices();
  // Each pipeline device of this process gets its share of the cores.
  int64_t devicesHere =
      part.schedule.stages * perStage_ / (several ? processes_->size() : 1);
  unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
  unsigned perDevice = std::max<unsigned>(
      1, hardware / static_cast<unsigned>(std::max<int64_t>(1, devicesHere)));
  PipelineRunner::Devices runners =
      devices_.pipelineDevices
          ? devices_.pipelineDevices(PipelineRunner::wholeMesh(part),
                                     several ? processes_ : nullptr)
          : PipelineRunner::Devices{PipelineRunner::cpuExecutors(perDevice),
                                    {}};
  pipeline_ = PipelineRunner::create(s.pipeline, runners, devices_.trace,
                                     several ? processes_->communicators()
                                             : backend::CommunicatorFactory(),
                                     diag);
  if (!pipeline_)
    return failure();
  stateOnDevices_ = pipeline_->keepsState();
  local_.assign(pipeline_->localDevices().begin(),
                pipeline_->localDevices().end());
  resident_.resize(local_.size());
  for (int64_t g : local_)
    times_.push_back({g, 0, 0});
  // The first pipeline device holding a tensor gives its parts.
  const passes::ApplySplit &cut = part.applySplit;
  for (int64_t owner = 0; owner < cut.devices; ++owner)
    for (const auto *program :
         {cut.gather[owner].get(), cut.update[owner].get()})
      if (program)
        for (const auto &arg : program->graph().arguments())
          if (arg->isPersistent())
            firstHolder_.try_emplace(arg->name(), owner);
  return success();
}

std::vector<const ir::Graph *> MeshRunner::heldGraphs(size_t k) const {
  const MeshStep &s = step_;
  if (!pipeline_)
    return {&s.step.programs.programFor(local_[k]).graph()};
  size_t owner = static_cast<size_t>(local_[k] / perStage_);
  const MeshPart &gather = s.pipeline->applyGather[owner];
  const MeshPart &update = s.pipeline->applyUpdate[owner];
  std::vector<const ir::Graph *> out;
  if (gather.logical)
    out.push_back(&gather.programs.programFor(placedOn(k)).graph());
  out.push_back(&update.programs.programFor(placedOn(k)).graph());
  return out;
}

LogicalResult MeshRunner::forEachHeld(
    const std::function<LogicalResult(size_t, int64_t, const ir::Value &)>
        &fn) {
  for (size_t k = 0; k < local_.size(); ++k) {
    std::set<std::string> seen;
    for (const ir::Graph *g : heldGraphs(k))
      for (const auto &arg : g->arguments())
        if (arg->isPersistent() && seen.insert(arg->name()).second &&
            failed(fn(k, placedOn(k), *arg)))
          return failure();
  }
  return success();
}

LogicalResult MeshRunner::initialize(uint64_t seed, DiagnosticEngine &diag) {
  const MeshStep &s = step_;
  const ir::Graph &logical = s.logicalOf(s.step).graph();
  LogicalResult set = forEachHeld(
      [&](size_t k, int64_t d, const ir::Value &arg) -> LogicalResult {
        const ir::Value *whole = logical.findArgument(arg.name());
        if (!whole) {
          diag.error("tensor '" + arg.name() + "' is not in the step");
          return failure();
        }
        const ir::Sharding &sharding = arg.sharding();
        bool partial = false;
        for (const ir::MeshAxis &axis : s.mesh.axes())
          partial |= sharding.get(axis.name).isPartial();
        runtime::Tensor part;
        if (partial) {
          // Coordinate 0 holds the value, the others zeros: cut it.
          part = runtime::shardTensor(
              runtime::Tensor::fromHost(ir::initParameter(*whole, seed)),
              sharding, s.mesh, d);
        } else {
          ir::TensorType type =
              ir::localType(whole->type(), sharding, s.mesh, s.mesh.coords(d));
          if (type == whole->type())
            // A whole copy (a replica): made on every core, as one device's.
            part = runtime::Tensor::initial(*whole, seed,
                                            backend::cpu::hardwareThreads());
          else
            part = runtime::Tensor::fromHost(ir::initParameterSlab(
                *whole, seed,
                runtime::partOffsets(whole->type(), sharding, s.mesh, d),
                type.shape));
        }
        resident_[k].insert_or_assign(arg.name(), std::move(part));
        return success();
      });
  // Once, for every part set: the devices take them at the next step.
  stateChangedOnHost();
  return set;
}

LogicalResult MeshRunner::load(const NamedTensors &whole,
                               DiagnosticEngine &diag) {
  LogicalResult set = forEachHeld(
      [&](size_t k, int64_t d, const ir::Value &arg) -> LogicalResult {
        auto it = whole.find(arg.name());
        if (it == whole.end()) {
          diag.error("tensor '" + arg.name() + "' is missing");
          return failure();
        }
        resident_[k].insert_or_assign(
            arg.name(),
            runtime::shardTensor(it->second, arg.sharding(), step_.mesh, d));
        return success();
      });
  // Once, for every part set: the devices take them at the next step.
  stateChangedOnHost();
  return set;
}

void MeshRunner::stateChangedOnHost() {
  hostStale_ = false;
  if (!stateOnDevices_)
    return;
  if (pipeline_)
    pipeline_->stateChanged();
  else
    executor_->stateChanged();
}

FailureOr<runtime::Tensor> MeshRunner::readState(size_t k,
                                                 const std::string &name,
                                                 DiagnosticEngine &diag) {
  return pipeline_ ? pipeline_->readState(local_[k], name, diag)
                   : executor_->readState(k, name, diag);
}

LogicalResult MeshRunner::syncState(DiagnosticEngine &diag) {
  if (!hostStale_)
    return success();
  for (size_t k = 0; k < resident_.size(); ++k)
    for (auto &[name, t] : resident_[k]) {
      auto value = readState(k, name, diag);
      if (value.failed())
        return failure();
      t = std::move(*value);
    }
  hostStale_ = false;
  return success();
}

LogicalResult
MeshRunner::cutInputs(const MeshPart &part,
                      const std::function<int64_t(int64_t)> &deviceOf,
                      const NamedTensors &inputs,
                      std::vector<NamedTensors> &into, DiagnosticEngine &diag) {
  for (size_t k = 0; k < local_.size(); ++k) {
    int64_t v = deviceOf(placedOn(k));
    for (const auto &arg : part.programs.programFor(v).graph().arguments()) {
      if (arg->kind() != ir::ValueKind::Input ||
          llvm::StringRef(arg->name()).startswith(passes::kMicroSumPrefix))
        continue;
      auto it = inputs.find(arg->name());
      if (it == inputs.end()) {
        diag.error("input '" + arg->name() + "' is missing");
        return failure();
      }
      into[k].insert_or_assign(arg->name(),
                               runtime::shardTensor(it->second, arg->sharding(),
                                                    part.programs.mesh, v));
    }
  }
  return success();
}

// Moves the resident parts a program takes into its arguments and back,
// so that no step copies the parameters.
void MeshRunner::addResident(const MeshPart &part,
                             const std::function<int64_t(int64_t)> &deviceOf,
                             std::vector<NamedTensors> &into) {
  for (size_t k = 0; k < local_.size(); ++k) {
    int64_t v = deviceOf(placedOn(k));
    for (const auto &arg : part.programs.programFor(v).graph().arguments())
      if (arg->isPersistent()) {
        auto it = resident_[k].find(arg->name());
        if (it != resident_[k].end())
          into[k].insert_or_assign(arg->name(), std::move(it->second));
      }
  }
}

namespace {

// Moves the persistent arguments back to where addResident took them.
void returnResident(std::vector<NamedTensors> &from,
                    std::vector<NamedTensors> &resident) {
  for (size_t k = 0; k < from.size(); ++k)
    for (auto &[name, t] : resident[k]) {
      auto it = from[k].find(name);
      if (it != from[k].end())
        t = std::move(it->second);
    }
}

// Adds a micro-batch's summed outputs (micro.sum.*) to `sums`, moving them
// out of `outputs` (the rest of `outputs` stays).
void addMicroSums(NamedTensors &outputs, NamedTensors &sums) {
  for (auto &[name, tensor] : outputs) {
    if (!llvm::StringRef(name).startswith(passes::kMicroSumPrefix))
      continue;
    auto it = sums.find(name);
    if (it == sums.end())
      sums.emplace(name, std::move(tensor));
    else
      it->second = runtime::sumTensors({it->second, tensor});
  }
}

} // namespace

FailureOr<std::vector<RunResult>>
MeshRunner::runExecutor(backend::DeviceMesh &executor,
                        const std::vector<NamedTensors> &parts,
                        DiagnosticEngine &diag, llvm::StringRef context,
                        const std::vector<backend::UpdateTargets> *updateInto) {
  auto ran = executor.run(parts, diag, context, updateInto);
  std::optional<backend::TransferBytes> moved = executor.lastTransfers();
  if (transfers_ && moved)
    *transfers_ += *moved;
  else
    transfers_.reset();
  if (!nonFinite_ || nonFinite_->received)
    if (auto origin = executor.firstNonFinite();
        origin && (!nonFinite_ || !origin->received))
      nonFinite_ = origin;
  if (ran.succeeded())
    for (size_t k = 0; k < times_.size(); ++k) {
      times_[k].stepSeconds += executor.lastTimes()[k].stepSeconds;
      times_[k].waitSeconds += executor.lastTimes()[k].waitSeconds;
      times_[k].bytesSent += executor.lastTimes()[k].bytesSent;
    }
  if (devices_.trace) {
    trace_.insert(trace_.end(), executor.trace().begin(),
                  executor.trace().end());
    executor.clearTrace();
    executor.setTraceOrigin(origin_);
  }
  return ran;
}

LogicalResult MeshRunner::fromEveryRank(
    const std::string &mine, llvm::StringRef what,
    const std::function<bool(int, const std::string &)> &take,
    DiagnosticEngine &diag) {
  std::vector<std::string> all;
  std::string error;
  if (failed(processes_->allGather(mine, all, error))) {
    diag.error(what.str() + ": " + error);
    return failure();
  }
  for (size_t r = 0; r < all.size(); ++r)
    if (!take(static_cast<int>(r), all[r])) {
      diag.error(what.str() + ": rank " + std::to_string(r) +
                 " sent a malformed message");
      return failure();
    }
  return success();
}

LogicalResult MeshRunner::exchange(
    std::map<int64_t, NamedTensors> &pieces,
    const std::function<bool(int64_t, const std::string &)> &needed,
    llvm::StringRef what, DiagnosticEngine &diag) {
  if (!processes_ || processes_->size() <= 1)
    return success();
  int me = processes_->rank();
  return fromEveryRank(
      packParts(pieces, needed), what,
      [&](int r, const std::string &bytes) {
        return r == me || unpackParts(bytes, pieces);
      },
      diag);
}

namespace {

// The whole tensor `name` (of `type`, placed `sharding` on `mesh`) from
// the parts in `pieces`, moved out of them; the parts unshardTensor does
// not read may be missing.
LogicalResult joinWhole(const std::string &name, const ir::Sharding &sharding,
                        const ir::TensorType &type, const ir::Mesh &mesh,
                        std::map<int64_t, NamedTensors> &pieces,
                        NamedTensors &out, DiagnosticEngine &diag) {
  std::vector<runtime::Tensor> parts(mesh.numDevices());
  for (int64_t d = 0; d < mesh.numDevices(); ++d) {
    if (!runtime::partIsRead(sharding, mesh, d))
      continue;
    auto it = pieces[d].find(name);
    if (it == pieces[d].end()) {
      diag.error("device " + std::to_string(d) + " has no part of '" + name +
                 "'");
      return failure();
    }
    parts[d] = std::move(it->second);
  }
  runtime::Tensor whole;
  std::string error;
  if (!runtime::unshardTensor(parts, sharding, mesh, type, whole, error)) {
    diag.error("joining '" + name + "': " + error);
    return failure();
  }
  out.insert_or_assign(name, std::move(whole));
  return success();
}

} // namespace

LogicalResult MeshRunner::joinOutputs(const ir::Module &logical,
                                      const passes::DevicePrograms &programs,
                                      std::map<int64_t, NamedTensors> &pieces,
                                      NamedTensors &out,
                                      DiagnosticEngine &diag) {
  // Placements from device 0's program (every program places the same
  // values the same way), logical types from the logical module. Only the
  // scalars (the loss, the metrics) are joined: they are what a step
  // returns; the others (logits) would cost a gather every step.
  const ir::Graph &placed = programs.programFor(0).graph();
  const ir::Graph &g = logical.graph();
  std::map<std::string, const ir::Value *> placedOf;
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const ir::Output &o = g.outputs()[i];
    if (o.value->type().rank() == 0 &&
        !llvm::StringRef(o.name).startswith(passes::kMicroSumPrefix))
      placedOf[o.name] = placed.outputs()[i].value;
  }
  auto needed = [&](int64_t d, const std::string &name) {
    auto it = placedOf.find(name);
    return it != placedOf.end() &&
           runtime::partIsRead(it->second->sharding(), programs.mesh, d);
  };
  if (failed(exchange(pieces, needed, "joining the step's outputs", diag)))
    return failure();
  for (const auto &[name, value] : placedOf)
    if (failed(joinWhole(name, value->sharding(), value->type(), programs.mesh,
                         pieces, out, diag)))
      return failure();
  return success();
}

FailureOr<RunResult> MeshRunner::run(const NamedTensors &inputs,
                                     DiagnosticEngine &diag,
                                     llvm::StringRef context) {
  const MeshStep &s = step_;
  size_t n = local_.size();
  if (devices_.trace && !traceStarted_) {
    // One timeline for every executor, from the first step.
    origin_ = std::chrono::steady_clock::now();
    if (executor_)
      executor_->setTraceOrigin(origin_);
    for (auto &e : microExecutors_)
      e->setTraceOrigin(origin_);
    if (pipeline_)
      pipeline_->setTraceOrigin(origin_);
    traceStarted_ = true;
  }
  RunResult out;
  nonFinite_.reset();
  // Summed over the executors the step runs (runExecutor, and a
  // pipeline's).
  transfers_ = backend::TransferBytes{};
  if (pipeline_) {
    std::map<int64_t, NamedTensors> pieces, applied;
    std::vector<NamedTensors> sums(static_cast<size_t>(perStage_));
    if (failed(runPipeline(inputs, sums, pieces, diag, context)) ||
        failed(joinOutputs(s.logicalOf(s.micro), s.micro.programs, pieces,
                           out.outputs, diag)) ||
        failed(runApplies(inputs, sums, applied, diag, context)) ||
        failed(joinOutputs(s.logicalOf(s.step), s.step.programs, applied,
                           out.outputs, diag)))
      return failure();
    *transfers_ += pipeline_->takeTransfers();
    hostStale_ = stateOnDevices_;
  } else {
    std::vector<NamedTensors> parts(n);
    if (failed(runWhole(inputs, parts, out, diag, context)))
      return failure();
  }
  ++steps_;
  // The step counter is read after every step; it is the same on every
  // device that holds it.
  for (size_t k = 0; k < resident_.size(); ++k) {
    auto counter = resident_[k].find(passes::kStepStateName);
    if (counter == resident_[k].end())
      continue;
    if (!hostStale_) {
      out.updates.emplace(passes::kStepStateName, counter->second);
      break;
    }
    auto value = readState(k, passes::kStepStateName, diag);
    if (value.failed())
      return failure();
    if (transfers_)
      transfers_->deviceToHost += value->nbytes();
    out.updates.emplace(passes::kStepStateName, std::move(*value));
    break;
  }
  return out;
}

int64_t MeshRunner::rowsDevice(int64_t d, int64_t i) const {
  return passes::microBatchDevice(step_.mesh, step_.accumulate, d,
                                  rowsOfMicroBatch(i, fault_));
}

LogicalResult MeshRunner::runWhole(const NamedTensors &inputs,
                                   std::vector<NamedTensors> &parts,
                                   RunResult &out, DiagnosticEngine &diag,
                                   llvm::StringRef context) {
  const MeshStep &s = step_;
  size_t n = local_.size();
  auto same = [](int64_t d) { return d; };
  if (s.accumulate > 1) {
    // pieces: the outputs of every micro-batch device this process ran.
    std::map<int64_t, NamedTensors> pieces;
    for (int64_t i = 0; i < s.accumulate; ++i) {
      auto microOf = [&](int64_t d) {
        return passes::microBatchDevice(s.mesh, s.accumulate, d, i);
      };
      auto rowsOf = [&](int64_t d) { return rowsDevice(d, i); };
      std::vector<NamedTensors> args(n);
      if (failed(cutInputs(s.micro, rowsOf, inputs, args, diag)))
        return failure();
      addResident(s.micro, microOf, args);
      std::string where = context.str() + "micro-batch " +
                          std::to_string(i + 1) + " of " +
                          std::to_string(s.accumulate) + ", ";
      auto ran =
          runExecutor(*microExecutors_[microExecutorOf_[i]], args, diag, where);
      returnResident(args, resident_);
      if (ran.failed())
        return failure();
      for (size_t k = 0; k < n; ++k) {
        RunResult &r = (*ran)[k];
        addMicroSums(r.outputs, parts[k]);
        pieces[microOf(local_[k])] = std::move(r.outputs);
      }
    }
    if (failed(joinOutputs(s.logicalOf(s.micro), s.micro.programs, pieces,
                           out.outputs, diag)))
      return failure();
  }
  if (failed(cutInputs(s.step, same, inputs, parts, diag)))
    return failure();
  addResident(s.step, same, parts);
  // The step's updates go straight into the resident tensors it was given
  // (a fused optimizer update writes its parameter in place), so that no
  // step allocates or copies the parameters and optimizer state.
  std::vector<backend::UpdateTargets> updateInto(n);
  for (size_t k = 0; k < n; ++k)
    for (const auto &held : resident_[k])
      if (auto it = parts[k].find(held.first); it != parts[k].end())
        updateInto[k].emplace(held.first, &it->second);
  auto ran = runExecutor(*executor_, parts, diag, context, &updateInto);
  returnResident(parts, resident_);
  if (ran.failed())
    return failure();
  std::map<int64_t, NamedTensors> pieces;
  for (size_t k = 0; k < n; ++k) {
    for (auto &[name, t] : (*ran)[k].updates)
      resident_[k].insert_or_assign(name, std::move(t));
    pieces[local_[k]] = std::move((*ran)[k].outputs);
  }
  hostStale_ = stateOnDevices_;
  return joinOutputs(s.logicalOf(s.step), s.step.programs, pieces, out.outputs,
                     diag);
}

LogicalResult MeshRunner::runPipeline(const NamedTensors &inputs,
                                      std::vector<NamedTensors> &sums,
                                      std::map<int64_t, NamedTensors> &pieces,
                                      DiagnosticEngine &diag,
                                      llvm::StringRef context) {
  const MeshStep &s = step_;
  // Each device reads its micro-batches' parts of the inputs and the
  // parameters its pipeline device holds.
  size_t n = local_.size();
  size_t whole = static_cast<size_t>(s.pipeline->schedule.stages * perStage_);
  std::vector<std::vector<NamedTensors>> cut(s.accumulate);
  PipelineRunner::PerDevice arguments(s.accumulate);
  for (int64_t i = 0; i < s.accumulate; ++i) {
    auto microOf = [&](int64_t d) {
      return passes::microBatchDevice(s.mesh, s.accumulate, d, i);
    };
    auto rowsOf = [&](int64_t d) { return rowsDevice(d, i); };
    cut[i].resize(n);
    if (failed(cutInputs(s.micro, rowsOf, inputs, cut[i], diag)))
      return failure();
    arguments[i].resize(whole);
    for (size_t k = 0; k < n; ++k) {
      PipelineRunner::TensorRefs &refs =
          arguments[i][static_cast<size_t>(local_[k])];
      for (const auto &[name, t] : cut[i][k])
        refs[name] = &t;
      for (const auto &[name, t] : resident_[k])
        refs.emplace(name, &t);
    }
  }
  auto ran = pipeline_->run(arguments, diag, context);
  if (devices_.trace)
    for (backend::TraceEvent &e : pipeline_->takeTrace())
      trace_.push_back(std::move(e));
  if (ran.failed())
    return failure();
  for (int64_t i = 0; i < s.accumulate; ++i)
    for (int64_t d = 0; d < perStage_; ++d) {
      NamedTensors &outputs = (*ran)[i][d];
      addMicroSums(outputs, sums[d]);
      pieces[passes::microBatchDevice(s.mesh, s.accumulate, d, i)] =
          std::move(outputs);
    }
  return success();
}

LogicalResult MeshRunner::runApplies(const NamedTensors &inputs,
                                     std::vector<NamedTensors> &sums,
                                     std::map<int64_t, NamedTensors> &pieces,
                                     DiagnosticEngine &diag,
                                     llvm::StringRef context) {
  const MeshStep &s = step_;
  const PipelinePart &part = *s.pipeline;
  // Each local device reads its parameters and state, the accumulated
  // gradients of its place in the stage mesh, and its parts of any input.
  std::vector<PipelineRunner::TensorRefs> arguments(
      static_cast<size_t>(part.schedule.stages * perStage_));
  std::vector<NamedTensors> cut(local_.size());
  for (size_t k = 0; k < local_.size(); ++k) {
    int64_t d = placedOn(k);
    PipelineRunner::TensorRefs &refs =
        arguments[static_cast<size_t>(local_[k])];
    for (const ir::Graph *g : heldGraphs(k))
      for (const auto &arg : g->arguments()) {
        const std::string &name = arg->name();
        if (arg->isPersistent()) {
          auto it = resident_[k].find(name);
          if (it != resident_[k].end())
            refs[name] = &it->second;
          continue;
        }
        if (llvm::StringRef(name).startswith(passes::kMicroSumPrefix)) {
          auto it = sums[d].find(name);
          if (it != sums[d].end())
            refs[name] = &it->second;
          continue;
        }
        auto it = inputs.find(name);
        if (it != inputs.end() && !cut[k].count(name))
          refs[name] =
              &cut[k]
                   .emplace(name, runtime::shardTensor(
                                      it->second, arg->sharding(), s.mesh, d))
                   .first->second;
      }
  }
  auto ran = pipeline_->runApply(arguments, diag, context);
  if (devices_.trace)
    for (backend::TraceEvent &e : pipeline_->takeTrace())
      trace_.push_back(std::move(e));
  if (ran.failed())
    return failure();
  for (size_t k = 0; k < local_.size(); ++k) {
    for (auto &[name, t] : (*ran)[k].updates)
      resident_[k].insert_or_assign(name, std::move(t));
    for (auto &[name, t] : (*ran)[k].outputs)
      pieces[placedOn(k)].emplace(name, std::move(t));
  }
  return success();
}

std::pair<int64_t, int64_t>
MeshRunner::inputRows(const std::string &name) const {
  const MeshStep &s = step_;
  const ir::Value *whole = s.logicalOf(s.step).graph().findArgument(name);
  if (s.accumulate > 1 && !whole)
    whole = s.logicalOf(s.micro).graph().findArgument(name);
  if (!whole || whole->type().rank() == 0)
    return {0, 0};
  int64_t rows = whole->type().shape[0];
  int64_t lo = rows, hi = 0;
  // Every program a local device runs: the step, and with accumulation the
  // program of each of its micro-batches.
  auto cover = [&](const MeshPart &part, int64_t v) {
    const ir::Value *arg =
        part.programs.programFor(v).graph().findArgument(name);
    if (!arg || arg->kind() != ir::ValueKind::Input)
      return;
    const ir::Mesh &mesh = part.programs.mesh;
    int64_t begin =
        runtime::partOffsets(whole->type(), arg->sharding(), mesh, v)[0];
    int64_t size =
        ir::localType(whole->type(), arg->sharding(), mesh, mesh.coords(v))
            .shape[0];
    lo = std::min(lo, begin);
    hi = std::max(hi, begin + size);
  };
  for (size_t k = 0; k < local_.size(); ++k) {
    int64_t d = placedOn(k);
    cover(s.step, d);
    for (int64_t i = 1; s.accumulate > 1 && i <= s.accumulate; ++i)
      cover(s.micro, passes::microBatchDevice(s.mesh, s.accumulate, d, i - 1));
  }
  return lo < hi ? std::make_pair(lo, hi) : std::make_pair(int64_t(0), rows);
}

std::map<std::string, ir::TensorType> MeshRunner::persistentTypes() const {
  std::map<std::string, ir::TensorType> out;
  for (const auto &arg : step_.logicalOf(step_.step).graph().arguments())
    if (arg->isPersistent())
      out.emplace(arg->name(), arg->type());
  return out;
}

// Whether local device k gives its part of `name` when the parts are
// joined: the first pipeline device holding a tensor gives it.
bool MeshRunner::givesPart(size_t k, const std::string &name) const {
  if (!pipeline_)
    return true;
  auto it = firstHolder_.find(name);
  return it != firstHolder_.end() && it->second == local_[k] / perStage_;
}

std::vector<runtime::TensorSlab> MeshRunner::localSlabs() const {
  std::map<std::string, ir::TensorType> types = persistentTypes();
  std::vector<runtime::TensorSlab> out;
  for (size_t k = 0; k < local_.size(); ++k) {
    int64_t d = placedOn(k);
    std::vector<const ir::Graph *> graphs = heldGraphs(k);
    for (const auto &[name, part] : resident_[k]) {
      const ir::Value *held = nullptr;
      for (const ir::Graph *g : graphs)
        if (!held)
          held = g->findArgument(name);
      auto type = types.find(name);
      if (!held || type == types.end() || !givesPart(k, name) ||
          !runtime::partIsRead(held->sharding(), step_.mesh, d))
        continue;
      out.push_back(
          {name,
           runtime::partOffsets(type->second, held->sharding(), step_.mesh, d),
           part});
    }
  }
  return out;
}

FailureOr<NamedTensors> MeshRunner::gather(DiagnosticEngine &diag) {
  if (failed(syncState(diag)))
    return failure();
  const MeshStep &s = step_;
  // Placements from device 0's program, logical types from the step.
  const ir::Graph &placed = s.step.programs.programFor(0).graph();
  std::map<int64_t, NamedTensors> pieces;
  for (size_t k = 0; k < local_.size(); ++k)
    for (const auto &[name, t] : resident_[k]) {
      const ir::Value *held = placed.findArgument(name);
      if (held && givesPart(k, name) &&
          runtime::partIsRead(held->sharding(), s.mesh, placedOn(k)))
        pieces[placedOn(k)].emplace(name, t);
    }
  if (failed(exchange(
          pieces, [](int64_t, const std::string &) { return true; },
          "gathering the parameters", diag)))
    return failure();
  NamedTensors out;
  for (const auto &arg : s.logicalOf(s.step).graph().arguments()) {
    if (!arg->isPersistent())
      continue;
    const ir::Value *held = placed.findArgument(arg->name());
    if (!held) {
      diag.error("device 0 holds no '" + arg->name() + "'");
      return failure();
    }
    if (failed(joinWhole(arg->name(), held->sharding(), arg->type(), s.mesh,
                         pieces, out, diag)))
      return failure();
  }
  return out;
}

} // namespace mgc::session
