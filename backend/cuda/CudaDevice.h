// The CUDA device as the rest of mgc sees it: whether one can be used here
// (and in words why not), its name and memory, and the check that a plan
// fits the device's free memory before anything runs.
#pragma once

#include "support/Diagnostics.h"
#include "support/Result.h"

#include "llvm/ADT/StringRef.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <optional>
#include <string>

namespace mgc::backend::cuda {

// Why no CUDA device can be used in this process (no driver, a driver older
// than the runtime, no device, ...), from cudaGetDeviceCount's error in
// words; nullopt when device 0 is usable. Probed once.
std::optional<std::string> cudaUnavailableReason();
inline bool cudaAvailable() { return !cudaUnavailableReason(); }

struct CudaDeviceInfo {
  int ordinal = 0;
  std::string name;         // "NVIDIA H200"
  int major = 0, minor = 0; // compute capability
  uint64_t totalBytes = 0, freeBytes = 0;
};

// GPU `gpu` (an ordinal) now (free memory changes), made the calling
// thread's current device; reports and returns nullopt on error.
std::optional<CudaDeviceInfo> cudaDeviceInfo(DiagnosticEngine &diag,
                                             int gpu = 0);

// Waits for everything on `stream`. With a timeout (> 0 seconds) it polls
// and gives up when the timeout passes, reporting it as --comm-timeout's
// (the stream may wait for a peer that never calls).
LogicalResult waitForStream(cudaStream_t stream, double timeoutSeconds,
                            DiagnosticEngine &diag);

// "1.50 GiB".
std::string formatGiB(uint64_t bytes);

// Reports "out of memory: model 'NAME': the plan needs X GiB, the device
// (DEVICE) has Y GiB free" when `needed` exceeds `freeBytes`.
LogicalResult checkDeviceMemory(llvm::StringRef model, uint64_t needed,
                                uint64_t freeBytes, llvm::StringRef device,
                                DiagnosticEngine &diag);

} // namespace mgc::backend::cuda
