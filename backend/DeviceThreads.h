// One persistent host thread per device of a mesh, for a runtime whose
// devices each block in their collectives until every peer has called (so
// each needs a thread of its own at the same time): run(body) calls body(k)
// on thread k for every device k and returns when all have returned. The
// threads start once, with the object, not for every step.
#pragma once

#include "llvm/ADT/STLFunctionalExtras.h"

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace mgc::backend {

class DeviceThreads {
public:
  // Starts `devices` threads. When the system refuses one, the ones started
  // are stopped, and ok() is false with error() saying why.
  explicit DeviceThreads(size_t devices);
  ~DeviceThreads();
  DeviceThreads(const DeviceThreads &) = delete;
  DeviceThreads &operator=(const DeviceThreads &) = delete;

  bool ok() const { return error_.empty(); }
  const std::string &error() const { return error_; }
  size_t size() const { return threads_.size(); }

  // Calls body(k) on thread k for every k, at once, and waits for all.
  // Not reentrant.
  void run(llvm::function_ref<void(size_t)> body);

private:
  void loop(size_t k);
  void stop();

  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable start_, done_;
  uint64_t generation_ = 0;
  size_t running_ = 0;
  bool stopping_ = false;
  llvm::function_ref<void(size_t)> body_;
  std::string error_;
};

} // namespace mgc::backend
