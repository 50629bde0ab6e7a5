#include "runtime/session/PipelineRunner.h"

#include "backend/cpu/CpuDevice.h"
#include "backend/cpu/InProcessCommunicator.h"
#include "runtime/ShardTensor.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <tuple>

namespace mgc::session {

using passes::Phase;
using passes::PipelineSplit;
using passes::PipeMessage;
using passes::PipeOp;

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string messageText(const PipeMessage &m) {
  return std::string(m.gradient ? "the gradient" : "the activation") +
         " from stage " + std::to_string(m.fromStage) + " to stage " +
         std::to_string(m.toStage) + " of micro-batch " +
         std::to_string(m.micro);
}

// The values a message carries (indices into the split's values).
const std::vector<size_t> &carried(const PipelineSplit &split,
                                   const PipeMessage &m) {
  return m.gradient ? split.backwardAcross[m.toStage]
                    : split.forwardAcross[m.fromStage];
}

// The phases a piece of work runs.
std::vector<Phase> phasesOf(passes::Work work, bool splitBackward) {
  switch (work) {
  case passes::Work::Forward:
    return {Phase::Forward};
  case passes::Work::Backward:
    if (splitBackward)
      return {Phase::Backward, Phase::Weight};
    return {Phase::Backward};
  case passes::Work::BackwardInput:
    return {Phase::Backward};
  case passes::Work::BackwardWeight:
    return {Phase::Weight};
  }
  return {};
}

// Runs `exe` on `refs`; on failure `first` is its first error.
FailureOr<backend::RunResult>
runProgram(backend::DeviceExecutor &exe,
           const backend::DeviceExecutor::TensorRefs &refs, std::string &first,
           const backend::RunControl &control) {
  DiagnosticEngine local;
  local.setHandler([&](Severity severity, Loc, const std::string &m) {
    if (severity == Severity::Error && first.empty())
      first = m;
  });
  return exe.run(refs, local, control);
}

// One output of a stage's program on a micro-batch.
struct StageOutput {
  int64_t micro = 0, device = 0, stage = 0;
  Phase phase = Phase::Forward;
  std::string name;
  runtime::Tensor tensor;
};

// Whether a pipeline's state can stay on its devices: every stage and
// gather program reads only state its device's update program holds (of
// the same type), and each stage's phase runs the micro-batches in order
// (so that a device adds its gradient sums in the host's order).
bool stateCanStay(const PipelinePart &part) {
  for (size_t owner = 0; owner < part.applyUpdate.size(); ++owner) {
    int64_t perStage = part.stageMesh.numDevices();
    for (int64_t r = 0; r < perStage; ++r) {
      const ir::Graph &update =
          part.applyUpdate[owner].perDevice()[r]->module->graph();
      auto heldThere = [&](const ir::Graph &g) {
        for (const auto &arg : g.arguments()) {
          if (!arg->isPersistent())
            continue;
          const ir::Value *held = update.findArgument(arg->name());
          if (!held || !held->isPersistent() || held->type() != arg->type())
            return false;
        }
        return true;
      };
      if (part.applyGather[owner].logical &&
          !heldThere(part.applyGather[owner].perDevice()[r]->module->graph()))
        return false;
      for (const auto &split : part.executables)
        for (size_t v = 0; v < split.size(); ++v)
          if (part.schedule.deviceOf(static_cast<int64_t>(v)) ==
              static_cast<int64_t>(owner))
            for (const auto &exe : split[v])
              if (!heldThere(exe->module->graph()))
                return false;
    }
  }
  for (size_t d = 0; d < part.programs.size(); ++d) {
    std::map<std::pair<int64_t, Phase>, int64_t> last;
    for (const PipeOp &op : part.programs[d]) {
      if (op.kind != PipeOp::Kind::Compute)
        continue;
      int64_t stage =
          part.schedule.virtualStage(static_cast<int64_t>(d), op.slot.chunk);
      std::set<Phase> phases;
      for (const PipelineSplit &split : part.splits)
        for (Phase phase : phasesOf(op.slot.work, split.splitBackward))
          phases.insert(phase);
      for (Phase phase : phases) {
        auto [it, first] = last.try_emplace({stage, phase}, op.slot.micro);
        if (!first && it->second >= op.slot.micro)
          return false;
        it->second = op.slot.micro;
      }
    }
  }
  return true;
}

// The outputs of a pipeline's stage programs that more than one stage or
// phase gives (the tied embedding's gradient): summed on the host.
std::set<std::string> sumsOfSeveralGivers(const PipelinePart &part) {
  std::map<std::string, std::set<std::pair<size_t, size_t>>> givers;
  for (const PipelineSplit &split : part.splits)
    for (size_t v = 0; v < split.programs.size(); ++v)
      for (size_t phase = 0; phase < split.programs[v].size(); ++phase)
        for (const ir::Output &o : split.programs[v][phase]->graph().outputs())
          givers[o.name].insert({v, phase});
  std::set<std::string> out;
  for (const auto &[name, by] : givers)
    if (by.size() > 1)
      out.insert(name);
  return out;
}

} // namespace

