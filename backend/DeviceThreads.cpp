#include "backend/DeviceThreads.h"

#include <system_error>

namespace mgc::backend {

DeviceThreads::DeviceThreads(size_t devices) {
  try {
    for (size_t k = 0; k < devices; ++k)
      threads_.emplace_back([this, k] { loop(k); });
  } catch (const std::system_error &e) {
    error_ = std::string("cannot start the devices' threads: ") + e.what();
    stop();
  }
}

DeviceThreads::~DeviceThreads() { stop(); }

void DeviceThreads::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  start_.notify_all();
  for (std::thread &t : threads_)
    t.join();
  threads_.clear();
}

void DeviceThreads::run(llvm::function_ref<void(size_t)> body) {
  std::unique_lock<std::mutex> lock(mutex_);
  body_ = body;
  running_ = threads_.size();
  ++generation_;
  start_.notify_all();
  done_.wait(lock, [&] { return running_ == 0; });
}

void DeviceThreads::loop(size_t k) {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    start_.wait(lock, [&] { return stopping_ || generation_ != seen; });
    if (stopping_)
      return;
    seen = generation_;
    lock.unlock();
    body_(k);
    lock.lock();
    if (--running_ == 0)
      done_.notify_one();
  }
}

} // namespace mgc::backend
