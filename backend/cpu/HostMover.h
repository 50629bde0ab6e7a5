// The DataMover of host memory: the calling thread sums, takes maxima and
// copies (backend/cpu/Reductions.h). The in-process and MPI communicators
// move their elements with it.
#pragma once

#include "backend/GroupCall.h"
#include "backend/cpu/Reductions.h"

#include <cstring>

namespace mgc::backend::cpu {

class HostMover final : public DataMover {
public:
  void sum(ir::DType dtype, llvm::ArrayRef<const std::byte *> srcs,
           std::byte *dst, int64_t n) override {
    sumParts(dtype, srcs, dst, n);
  }
  void max(ir::DType dtype, llvm::ArrayRef<const std::byte *> srcs,
           std::byte *dst, int64_t n) override {
    maxParts(dtype, srcs, dst, n);
  }
  void copy(std::byte *dst, const std::byte *src, size_t bytes) override {
    if (dst != src && bytes)
      std::memcpy(dst, src, bytes);
  }
};

} // namespace mgc::backend::cpu
