#include "runtime/session/PipelineRunner.h"

#include "backend/cpu/InProcessCommunicator.h"
#include "runtime/ShardTensor.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>
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

// A message in flight: (gradient, from, to, micro-batch, device of the
// stage mesh).
using MessageKey = std::tuple<bool, int64_t, int64_t, int64_t, int64_t>;

MessageKey keyOf(const PipeMessage &m, int64_t r) {
  return {m.gradient, m.fromStage, m.toStage, m.micro, r};
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

// One output of a stage's program on a micro-batch.
struct StageOutput {
  int64_t micro = 0, device = 0, stage = 0;
  Phase phase = Phase::Forward;
  std::string name;
  runtime::Tensor tensor;
};

} // namespace

struct PipelineRunner::Shared {
  std::mutex mutex;
  std::condition_variable changed;
  std::map<MessageKey, NamedTensors> mailbox;
  bool aborted = false;
  std::string context;
  // Per thread (device r of pipeline device d is thread d * devices per
  // stage + r): what its programs gave that is not a pipe value, its bytes
  // sent and its seconds computing and waiting.
  std::vector<std::vector<StageOutput>> outputs;
  std::vector<uint64_t> bytesSent;
  std::vector<double> busySeconds, waitSeconds;
  // Per thread, its timeline (when tracing).
  std::vector<std::vector<backend::TraceEvent>> events;
};

double PipelineRunner::Times::bubble() const {
  double busy = 0;
  for (double b : busySeconds)
    busy += b;
  double total = seconds * static_cast<double>(busySeconds.size()) *
                 static_cast<double>(devicesPerStage);
  return total > 0 ? 1 - busy / total : 0;
}

std::unique_ptr<PipelineRunner>
PipelineRunner::create(std::shared_ptr<const PipelinePart> part,
                       unsigned threads, double timeoutSeconds, bool trace,
                       DiagnosticEngine &diag) {
  std::unique_ptr<PipelineRunner> r(new PipelineRunner());
  r->trace_ = trace;
  r->traceOrigin_ = Clock::now();
  r->part_ = std::move(part);
  r->timeoutSeconds_ = timeoutSeconds;
  const PipelinePart &p = *r->part_;
  int64_t devices = p.schedule.stages;
  int64_t perStage = p.stageMesh.numDevices();
  if (perStage > 1)
    for (int64_t d = 0; d < devices; ++d)
      r->collectives_.push_back(
          std::make_unique<backend::cpu::InProcessMesh>(p.stageMesh));
  for (int64_t d = 0; d < perStage; ++d)
    for (const std::vector<size_t> &ofDevice : p.splitOf) {
      size_t k = ofDevice[d];
      auto [it, inserted] = r->executors_.try_emplace({d, k});
      if (!inserted)
        continue;
      for (size_t v = 0; v < p.executables[k].size(); ++v) {
        backend::cpu::CpuOptions options;
        options.threads = std::max(1u, threads);
        if (perStage > 1)
          options.comm =
              &r->collectives_[p.schedule.deviceOf(static_cast<int64_t>(v))]
                   ->endpoint(d);
        auto &phases = it->second.emplace_back();
        for (const auto &exe : p.executables[k][v]) {
          auto e = backend::cpu::CpuExecutor::create(*exe, options, diag);
          if (!e)
            return nullptr;
          phases.push_back(std::move(e));
        }
      }
    }
  r->times_.bytesSent.assign(devices, 0);
  r->times_.busySeconds.assign(devices, 0);
  r->times_.waitSeconds.assign(devices, 0);
  r->times_.devicesPerStage = perStage;
  return r;
}