struct PipelineRunner::Shared {
  std::mutex mutex;
  bool aborted = false;
  std::string context;
  // Per thread (device r of pipeline device d is thread d * devices per
  // stage + r; threads of devices other processes run stay empty): what its
  // programs gave that is not a pipe value, its bytes sent and its seconds
  // computing and waiting.
  std::vector<std::vector<StageOutput>> outputs;
  std::vector<uint64_t> bytesSent;
  std::vector<double> busySeconds, waitSeconds;
  std::vector<backend::TransferBytes> transfers;
  // Per thread, its timeline (when tracing).
  std::vector<std::vector<backend::TraceEvent>> events;
  // Across processes: per thread, its micro-batches' outputs summed over
  // the pipeline (every device gets the same).
  std::vector<std::vector<NamedTensors>> reduced;
};

double PipelineRunner::Times::bubble() const {
  double busy = 0;
  for (double b : busySeconds)
    busy += b;
  double total = seconds * static_cast<double>(busySeconds.size()) *
                 static_cast<double>(devicesPerStage);
  return total > 0 ? 1 - busy / total : 0;
}

PipelineRunner::ExecutorFactory PipelineRunner::cpuExecutors(unsigned threads) {
  return
      [threads](
          const backend::Executable &program, backend::Communicator &comm,
          size_t, const backend::SharedBuffers &,
          DiagnosticEngine &diag) -> std::unique_ptr<backend::DeviceExecutor> {
        backend::cpu::CpuOptions options;
        options.threads = std::max(1u, threads);
        options.comm = &comm;
        return backend::cpu::CpuDevice::create(program, options, diag);
      };
}

ir::Mesh PipelineRunner::wholeMesh(const PipelinePart &part) {
  std::vector<ir::MeshAxis> axes{{ir::kPipelineAxis, part.schedule.stages, {}}};
  for (const ir::MeshAxis &a : part.stageMesh.axes())
    axes.push_back(a);
  return ir::Mesh(std::move(axes));
}

