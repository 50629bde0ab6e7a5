// The communicators' element-wise sums and maxima over the parts of a
// collective, one thread per element walking the parts in coordinate order,
// so that every element sees the additions of the CPU's sumParts in the
// same order and the results are the same bits.
#include "backend/cuda/DeviceCommon.cuh"

namespace mgc::backend::cuda {

namespace {

// The sum's accumulator: as the CPU's (integers wrap in unsigned types).
template <typename S> struct SumAcc {
  using A = ComputeOf<S>;
  __device__ static A load(S v) { return Elem<S>::load(v); }
  __device__ static S store(A v) { return Elem<S>::store(v); }
};
template <> struct SumAcc<int32_t> {
  using A = uint32_t;
  __device__ static A load(int32_t v) { return static_cast<uint32_t>(v); }
  __device__ static int32_t store(A v) { return static_cast<int32_t>(v); }
};
template <> struct SumAcc<int64_t> {
  using A = uint64_t;
  __device__ static A load(int64_t v) { return static_cast<uint64_t>(v); }
  __device__ static int64_t store(A v) { return static_cast<int64_t>(v); }
};

template <typename S>
__global__ void sumPartsKernel(ReduceParts parts, S *dst, int64_t n) {
  using Acc = SumAcc<S>;
  MGC_GRID_STRIDE(i, n) {
    typename Acc::A acc = Acc::load(static_cast<const S *>(parts.src[0])[i]);
    for (int j = 1; j < parts.count; ++j)
      acc += Acc::load(static_cast<const S *>(parts.src[j])[i]);
    dst[i] = Acc::store(acc);
  }
}

template <typename S>
__global__ void maxPartsKernel(ReduceParts parts, S *dst, int64_t n) {
  MGC_GRID_STRIDE(i, n) {
    S best = static_cast<const S *>(parts.src[0])[i];
    if constexpr (kIsInt<S>) {
      for (int j = 1; j < parts.count; ++j) {
        S v = static_cast<const S *>(parts.src[j])[i];
        if (best < v)
          best = v;
      }
    } else {
      double b = static_cast<double>(Elem<S>::load(best));
      for (int j = 1; j < parts.count && !isnan(b); ++j) {
        S v = static_cast<const S *>(parts.src[j])[i];
        double x = static_cast<double>(Elem<S>::load(v));
        if (x > b || isnan(x)) {
          best = v;
          b = x;
        }
      }
    }
    dst[i] = best;
  }
}

} // namespace

cudaError_t launchSumParts(cudaStream_t stream, Dt dt, const ReduceParts &parts,
                           void *dst, int64_t n) {
  if (n <= 0 || parts.count <= 0 || parts.count > kMaxReduceParts)
    return n <= 0 ? cudaSuccess : cudaErrorInvalidValue;
  return visitAll(dt, [&]<typename S>() {
    sumPartsKernel<S>
        <<<gridFor(n), kThreads, 0, stream>>>(parts, static_cast<S *>(dst), n);
    return lastError();
  });
}

cudaError_t launchMaxParts(cudaStream_t stream, Dt dt, const ReduceParts &parts,
                           void *dst, int64_t n) {
  if (n <= 0 || parts.count <= 0 || parts.count > kMaxReduceParts)
    return n <= 0 ? cudaSuccess : cudaErrorInvalidValue;
  return visitAll(dt, [&]<typename S>() {
    maxPartsKernel<S>
        <<<gridFor(n), kThreads, 0, stream>>>(parts, static_cast<S *>(dst), n);
    return lastError();
  });
}

} // namespace mgc::backend::cuda
