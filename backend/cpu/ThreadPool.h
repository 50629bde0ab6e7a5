// A small fixed pool of worker threads for data-parallel loops. Work is cut
// into chunks that depend only on the loop length and the grain, never on
// the number of threads, so a kernel that computes each output element
// within one chunk gives bit-identical results with 1 or N threads.
#pragma once

#include "llvm/ADT/STLFunctionalExtras.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace mgc::backend::cpu {

class ThreadPool {
public:
  // `threads` counts the calling thread: 1 runs everything inline.
  explicit ThreadPool(unsigned threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  unsigned size() const { return static_cast<unsigned>(workers_.size()) + 1; }

  // Calls body(begin, end) once for every chunk [k * grain,
  // min(n, (k + 1) * grain)) of [0, n), on any thread, and returns when all
  // are done. Not reentrant: a body must not call parallelFor.
  void parallelFor(int64_t n, int64_t grain,
                   llvm::function_ref<void(int64_t, int64_t)> body);

private:
  void workerLoop();
  void runChunks();
  void stopWorkers(); // wakes, stops and joins every worker

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, finished_;
  uint64_t generation_ = 0;
  bool stop_ = false;
  unsigned busy_ = 0; // workers still inside the current job
  // The current job.
  llvm::function_ref<void(int64_t, int64_t)> body_;
  int64_t n_ = 0, grain_ = 1, chunks_ = 0;
  std::atomic<int64_t> next_{0};
};

// The number of hardware threads (at least 1).
unsigned hardwareThreads();

} // namespace mgc::backend::cpu