std::unique_ptr<PipelineRunner>
PipelineRunner::create(std::shared_ptr<const PipelinePart> part,
                       const Devices &devices, bool trace,
                       const backend::CommunicatorFactory &communicators,
                       DiagnosticEngine &diag) {
  std::unique_ptr<PipelineRunner> r(new PipelineRunner());
  r->trace_ = trace;
  r->traceOrigin_ = Clock::now();
  r->part_ = std::move(part);
  const PipelinePart &p = *r->part_;
  int64_t perStage = p.stageMesh.numDevices();
  ir::Mesh whole = wholeMesh(p);
  const backend::CommunicatorFactory &collectives = devices.collectives;
  // The communicators `make` makes of the whole mesh, or null, reported.
  auto made = [&](const backend::CommunicatorFactory &make, const char *what) {
    std::string error;
    std::unique_ptr<backend::CommunicatorSet> set = make(whole, error);
    if (!set)
      diag.error(std::string(what) + ": " + error);
    return set;
  };
  r->comms_ = communicators
                  ? made(communicators, "the pipeline's communicators")
                  : std::make_unique<backend::cpu::InProcessMesh>(whole);
  if (!r->comms_)
    return nullptr;
  r->local_.assign(r->comms_->localDevices().begin(),
                   r->comms_->localDevices().end());
  if (collectives) {
    r->collectives_ =
        made(collectives, "the communicators of the pipeline's collectives");
    if (!r->collectives_)
      return nullptr;
    if (r->collectives_->localDevices() != llvm::ArrayRef(r->local_)) {
      diag.error("the communicators of the pipeline's collectives run other "
                 "devices than its messages' (internal error)");
      return nullptr;
    }
  }
  r->threads_ = std::make_unique<backend::DeviceThreads>(r->local_.size());
  if (!r->threads_->ok()) {
    diag.error("cannot start the pipeline's device threads: " +
               r->threads_->error());
    return nullptr;
  }
  r->acrossProcesses_ =
      static_cast<int64_t>(r->local_.size()) != whole.numDevices();
  // Across processes each device's outputs are summed on the host over the
  // pipeline (run()), every gradient sum among them: the state is copied
  // in and out there, as on the CPU.
  r->keep_ = devices.keepState && !r->acrossProcesses_ && stateCanStay(p);
  if (r->keep_) {
    r->returnedSums_ = sumsOfSeveralGivers(p);
    for (const passes::ApplyValue &v : p.applySplit.values)
      if (v.shared)
        r->exchanged_.insert(v.name);
  }
  if (failed(r->makeExecutors(devices.executors,
                              r->collectives_ ? *r->collectives_ : *r->comms_,
                              diag)))
    return nullptr;
  r->applyBytes_.assign(static_cast<size_t>(whole.numDevices()), 0);
  r->applyTransfers_.assign(static_cast<size_t>(whole.numDevices()), {});
  r->applyEvents_.resize(static_cast<size_t>(whole.numDevices()));
  for (const passes::PipelineSplit &split : p.splits) {
    std::map<std::string, StageOutputType> &types =
        r->outputTypes_.emplace_back();
    for (int64_t v = 0; v < split.stages; ++v)
      for (const auto &program : split.programs[v])
        for (const ir::Output &o : program->graph().outputs()) {
          if (llvm::StringRef(o.name).startswith(passes::kPipeValuePrefix))
            continue;
          StageOutputType &t =
              types.emplace(o.name, StageOutputType{o.value->type(), {}})
                  .first->second;
          int64_t d = p.schedule.deviceOf(v);
          if (!llvm::is_contained(t.devices, d))
            t.devices.push_back(d);
        }
  }
  r->times_.bytesSent.assign(p.schedule.stages, 0);
  r->times_.busySeconds.assign(p.schedule.stages, 0);
  r->times_.waitSeconds.assign(p.schedule.stages, 0);
  r->times_.devicesPerStage = perStage;
  return r;
}

LogicalResult PipelineRunner::makeExecutors(const ExecutorFactory &executors,
                                            backend::CommunicatorSet &comms,
                                            DiagnosticEngine &diag) {
  const PipelinePart &p = *part_;
  int64_t perStage = p.stageMesh.numDevices();
  for (size_t local = 0; local < local_.size(); ++local) {
    int64_t device = local_[local];
    int64_t owner = device / perStage, r = device % perStage;
    backend::Communicator &comm = comms.endpoint(device);
    onDevice_[device];
    // The update executor holds the device's state; the others share it.
    ApplyExecutors &mine = applyExecutors_[device];
    const MeshPart &gather = p.applyGather[owner];
    if (!(mine.update = executors(*p.applyUpdate[owner].perDevice()[r], comm,
                                  local, {}, diag)))
      return failure();
    backend::SharedBuffers ofGather, ofStage;
    if (keep_)
      ofGather = {mine.update.get(), mine.update.get()};
    if (gather.logical &&
        !(mine.gather =
              executors(*gather.perDevice()[r], comm, local, ofGather, diag)))
      return failure();
    if (keep_)
      ofStage = {mine.update.get(), sumsInto(device)};
    for (const std::vector<size_t> &ofDevice : p.splitOf) {
      size_t k = ofDevice[r];
      StageExecutors &stages = executors_[{r, k}];
      stages.resize(p.executables[k].size());
      for (size_t v = 0; v < stages.size(); ++v) {
        if (p.schedule.deviceOf(static_cast<int64_t>(v)) != owner ||
            !stages[v].empty())
          continue;
        for (const auto &exe : p.executables[k][v]) {
          auto e = executors(*exe, comm, local, ofStage, diag);
          if (!e)
            return failure();
          stages[v].push_back(std::move(e));
        }
      }
    }
  }
  return success();
}

