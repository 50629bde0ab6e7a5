// The two queues of a simulated device. The compute thread issues the
// communication ops in program order, which is the same on every device,
// so the FIFO of each communication queue meets its peers' in the same
// order; completion is a count of the FIFO, so "communication op t is
// done" is "completed > t".
#include "backend/cpu/MeshExecutorQueues.h"

#include "backend/MemoryPlan.h"

namespace mgc::backend::cpu {

void MeshRunState::begin() {
  std::lock_guard<std::mutex> lock(mutex_);
  first_ = Error{};
  aborted_.store(false, std::memory_order_release);
}

void MeshRunState::fail(int64_t device, Loc loc, const std::string &message) {
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (first_.device < 0) {
      first_ = Error{device, loc, message};
      first = true;
    }
    aborted_.store(true, std::memory_order_release);
  }
  // Peers waiting in a collective for this device would wait forever.
  if (first)
    abortPeers_("device " + std::to_string(device) + " failed: " + message);
}

MeshDevice::MeshDevice(int64_t index, std::unique_ptr<CpuExecutor> executor,
                       const ir::Mesh &mesh, MeshRunState &state, bool trace)
    : index_(index), executor_(std::move(executor)), state_(state),
      trace_(trace) {
  const Executable &exe = executor_->executable();
  const ir::Graph &graph = exe.module->graph();
  std::vector<uint32_t> waits = waitSteps(graph, exe.order);
  size_t n = executor_->numSteps();
  isComm_.assign(n, false);
  needDone_.assign(n, 0);
  size_t tickets = 0;
  for (size_t i = 0; i < n; ++i) {
    const ir::Op &op = executor_->stepOp(i);
    details_.push_back(traceDetail(op, mesh));
    if (!op.info().has(ir::kCollective))
      continue;
    isComm_[i] = true;
    size_t ticket = tickets++;
    uint32_t wait = waits[exe.order[i]];
    if (wait < n)
      needDone_[wait] = std::max(needDone_[wait], ticket + 1);
  }
  // A refused thread: the one started is stopped and joined before the
  // std::system_error goes on (a joinable std::thread destroyed by the
  // unwinding would end the process).
  try {
    compute_ = std::thread([this] { computeLoop(); });
    comm_ = std::thread([this] { commLoop(); });
  } catch (...) {
    stopQueues();
    throw;
  }
}

MeshDevice::~MeshDevice() { stopQueues(); }

void MeshDevice::stopQueues() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (compute_.joinable())
    compute_.join();
  if (comm_.joinable())
    comm_.join();
}

void MeshDevice::start(std::function<void()> done) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = std::move(done);
    startRequested_ = true;
  }
  cv_.notify_all();
}

std::vector<TraceEvent> MeshDevice::takeTrace() {
  std::vector<TraceEvent> events = std::move(computeEvents_);
  for (TraceEvent &e : commEvents_)
    events.push_back(std::move(e));
  computeEvents_.clear();
  commEvents_.clear();
  return events;
}

void MeshDevice::traceOp(size_t step, TraceEvent::Queue queue, double start,
                         double end, std::vector<TraceEvent> &into) {
  TraceEvent e;
  e.device = index_;
  e.queue = queue;
  e.name = executor_->stepOp(step).name().str();
  e.detail = details_[step];
  e.startUs = start;
  e.endUs = end;
  into.push_back(std::move(e));
}

void MeshDevice::computeLoop() {
  for (;;) {
    std::function<void()> done;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return startRequested_ || stop_; });
      if (stop_)
        return;
      startRequested_ = false;
      done = std::move(done_);
    }
    runProgram();
    done();
  }
}

void MeshDevice::runProgram() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    completed_ = 0;
  }
  MeshClock::time_point begin = MeshClock::now();
  times_ = QueueTimes{index_, 0, 0, 0};
  // Waits of the compute queue for communication, timed (and traced as
  // "wait" spans) only when it had to wait.
  auto waitFor = [&](size_t count, size_t before) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (completed_ >= count)
      return;
    double start = trace_ ? state_.nowUs() : 0;
    MeshClock::time_point t0 = MeshClock::now();
    cv_.wait(lock, [&] { return completed_ >= count; });
    times_.waitSeconds +=
        std::chrono::duration<double>(MeshClock::now() - t0).count();
    if (trace_) {
      TraceEvent e;
      e.device = index_;
      e.name = "wait";
      e.detail = before < isComm_.size()
                     ? "for communication, before op %" + std::to_string(before)
                     : "for communication, at the end of the step";
      e.startUs = start;
      e.endUs = state_.nowUs();
      computeEvents_.push_back(std::move(e));
    }
  };
  size_t issued = 0;
  std::string error;
  for (size_t i = 0; i < isComm_.size(); ++i) {
    if (state_.aborted())
      break;
    if (needDone_[i]) {
      // The first use of a communication op's result: its event.
      waitFor(needDone_[i], i);
      if (state_.aborted())
        break;
    }
    if (isComm_[i]) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        queue_.push_back(i);
      }
      cv_.notify_all();
      ++issued;
      continue;
    }
    double start = trace_ ? state_.nowUs() : 0;
    if (failed(executor_->runStep(i, bound_, executor_->pool(), error))) {
      state_.fail(index_, executor_->stepOp(i).loc(), error);
      break;
    }
    if (trace_)
      traceOp(i, TraceEvent::Queue::Compute, start, state_.nowUs(),
              computeEvents_);
  }
  // The end of the step waits for every communication op issued (outputs
  // and updates may be their results; the arena is reused next step).
  waitFor(issued, isComm_.size());
  times_.stepSeconds =
      std::chrono::duration<double>(MeshClock::now() - begin).count();
}

void MeshDevice::commLoop() {
  std::string error;
  for (;;) {
    size_t step;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return !queue_.empty() || stop_; });
      if (queue_.empty())
        return;
      step = queue_.front();
      queue_.pop_front();
    }
    // After a failure anywhere the rest of the queue is skipped: the step
    // is abandoned, and its completion only releases the compute queue.
    if (!state_.aborted()) {
      double start = trace_ ? state_.nowUs() : 0;
      if (failed(executor_->runStep(step, bound_, commPool_, error)))
        state_.fail(index_, executor_->stepOp(step).loc(), error);
      else if (trace_)
        traceOp(step, TraceEvent::Queue::Communication, start, state_.nowUs(),
                commEvents_);
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++completed_;
    }
    cv_.notify_all();
  }
}

} // namespace mgc::backend::cpu
