// Probing the CUDA device and checking memory needs against it.
#include "backend/cuda/CudaDevice.h"

#include "backend/cuda/CudaCheck.h"
#include "support/Deadline.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

namespace mgc::backend::cuda {

namespace {

std::string runtimeVersion() {
  int v = 0;
  if (cudaRuntimeGetVersion(&v) != cudaSuccess)
    return "?";
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

std::optional<std::string> probe() {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  std::string call =
      std::string(" (cudaGetDeviceCount: ") + cudaGetErrorName(e) + ")";
  switch (e) {
  case cudaSuccess:
    if (count == 0)
      return std::string("no CUDA-capable device is present");
    break;
  case cudaErrorInsufficientDriver:
    return "no CUDA driver, or one older than the CUDA " + runtimeVersion() +
           " runtime needs" + call;
  case cudaErrorNoDevice:
    return "no CUDA-capable device is present" + call;
  default:
    return std::string(cudaGetErrorString(e)) + call;
  }
  // A device exists; make sure it can be set up (a busy or prohibited
  // device, a broken driver).
  e = cudaSetDevice(0);
  if (e == cudaSuccess)
    e = cudaFree(nullptr); // creates the context
  if (e != cudaSuccess)
    return "device 0 cannot be used: " + std::string(cudaGetErrorString(e)) +
           " (" + cudaGetErrorName(e) + ")";
  return std::nullopt;
}

} // namespace

std::optional<std::string> cudaUnavailableReason() {
  static const std::optional<std::string> reason = probe();
  return reason;
}

std::optional<CudaDeviceInfo> cudaDeviceInfo(DiagnosticEngine &diag, int gpu) {
  if (auto why = cudaUnavailableReason()) {
    diag.error("no CUDA device: " + *why);
    return std::nullopt;
  }
  int count = 0;
  if (failed(MGC_CUDA_CHECK(cudaGetDeviceCount(&count), diag, nullptr)))
    return std::nullopt;
  if (gpu < 0 || gpu >= count) {
    diag.error("no CUDA device " + std::to_string(gpu) +
               ": this process sees " + std::to_string(count) + " GPUs");
    return std::nullopt;
  }
  CudaDeviceInfo info;
  info.ordinal = gpu;
  cudaDeviceProp prop;
  if (failed(
          MGC_CUDA_CHECK(cudaGetDeviceProperties(&prop, gpu), diag, nullptr)) ||
      failed(MGC_CUDA_CHECK(cudaSetDevice(gpu), diag, nullptr)))
    return std::nullopt;
  info.name = prop.name;
  info.major = prop.major;
  info.minor = prop.minor;
  size_t freeBytes = 0, totalBytes = 0;
  if (failed(MGC_CUDA_CHECK(cudaMemGetInfo(&freeBytes, &totalBytes), diag,
                            nullptr)))
    return std::nullopt;
  info.freeBytes = freeBytes;
  info.totalBytes = totalBytes;
  return info;
}

LogicalResult waitForStream(cudaStream_t stream, double timeoutSeconds,
                            DiagnosticEngine &diag) {
  if (!(timeoutSeconds > 0))
    return MGC_CUDA_CHECK(cudaStreamSynchronize(stream), diag, nullptr);
  using Clock = std::chrono::steady_clock;
  Clock::time_point deadline = deadlineAfter(timeoutSeconds);
  int sleepUs = 0;
  while (true) {
    cudaError_t status = cudaStreamQuery(stream);
    if (status != cudaErrorNotReady)
      return MGC_CUDA_CHECK(status, diag, nullptr);
    if (Clock::now() > deadline) {
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%g", timeoutSeconds);
      diag.error(std::string("the step did not finish within ") + seconds +
                 " s (--comm-timeout): a collective or send/recv is waiting "
                 "for a peer that never called it");
      return failure();
    }
    // Poll often at first, then back off to a millisecond.
    sleepUs = std::min(1000, std::max(10, sleepUs * 2));
    std::this_thread::sleep_for(std::chrono::microseconds(sleepUs));
  }
}

std::string formatGiB(uint64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f GiB",
                static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

LogicalResult checkDeviceMemory(llvm::StringRef model, uint64_t needed,
                                uint64_t freeBytes, llvm::StringRef device,
                                DiagnosticEngine &diag) {
  if (needed <= freeBytes)
    return success();
  diag.error("out of memory: model '" + model.str() + "': the plan needs " +
             formatGiB(needed) + ", the device (" + device.str() + ") has " +
             formatGiB(freeBytes) + " free");
  return failure();
}

} // namespace mgc::backend::cuda
