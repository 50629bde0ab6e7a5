#include "runtime/session/PipelineRunner.h"

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

// A message in flight: (gradient, from, to, micro-batch).
using MessageKey = std::tuple<bool, int64_t, int64_t, int64_t>;

MessageKey keyOf(const PipeMessage &m) {
  return {m.gradient, m.fromStage, m.toStage, m.micro};
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
  int64_t micro = 0, stage = 0;
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
  // Per device, what its programs gave that is not a pipe value.
  std::vector<std::vector<StageOutput>> outputs;
};

double PipelineRunner::Times::bubble() const {
  double busy = 0;
  for (double b : busySeconds)
    busy += b;
  double total = seconds * static_cast<double>(busySeconds.size());
  return total > 0 ? 1 - busy / total : 0;
}

std::unique_ptr<PipelineRunner>
PipelineRunner::create(std::shared_ptr<const PipelinePart> part,
                       unsigned threads, double timeoutSeconds,
                       DiagnosticEngine &diag) {
  std::unique_ptr<PipelineRunner> r(new PipelineRunner());
  r->part_ = std::move(part);
  r->timeoutSeconds_ = timeoutSeconds;
  backend::cpu::CpuOptions options;
  options.threads = std::max(1u, threads);
  for (const auto &split : r->part_->executables) {
    auto &stages = r->executors_.emplace_back();
    for (const auto &phases : split) {
      auto &out = stages.emplace_back();
      for (const auto &exe : phases) {
        auto e = backend::cpu::CpuExecutor::create(*exe, options, diag);
        if (!e)
          return nullptr;
        out.push_back(std::move(e));
      }
    }
  }
  size_t devices = static_cast<size_t>(r->part_->schedule.stages);
  r->times_.bytesSent.assign(devices, 0);
  r->times_.busySeconds.assign(devices, 0);
  r->times_.waitSeconds.assign(devices, 0);
  return r;
}

void PipelineRunner::runDevice(int64_t d, Shared &shared,
                               const std::vector<TensorRefs> &arguments,
                               std::string &error) {
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
    std::lock_guard<std::mutex> lock(shared.mutex);
    shared.aborted = true;
    shared.changed.notify_all();
  };
  auto aborted = [&] {
    std::lock_guard<std::mutex> lock(shared.mutex);
    return shared.aborted;
  };
  std::vector<StageOutput> &outputs = shared.outputs[d];

  for (const PipeOp &op : part.programs[d]) {
    if (aborted())
      return;
    if (op.kind == PipeOp::Kind::Collective) {
      fail("device " + std::to_string(d) + ": the pipeline's programs hold " +
           op.what + ", which the CPU pipeline does not run");
      return;
    }
    if (op.kind == PipeOp::Kind::Compute) {
      int64_t stage = schedule.virtualStage(d, op.slot.chunk);
      int64_t micro = op.slot.micro;
      size_t k = part.splitOf[micro];
      const PipelineSplit &split = part.splits[k];
      NamedTensors &mine = held[{stage, micro}];
      std::vector<Phase> phases = phasesOf(op.slot.work, split.splitBackward);
      for (Phase phase : phases) {
        backend::cpu::CpuExecutor &exe =
            *executors_[k][stage][static_cast<size_t>(phase)];
        std::string where =
            shared.context + "micro-batch " + std::to_string(micro) +
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
          auto it = arguments[micro].find(name);
          if (it != arguments[micro].end())
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
        times_.busySeconds[d] += secondsSince(started);
        if (ran.failed()) {
          fail(where + first);
          return;
        }
        for (auto &[name, tensor] : ran->outputs) {
          if (llvm::StringRef(name).startswith(passes::kPipeValuePrefix))
            mine.insert_or_assign(name, std::move(tensor));
          else
            outputs.push_back({micro, stage, phase, name, std::move(tensor)});
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
      const PipelineSplit &split = part.splits[part.splitOf[m.micro]];
      NamedTensors &from = held[{m.fromStage, m.micro}];
      NamedTensors message;
      for (size_t i : carried(split, m)) {
        const std::string &name = split.values[i].name;
        auto it = from.find(name);
        if (it == from.end()) {
          fail(shared.context + "device " + std::to_string(d) + " sends " +
               messageText(m) + " without its '" + name + "' (internal error)");
          return;
        }
        times_.bytesSent[d] += it->second.nbytes();
        message.emplace(name, it->second);
      }
      std::lock_guard<std::mutex> lock(shared.mutex);
      shared.mailbox[keyOf(m)] = std::move(message);
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
          return shared.aborted || shared.mailbox.count(keyOf(m));
        });
        if (shared.aborted)
          return;
        if (!arrived) {
          lock.unlock();
          fail(shared.context + "device " + std::to_string(d) +
               " waited more than " + std::to_string(int(timeoutSeconds_)) +
               " s for " + messageText(m) + " from device " +
               std::to_string(p.peer));
          return;
        }
        auto it = shared.mailbox.find(keyOf(m));
        message = std::move(it->second);
        shared.mailbox.erase(it);
        times_.waitSeconds[d] += secondsSince(started);
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

FailureOr<std::vector<backend::NamedTensors>>
PipelineRunner::run(const std::vector<TensorRefs> &arguments,
                    DiagnosticEngine &diag, llvm::StringRef context) {
  const PipelinePart &part = *part_;
  int64_t devices = part.schedule.stages;
  if (static_cast<int64_t>(arguments.size()) != part.schedule.micro) {
    diag.error(context + "the pipeline runs " +
               std::to_string(part.schedule.micro) + " micro-batches, given " +
               std::to_string(arguments.size()));
    return failure();
  }
  auto started = Clock::now();
  Shared shared;
  shared.context = context.str();
  shared.outputs.resize(devices);
  std::vector<std::string> errors(devices);
  std::vector<std::thread> threads;
  try {
    for (int64_t d = 1; d < devices; ++d)
      threads.emplace_back(
          [&, d] { runDevice(d, shared, arguments, errors[d]); });
  } catch (const std::system_error &e) {
    {
      std::lock_guard<std::mutex> lock(shared.mutex);
      shared.aborted = true;
      shared.changed.notify_all();
    }
    for (std::thread &t : threads)
      t.join();
    diag.error(context +
               "cannot start the pipeline's device threads: " + e.what());
    return failure();
  }
  runDevice(0, shared, arguments, errors[0]);
  for (std::thread &t : threads)
    t.join();
  for (const std::string &e : errors)
    if (!e.empty()) {
      diag.error(e);
      return failure();
    }
  times_.seconds += secondsSince(started);
  ++times_.steps;

  // Every output in a fixed order (micro-batch, stage, phase), so that the
  // parts of a sum add up the same way every step.
  std::vector<StageOutput> all;
  for (auto &each : shared.outputs)
    for (StageOutput &o : each)
      all.push_back(std::move(o));
  std::stable_sort(all.begin(), all.end(),
                   [](const StageOutput &a, const StageOutput &b) {
                     return std::tie(a.micro, a.stage, a.phase) <
                            std::tie(b.micro, b.stage, b.phase);
                   });
  std::vector<NamedTensors> out(part.schedule.micro);
  for (StageOutput &o : all) {
    NamedTensors &into = out[o.micro];
    auto it = into.find(o.name);
    if (it == into.end())
      into.emplace(o.name, std::move(o.tensor));
    else
      it->second = runtime::sumTensors({it->second, o.tensor});
  }
  return out;
}

} // namespace mgc::session
