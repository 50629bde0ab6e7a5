// The worker pool: workers sleep on a condition variable until a job's
// generation changes, then take chunks from a shared counter.
#include "backend/cpu/ThreadPool.h"

#include <algorithm>

namespace mgc::backend::cpu {

unsigned hardwareThreads() {
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool::ThreadPool(unsigned threads) {
  // When the system refuses a thread, the ones started are stopped and
  // joined before the std::system_error goes on: a joinable std::thread
  // destroyed by the unwinding would end the process.
  try {
    for (unsigned i = 1; i < std::max(1u, threads); ++i)
      workers_.emplace_back([this] { workerLoop(); });
  } catch (...) {
    stopWorkers();
    throw;
  }
}

ThreadPool::~ThreadPool() { stopWorkers(); }

void ThreadPool::stopWorkers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread &t : workers_)
    t.join();
  workers_.clear();
}

void ThreadPool::runChunks() {
  for (;;) {
    int64_t k = next_.fetch_add(1, std::memory_order_relaxed);
    if (k >= chunks_)
      return;
    int64_t begin = k * grain_;
    body_(begin, std::min(n_, begin + grain_));
  }
}

void ThreadPool::workerLoop() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_)
        return;
      seen = generation_;
    }
    runChunks();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--busy_ == 0)
        finished_.notify_one();
    }
  }
}

void ThreadPool::parallelFor(int64_t n, int64_t grain,
                             llvm::function_ref<void(int64_t, int64_t)> body) {
  if (n <= 0)
    return;
  grain = std::max<int64_t>(1, grain);
  int64_t chunks = (n + grain - 1) / grain;
  if (workers_.empty() || chunks == 1) {
    for (int64_t b = 0; b < n; b += grain)
      body(b, std::min(n, b + grain));
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    body_ = body;
    n_ = n;
    grain_ = grain;
    chunks_ = chunks;
    next_.store(0, std::memory_order_relaxed);
    busy_ = static_cast<unsigned>(workers_.size());
    ++generation_;
  }
  wake_.notify_all();
  runChunks();
  std::unique_lock<std::mutex> lock(mutex_);
  finished_.wait(lock, [&] { return busy_ == 0; });
}

} // namespace mgc::backend::cpu
