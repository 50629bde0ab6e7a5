// The DataMover of device memory: sums and maxima by reduction kernels and
// copies by cudaMemcpyAsync, each enqueued on one stream (coordinate-order
// sums, as the CPU's). The communicators of simulated devices on one GPU
// and of NCCL move their local elements with it. It remembers the first
// failure, which the caller reports.
#pragma once

#include "backend/GroupCall.h"
#include "backend/cuda/CudaCheck.h"
#include "backend/cuda/CudaKernels.h"
#include "backend/cuda/Launch.h"

#include <cuda_runtime_api.h>

#include <string>

namespace mgc::backend::cuda {

class StreamMover final : public DataMover {
public:
  explicit StreamMover(cudaStream_t stream) : stream_(stream) {}

  void sum(ir::DType dtype, llvm::ArrayRef<const std::byte *> srcs,
           std::byte *dst, int64_t n) override {
    note("launchSumParts",
         launchSumParts(stream_, toDt(dtype), partsOf(srcs), dst, n));
  }
  void max(ir::DType dtype, llvm::ArrayRef<const std::byte *> srcs,
           std::byte *dst, int64_t n) override {
    note("launchMaxParts",
         launchMaxParts(stream_, toDt(dtype), partsOf(srcs), dst, n));
  }
  void copy(std::byte *dst, const std::byte *src, size_t bytes) override {
    if (dst != src && bytes)
      note("cudaMemcpyAsync",
           cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
  }
  void note(const char *call, cudaError_t status) {
    noteCudaFailure(call, status, error);
  }

  std::string error;

private:
  // The communicators bound their groups to kMaxReduceParts devices.
  static ReduceParts partsOf(llvm::ArrayRef<const std::byte *> srcs) {
    ReduceParts parts;
    for (const std::byte *s : srcs)
      parts.src[parts.count++] = s;
    return parts;
  }
  cudaStream_t stream_;
};

} // namespace mgc::backend::cuda