backend::DeviceExecutor *PipelineRunner::sumsInto(int64_t device) const {
  const ApplyExecutors &mine = applyExecutors_.at(device);
  return mine.gather ? mine.gather.get() : mine.update.get();
}

backend::RunControl
PipelineRunner::controlOf(int64_t device, backend::RunControl::HeldOutputs held,
                          const std::set<std::string> *returned) const {
  backend::RunControl control;
  if (!keep_)
    return control;
  control.resident = &onDevice_.at(device);
  control.heldOutputs = held;
  control.returnedOutputs = returned;
  return control;
}

void PipelineRunner::afterRun(int64_t device,
                              const backend::DeviceExecutor &exe,
                              const backend::DeviceExecutor *into,
                              const std::set<std::string> &returned) {
  if (!keep_)
    return;
  // What the run read is used up, but the state, which it copied in (or
  // found there) and updated in place.
  std::set<std::string> &names = onDevice_.at(device);
  const ir::Graph &g = exe.executable().module->graph();
  for (const auto &arg : g.arguments()) {
    if (arg->isPersistent())
      names.insert(arg->name());
    else
      names.erase(arg->name());
  }
  if (!into)
    return;
  const ir::Graph &target = into->executable().module->graph();
  for (const ir::Output &o : g.outputs()) {
    const ir::Value *arg = target.findArgument(o.name);
    if (!returned.count(o.name) && arg && !arg->isPersistent() &&
        arg->type() == o.value->type())
      names.insert(o.name);
  }
}

FailureOr<runtime::Tensor> PipelineRunner::readState(int64_t device,
                                                     const std::string &name,
                                                     DiagnosticEngine &diag) {
  auto it = applyExecutors_.find(device);
  if (it == applyExecutors_.end()) {
    diag.error("device " + std::to_string(device) +
               " of the pipeline does not run here (internal error)");
    return failure();
  }
  return it->second.update->readArgument(name, diag);
}

void PipelineRunner::stateChanged() {
  for (auto &[device, names] : onDevice_)
    names.clear();
}

