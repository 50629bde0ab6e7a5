// One simulated device of the mesh executor: its CPU executor (own arena)
// and its two queues. The compute queue walks the program order on its own
// thread, hands each communication op to the communication queue (a FIFO
// served by a second thread) and waits for one only before the first op
// that uses its result (MemoryPlan.h: waitSteps, which also keeps the
// buffers of a pending communication op out of the compute ops' way).
// Internal to MeshExecutor.
#pragma once

#include "backend/cpu/CpuExecutor.h"
#include "backend/cpu/MeshExecutor.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace mgc::backend::cpu {

using MeshClock = std::chrono::steady_clock;

// What every device of one run shares: the first error, the abort flag and
// the clock of the trace.
class MeshRunState {
public:
  // `abortPeers` makes the peers' pending and later collectives fail.
  explicit MeshRunState(std::function<void(const std::string &)> abortPeers)
      : abortPeers_(std::move(abortPeers)) {}

  // Clears the error for a new run.
  void begin();
  // Records an error of `device` (kept only if it is the first one of the
  // run) and stops every device.
  void fail(int64_t device, Loc loc, const std::string &message);
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }

  struct Error {
    int64_t device = -1;
    Loc loc;
    std::string message;
  };
  // The first error of the run (device -1: none). Read when every device
  // has finished.
  const Error &firstError() const { return first_; }

  // Microseconds from the trace's origin.
  double nowUs() const {
    return std::chrono::duration<double, std::micro>(MeshClock::now() - origin_)
        .count();
  }
  void setOrigin(MeshClock::time_point origin) { origin_ = origin; }

private:
  std::function<void(const std::string &)> abortPeers_;
  std::mutex mutex_;
  Error first_;
  std::atomic<bool> aborted_{false};
  MeshClock::time_point origin_ = MeshClock::now();
};

class MeshDevice {
public:
  // Starts the device's two threads; they idle until start().
  MeshDevice(int64_t index, std::unique_ptr<CpuExecutor> executor,
             const ir::Mesh &mesh, MeshRunState &state, bool trace);
  // Stops and joins the threads (no run may be in flight).
  ~MeshDevice();
  MeshDevice(const MeshDevice &) = delete;
  MeshDevice &operator=(const MeshDevice &) = delete;

  int64_t index() const { return index_; }
  CpuExecutor &executor() { return *executor_; }
  const CpuExecutor &executor() const { return *executor_; }
  CpuExecutor::Bound &bound() { return bound_; }

  // Runs the step on the device's threads with the arguments bound in
  // bound(); `done` is called (on the compute thread) once both queues are
  // idle again.
  void start(std::function<void()> done);

  // The events of the last run (compute queue, then communication queue).
  std::vector<TraceEvent> takeTrace();
  // The last run's times (read when it is done).
  QueueTimes times() const { return times_; }

private:
  void computeLoop();
  void stopQueues(); // wakes, stops and joins both queues
  void commLoop();
  void runProgram();
  void traceOp(size_t step, TraceEvent::Queue queue, double start, double end,
               std::vector<TraceEvent> &into);

  int64_t index_;
  std::unique_ptr<CpuExecutor> executor_;
  MeshRunState &state_;
  bool trace_;
  CpuExecutor::Bound bound_;
  // Kernels of the communication queue run here (the executor's pool
  // belongs to the compute queue).
  ThreadPool commPool_{1};

  // Per step: whether it is a communication op, and how many communication
  // ops (in FIFO order) must be complete before it runs.
  std::vector<bool> isComm_;
  std::vector<size_t> needDone_;
  std::vector<std::string> details_;

  std::mutex mutex_;
  std::condition_variable cv_;
  // Compute thread: a new run to do, or stop.
  bool startRequested_ = false;
  std::function<void()> done_;
  // Communication queue: steps to run; completed (or skipped) count.
  std::deque<size_t> queue_;
  size_t completed_ = 0;
  bool commFailed_ = false;
  bool stop_ = false;

  std::vector<TraceEvent> computeEvents_, commEvents_;
  QueueTimes times_;
  std::thread compute_, comm_;
};

} // namespace mgc::backend::cpu