void PipelineRunner::abortCollectives(const std::string &why) {
  for (auto &c : collectives_)
    c->abort(why);
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
  auto fail = [&](const std::string &why) {
    error = why;
    {
      std::lock_guard<std::mutex> lock(shared.mutex);
      shared.aborted = true;
      shared.changed.notify_all();
    }
    abortCollectives(why);
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
  size_t thread = static_cast<size_t>(d * part.stageMesh.numDevices() + r);
  // The device of the whole mesh (pp outermost): pp coordinate d, then r.
  int64_t meshDevice = static_cast<int64_t>(thread);
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
        backend::cpu::CpuExecutor &exe =
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
          auto it = arguments[micro][r].find(name);
          if (it != arguments[micro][r].end())
            refs[name] = it->second;
        }
        std::string first;
        DiagnosticEngine local;
        local.setHandler([&](Severity severity, Loc, const std::string &m) {
          if (severity == Severity::Error && first.empty())
            first = m;
        });
        auto started = Clock::now();
        FailureOr<backend::RunResult> ran = exe.run(refs, local);
        shared.busySeconds[thread] += secondsSince(started);
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
    // A group of messages: the sends go first (they never wait here), then
    // the receives.
    for (const passes::PipePart &p : op.parts) {
      if (!p.send)
        continue;
      const PipeMessage &m = p.message;
      const PipelineSplit &split = part.splits[part.splitOf[m.micro][r]];
      NamedTensors &from = held[{m.fromStage, m.micro}];
      NamedTensors message;
      for (size_t i : carried(split, m)) {
        const std::string &name = split.values[i].name;
        auto it = from.find(name);
        if (it == from.end()) {
          fail(shared.context + self + " sends " + messageText(m) +
               " without its '" + name + "' (internal error)");
          return;
        }
        shared.bytesSent[thread] += it->second.nbytes();
        message.emplace(name, it->second);
      }
      std::lock_guard<std::mutex> lock(shared.mutex);
      shared.mailbox[keyOf(m, r)] = std::move(message);
      shared.changed.notify_all();
    }
    for (const passes::PipePart &p : op.parts) {
      if (p.send)
        continue;
      const PipeMessage &m = p.message;
      NamedTensors message;
      {
        auto started = Clock::now();
        std::unique_lock<std::mutex> lock(shared.mutex);
        auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration<double>(timeoutSeconds_);
        bool arrived = shared.changed.wait_until(lock, deadline, [&] {
          return shared.aborted || shared.mailbox.count(keyOf(m, r));
        });
        if (shared.aborted)
          return;
        if (!arrived) {
          lock.unlock();
          fail(shared.context + self + " waited more than " +
               std::to_string(int(timeoutSeconds_)) + " s for " +
               messageText(m) + " from device " + std::to_string(p.peer));
          return;
        }
        auto it = shared.mailbox.find(keyOf(m, r));
        message = std::move(it->second);
        shared.mailbox.erase(it);
        shared.waitSeconds[thread] += secondsSince(started);
        if (trace_)
          shared.events[thread].push_back(
              {meshDevice, backend::TraceEvent::Queue::Communication, "recv",
               messageText(m), microsSince(started),
               microsSince(Clock::now())});
      }
      NamedTensors &into = held[{m.toStage, m.micro}];
      for (auto &[name, tensor] : message)
        into.insert_or_assign(name, std::move(tensor));
    }
    for (const auto &key : done)
      held.erase(key);
    done.clear();
  }
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
    fits &= static_cast<int64_t>(each.size()) == perStage;
  if (!fits) {
    diag.error(context + "the pipeline runs " +
               std::to_string(part.schedule.micro) +
               " micro-batches on stages of " + std::to_string(perStage) +
               " devices: given arguments of another shape (internal error)");
    return failure();
  }
  for (auto &c : collectives_)
    c->reset();
  auto started = Clock::now();
  Shared shared;
  shared.context = context.str();
  shared.outputs.resize(numThreads);
  shared.bytesSent.assign(numThreads, 0);
  shared.busySeconds.assign(numThreads, 0);
  shared.waitSeconds.assign(numThreads, 0);
  shared.events.resize(numThreads);
  std::vector<std::string> errors(numThreads);
  std::vector<std::thread> threads;
  try {
    for (size_t t = 1; t < numThreads; ++t)
      threads.emplace_back([&, t] {
        runDevice(static_cast<int64_t>(t) / perStage,
                  static_cast<int64_t>(t) % perStage, shared, arguments,
                  errors[t]);
      });
  } catch (const std::system_error &e) {
    {
      std::lock_guard<std::mutex> lock(shared.mutex);
      shared.aborted = true;
      shared.changed.notify_all();
    }
    abortCollectives("the pipeline's threads did not start");
    for (std::thread &t : threads)
      t.join();
    diag.error(context +
               "cannot start the pipeline's device threads: " + e.what());
    return failure();
  }
  runDevice(0, 0, shared, arguments, errors[0]);
  for (std::thread &t : threads)
    t.join();
  // The first failure, not the waits it caused elsewhere.
  for (const std::string &e : errors)
    if (!e.empty() && e.find("aborted") == std::string::npos) {
      diag.error(e);
      return failure();
    }
  for (const std::string &e : errors)
    if (!e.empty()) {
      diag.error(e);
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
  std::vector<std::vector<NamedTensors>> out(
      part.schedule.micro, std::vector<NamedTensors>(perStage));
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