void PipelineRunner::runDevice(int64_t d, int64_t r, Shared &shared,
                               const PerDevice &arguments, std::string &error) {
  const PipelinePart &part = *part_;
  const passes::Schedule &schedule = part.schedule;
  // What each of the device's stages holds of each micro-batch: the pipe
  // values it made or received, by name.
  std::map<std::pair<int64_t, int64_t>, NamedTensors> held;
  // Stages and micro-batches whose last phase is done: freed once the
  // messages after it have gone.
  std::vector<std::pair<int64_t, int64_t>> done;
  // The stages' phases that have run in this step: the first run of each
  // assigns its gradient sums on the device, the later ones add to them.
  std::set<std::pair<int64_t, Phase>> summing;
  auto fail = [&](const std::string &why) {
    error = why;
    {
      std::lock_guard<std::mutex> lock(shared.mutex);
      shared.aborted = true;
    }
    abortCommunicators(why);
  };
  // "device 1" of a pipeline alone, "device 1.2" (device 2 of pipeline
  // device 1's stage mesh) on a mesh.
  std::string self = "device " + std::to_string(d) +
                     (part.stageMesh.numDevices() > 1 ? "." + std::to_string(r)
                                                      : std::string());
  auto aborted = [&] {
    std::lock_guard<std::mutex> lock(shared.mutex);
    return shared.aborted;
  };
  int64_t perStage = part.stageMesh.numDevices();
  size_t thread = static_cast<size_t>(d * perStage + r);
  // The device of the whole mesh (pp outermost): pp coordinate d, then r.
  int64_t meshDevice = static_cast<int64_t>(thread);
  backend::Communicator &comm = comms_->endpoint(meshDevice);
  auto microsSince = [&](Clock::time_point t) {
    return std::chrono::duration<double, std::micro>(t - traceOrigin_).count();
  };
  std::vector<StageOutput> &outputs = shared.outputs[thread];

  for (const PipeOp &op : part.programs[d]) {
    if (aborted())
      return;
    if (op.kind == PipeOp::Kind::Collective) {
      fail(self + ": the pipeline's programs hold " + op.what +
           ", which the CPU pipeline does not run");
      return;
    }
    if (op.kind == PipeOp::Kind::Compute) {
      int64_t stage = schedule.virtualStage(d, op.slot.chunk);
      int64_t micro = op.slot.micro;
      size_t k = part.splitOf[micro][r];
      const PipelineSplit &split = part.splits[k];
      NamedTensors &mine = held[{stage, micro}];
      std::vector<Phase> phases = phasesOf(op.slot.work, split.splitBackward);
      for (Phase phase : phases) {
        backend::DeviceExecutor &exe =
            *executors_.at({r, k})[stage][static_cast<size_t>(phase)];
        std::string where =
            shared.context + self + ", micro-batch " + std::to_string(micro) +
            ", stage " + std::to_string(stage) + " (" +
            passes::phaseName(phase, split.splitBackward) + "): ";
        TensorRefs refs;
        for (const auto &arg : exe.executable().module->graph().arguments()) {
          const std::string &name = arg->name();
          if (llvm::StringRef(name).startswith(passes::kPipeValuePrefix)) {
            auto it = mine.find(name);
            if (it == mine.end()) {
              fail(where + "'" + name + "' was never received (internal " +
                   "error)");
              return;
            }
            refs[name] = &it->second;
            continue;
          }
          auto it = arguments[micro][thread].find(name);
          if (it != arguments[micro][thread].end())
            refs[name] = it->second;
        }
        std::string first;
        auto started = Clock::now();
        backend::RunControl control =
            controlOf(meshDevice,
                      summing.insert({stage, phase}).second
                          ? backend::RunControl::HeldOutputs::Assign
                          : backend::RunControl::HeldOutputs::Add,
                      &returnedSums_);
        FailureOr<backend::RunResult> ran =
            runProgram(exe, refs, first, control);
        shared.busySeconds[thread] += secondsSince(started);
        shared.transfers[thread] += exe.lastTransfers();
        if (trace_)
          shared.events[thread].push_back(
              {meshDevice, backend::TraceEvent::Queue::Compute,
               std::string(passes::phaseName(phase, split.splitBackward)) +
                   std::to_string(micro),
               "micro-batch " + std::to_string(micro) + ", stage " +
                   std::to_string(stage),
               microsSince(started), microsSince(Clock::now())});
        if (ran.failed()) {
          fail(where + first);
          return;
        }
        afterRun(meshDevice, exe, keep_ ? sumsInto(meshDevice) : nullptr,
                 returnedSums_);
        for (auto &[name, tensor] : ran->outputs) {
          if (llvm::StringRef(name).startswith(passes::kPipeValuePrefix))
            mine.insert_or_assign(name, std::move(tensor));
          else
            outputs.push_back(
                {micro, r, stage, phase, name, std::move(tensor)});
        }
      }
      Phase last = split.splitBackward ? Phase::Weight : Phase::Backward;
      if (!phases.empty() && phases.back() == last)
        done.push_back({stage, micro});
      continue;
    }
    // A group of messages, each value on its own, posted together: the
    // sends and receives between two computations complete as one.
    std::vector<backend::Communicator::PointToPoint> sends, recvs;
    // Where each received value goes: (stage, micro-batch), name, tensor.
    struct Arrival {
      std::pair<int64_t, int64_t> at;
      std::string name;
      runtime::Tensor tensor;
    };
    std::vector<Arrival> arrivals;
    std::string what;
    for (const passes::PipePart &p : op.parts) {
      const PipeMessage &m = p.message;
      const PipelineSplit &split = part.splits[part.splitOf[m.micro][r]];
      what += (what.empty() ? "" : ", ") +
              std::string(p.send ? "sending " : "receiving ") + messageText(m);
      int64_t peer = p.peer * perStage + r;
      for (size_t i : carried(split, m)) {
        const std::string &name = split.values[i].name;
        if (!p.send) {
          arrivals.push_back({{m.toStage, m.micro},
                              name,
                              runtime::Tensor(split.values[i].type)});
          continue;
        }
        NamedTensors &from = held[{m.fromStage, m.micro}];
        auto it = from.find(name);
        if (it == from.end()) {
          fail(shared.context + self + " sends " + messageText(m) +
               " without its '" + name + "' (internal error)");
          return;
        }
        runtime::Tensor &t = it->second;
        sends.push_back({peer, t.data(), t.numel(), t.dtype()});
        shared.bytesSent[thread] += t.nbytes();
      }
      if (!p.send)
        for (size_t a = arrivals.size() - carried(split, m).size();
             a < arrivals.size(); ++a)
          recvs.push_back({peer, arrivals[a].tensor.data(),
                           arrivals[a].tensor.numel(),
                           arrivals[a].tensor.dtype()});
    }
    auto started = Clock::now();
    std::string why;
    if (failed(comm.sendRecv(sends, recvs, why))) {
      if (!aborted())
        fail(shared.context + self + " " + what + ": " + why);
      return;
    }
    if (!recvs.empty()) {
      shared.waitSeconds[thread] += secondsSince(started);
      if (trace_)
        shared.events[thread].push_back(
            {meshDevice, backend::TraceEvent::Queue::Communication, "recv",
             what, microsSince(started), microsSince(Clock::now())});
    }
    for (Arrival &a : arrivals)
      held[a.at].insert_or_assign(a.name, std::move(a.tensor));
    for (const auto &key : done)
      held.erase(key);
    done.clear();
  }
  if (!acrossProcesses_)
    return;
  // Each device adds up its micro-batches' outputs, its parts in stage
  // order; an output several pipeline devices give (the tied embedding's
  // gradient) is then summed over the pipeline (zeros where a device has
  // none), in coordinate order, so that each of them has the whole sum.
  // The others stay on the device that gives them (the runtime exchanges
  // the scalars every rank reports).
  std::stable_sort(outputs.begin(), outputs.end(),
                   [](const StageOutput &a, const StageOutput &b) {
                     return std::tie(a.micro, a.stage, a.phase) <
                            std::tie(b.micro, b.stage, b.phase);
                   });
  std::vector<NamedTensors> &sums = shared.reduced[thread];
  sums.assign(schedule.micro, {});
  for (int64_t i = 0; i < schedule.micro; ++i)
    for (const auto &[name, given] : outputTypes_[part.splitOf[i][r]]) {
      const ir::TensorType &type = given.type;
      bool several = given.devices.size() > 1;
      if (!several && given.devices.front() != d)
        continue;
      runtime::Tensor sum(type);
      for (const StageOutput &o : outputs)
        if (o.micro == i && o.name == name)
          sum = runtime::sumTensors({sum, o.tensor});
      if (!several) {
        sums[i].emplace(name, std::move(sum));
        continue;
      }
      std::string why;
      if (!ir::isFloat(type.dtype)) {
        fail(shared.context + self + ": output '" + name + "' (" + type.str() +
             ") cannot be summed over the pipeline's processes");
        return;
      }
      if (failed(comm.allReduce(ir::kPipelineAxis, sum.data(), sum.data(),
                                sum.numel(), sum.dtype(), why))) {
        if (!aborted())
          fail(shared.context + self + " summing output '" + name +
               "' over the pipeline: " + why);
        return;
      }
      sums[i].emplace(name, std::move(sum));
    }
}

void PipelineRunner::abortCommunicators(const std::string &why) {
  comms_->abort(why);
  if (collectives_)
    collectives_->abort(why);
}

void PipelineRunner::resetCommunicators() {
  comms_->reset();
  if (collectives_)
    collectives_->reset();
}

std::string PipelineRunner::onEveryDevice(
    const std::function<void(int64_t, std::string &)> &fn) {
  std::vector<std::string> errors(local_.size());
  threads_->run([&](size_t t) { fn(local_[t], errors[t]); });
  // The first failure, not the waits it caused elsewhere.
  for (const std::string &e : errors)
    if (!e.empty() && e.find("aborted") == std::string::npos)
      return e;
  for (const std::string &e : errors)
    if (!e.empty())
      return e;
  return "";
}

void PipelineRunner::runApplyDevice(int64_t device, const TensorRefs &arguments,
                                    backend::RunResult &result,
                                    std::string &error) {
  const PipelinePart &part = *part_;
  int64_t perStage = part.stageMesh.numDevices();
  int64_t owner = device / perStage, r = device % perStage;
  const passes::ApplySplit &cut = part.applySplit;
  ApplyExecutors &exes = applyExecutors_.at(device);
  std::string self = "pipeline device " + std::to_string(owner) +
                     (perStage > 1 ? "." + std::to_string(r) : std::string()) +
                     "'s optimizer step";
  auto fail = [&](const std::string &why) {
    error = why;
    abortCommunicators(why);
  };
  // Runs `exe` on the tensors of `available` that its program takes.
  auto runOne =
      [&](backend::DeviceExecutor &exe, const TensorRefs &available,
          const char *what,
          const backend::RunControl &control) -> FailureOr<backend::RunResult> {
    TensorRefs refs;
    for (const auto &arg : exe.executable().module->graph().arguments()) {
      auto it = available.find(arg->name());
      if (it != available.end())
        refs.insert(*it);
    }
    std::string first;
    auto started = Clock::now();
    FailureOr<backend::RunResult> ran = runProgram(exe, refs, first, control);
    applyTransfers_[device] += exe.lastTransfers();
    if (trace_)
      applyEvents_[device].push_back(
          {device, backend::TraceEvent::Queue::Compute, what, self,
           std::chrono::duration<double, std::micro>(started - traceOrigin_)
               .count(),
           std::chrono::duration<double, std::micro>(Clock::now() -
                                                     traceOrigin_)
               .count()});
    if (ran.failed())
      fail(self + " (" + what + "): " + first);
    return ran;
  };
  backend::Communicator &comm = comms_->endpoint(device);
  uint64_t sentBefore = comm.bytesSent();
  // With keep_, the gather program leaves the values it keeps in the
  // update program's buffers, and only those the devices exchange come
  // back.
  NamedTensors kept;
  if (exes.gather) {
    auto ran =
        runOne(*exes.gather, arguments, "gather",
               controlOf(device, backend::RunControl::HeldOutputs::Assign,
                         &exchanged_));
    if (ran.failed())
      return;
    afterRun(device, *exes.gather, exes.update.get(), exchanged_);
    kept = std::move(ran->outputs);
  }
  // Every pipeline device's shared values reach the devices at the same
  // place of the others' stage meshes, all posted at once.
  std::vector<backend::Communicator::PointToPoint> sends, recvs;
  NamedTensors received;
  for (const passes::ApplyValue &v : cut.values) {
    if (!v.shared)
      continue;
    if (v.owner == owner) {
      auto it = kept.find(v.name);
      if (it == kept.end()) {
        fail(self + ": its gather program made no '" + v.name +
             "' (internal error)");
        return;
      }
      for (int64_t other = 0; other < cut.devices; ++other)
        if (other != owner)
          sends.push_back({other * perStage + r, it->second.data(),
                           it->second.numel(), it->second.dtype()});
      continue;
    }
    runtime::Tensor &t =
        received.emplace(v.name, runtime::Tensor(v.type)).first->second;
    recvs.push_back({v.owner * perStage + r, t.data(), t.numel(), t.dtype()});
  }
  std::string why;
  if (failed(comm.sendRecv(sends, recvs, why))) {
    fail(self + ": exchanging the gradient norm's parts: " + why);
    return;
  }
  TensorRefs refs = arguments;
  for (const NamedTensors *from : {&kept, &received})
    for (const auto &[name, t] : *from)
      refs[name] = &t;
  backend::RunControl control =
      controlOf(device, backend::RunControl::HeldOutputs::Return, nullptr);
  control.updatesStayOnDevice = keep_;
  auto ran = runOne(*exes.update, refs, "update", control);
  if (ran.failed())
    return;
  afterRun(device, *exes.update, nullptr, {});
  result = std::move(*ran);
  applyBytes_[device] += comm.bytesSent() - sentBefore;
}

FailureOr<std::vector<backend::RunResult>>
PipelineRunner::runApply(const std::vector<TensorRefs> &arguments,
                         DiagnosticEngine &diag, llvm::StringRef context) {
  if (arguments.size() != applyBytes_.size()) {
    diag.error(context.str() + "the optimizer step of the pipeline's " +
               std::to_string(applyBytes_.size()) +
               " devices: given arguments of another shape (internal error)");
    return failure();
  }
  resetCommunicators();
  std::vector<backend::RunResult> results(applyBytes_.size());
  std::string error =
      onEveryDevice([&](int64_t device, std::string &why) {
        runApplyDevice(device, arguments[static_cast<size_t>(device)],
                       results[static_cast<size_t>(device)], why);
      });
  for (std::vector<backend::TraceEvent> &events : applyEvents_) {
    for (backend::TraceEvent &e : events)
      traceEvents_.push_back(std::move(e));
    events.clear();
  }
  if (!error.empty()) {
    diag.error(context.str() + error);
    return failure();
  }
  std::vector<backend::RunResult> out;
  for (int64_t device : local_) {
    out.push_back(std::move(results[static_cast<size_t>(device)]));
    transfers_ += std::exchange(applyTransfers_[device], {});
  }
  return out;
}

FailureOr<std::vector<std::vector<backend::NamedTensors>>>
PipelineRunner::run(const PerDevice &arguments, DiagnosticEngine &diag,
                    llvm::StringRef context) {
  const PipelinePart &part = *part_;
  int64_t devices = part.schedule.stages;
  int64_t perStage = part.stageMesh.numDevices();
  size_t numThreads = static_cast<size_t>(devices * perStage);
  bool fits = static_cast<int64_t>(arguments.size()) == part.schedule.micro;
  for (const auto &each : arguments)
    fits &= each.size() == numThreads;
  if (!fits) {
    diag.error(context + "the pipeline runs " +
               std::to_string(part.schedule.micro) + " micro-batches on " +
               std::to_string(numThreads) +
               " devices: given arguments of another shape (internal error)");
    return failure();
  }
  resetCommunicators();
  transfers_ = {};
  auto started = Clock::now();
  Shared shared;
  shared.context = context.str();
  shared.outputs.resize(numThreads);
  shared.bytesSent.assign(numThreads, 0);
  shared.busySeconds.assign(numThreads, 0);
  shared.waitSeconds.assign(numThreads, 0);
  shared.transfers.assign(numThreads, {});
  shared.events.resize(numThreads);
  shared.reduced.resize(numThreads);
  std::string error = onEveryDevice([&](int64_t device, std::string &why) {
    runDevice(device / perStage, device % perStage, shared, arguments, why);
  });
  if (!error.empty()) {
    diag.error(error);
    return failure();
  }
  times_.seconds += secondsSince(started);
  ++times_.steps;
  for (auto &events : shared.events)
    for (backend::TraceEvent &e : events)
      traceEvents_.push_back(std::move(e));
  for (size_t t = 0; t < numThreads; ++t) {
    size_t d = t / static_cast<size_t>(perStage);
    times_.bytesSent[d] += shared.bytesSent[t];
    times_.busySeconds[d] += shared.busySeconds[t];
    times_.waitSeconds[d] += shared.waitSeconds[t];
    transfers_ += shared.transfers[t];
  }

  std::vector<std::vector<NamedTensors>> out(
      part.schedule.micro, std::vector<NamedTensors>(perStage));
  if (acrossProcesses_) {
    // Each device of the stage mesh takes the sums of its local copies (a
    // sum several give is the same on each).
    for (int64_t device : local_)
      for (int64_t i = 0; i < part.schedule.micro; ++i)
        for (auto &[name, t] : shared.reduced[device][i])
          out[i][device % perStage].emplace(name, std::move(t));
    return out;
  }
  // Every output in a fixed order (micro-batch, device, stage, phase), so
  // that the parts of a sum add up the same way every step.
  std::vector<StageOutput> all;
  for (auto &each : shared.outputs)
    for (StageOutput &o : each)
      all.push_back(std::move(o));
  std::stable_sort(all.begin(), all.end(),
                   [](const StageOutput &a, const StageOutput &b) {
                     return std::tie(a.micro, a.device, a.stage, a.phase) <
                            std::tie(b.micro, b.device, b.stage, b.phase);
                   });
  for (StageOutput &o : all) {
    NamedTensors &into = out[o.micro][o.device];
    auto it = into.find(o.name);
    if (it == into.end())
      into.emplace(o.name, std::move(o.tensor));
    else
      it->second = runtime::sumTensors({it->second, o.tensor});
  }
  return out;
}

} // namespace mgc::session
