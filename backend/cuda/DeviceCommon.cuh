// Device-side helpers shared by the kernel files: how each storage type loads
// into and stores from its compute type (bf16 and f16 compute in f32,
// integers in int64, as on the CPU), dispatch from Dt to a template argument,
// grid sizes, deterministic block reductions and the error record.
#pragma once

#include "backend/cuda/Launch.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace mgc::backend::cuda {

using bf16 = __nv_bfloat16;
using f16 = __half;

template <typename S> struct Elem {
  using C = S;
  __device__ static C load(S v) { return v; }
  __device__ static S store(C v) { return v; }
};
template <> struct Elem<bf16> {
  using C = float;
  __device__ static C load(bf16 v) { return __bfloat162float(v); }
  __device__ static bf16 store(C v) { return __float2bfloat16_rn(v); }
};
template <> struct Elem<f16> {
  using C = float;
  __device__ static C load(f16 v) { return __half2float(v); }
  __device__ static f16 store(C v) { return __float2half_rn(v); }
};
template <> struct Elem<int32_t> {
  using C = int64_t;
  __device__ static C load(int32_t v) { return v; }
  __device__ static int32_t store(C v) { return static_cast<int32_t>(v); }
};
template <> struct Elem<int64_t> {
  using C = int64_t;
  __device__ static C load(int64_t v) { return v; }
  __device__ static int64_t store(C v) { return v; }
};
template <typename S> using ComputeOf = typename Elem<S>::C;
template <typename S> constexpr bool kIsInt = std::is_integral_v<S>;

// f.template operator()<S>() with S the storage type of dt.
template <typename F> cudaError_t visitAll(Dt dt, F &&f) {
  switch (dt) {
  case Dt::F64:
    return f.template operator()<double>();
  case Dt::BF16:
    return f.template operator()<bf16>();
  case Dt::F16:
    return f.template operator()<f16>();
  case Dt::I32:
    return f.template operator()<int32_t>();
  case Dt::I64:
    return f.template operator()<int64_t>();
  case Dt::F32:
    break;
  }
  return f.template operator()<float>();
}
template <typename F> cudaError_t visitFloat(Dt dt, F &&f) {
  switch (dt) {
  case Dt::F64:
    return f.template operator()<double>();
  case Dt::BF16:
    return f.template operator()<bf16>();
  case Dt::F16:
    return f.template operator()<f16>();
  default:
    break;
  }
  return f.template operator()<float>();
}

__device__ inline int64_t loadId(const void *ids, Dt dt, int64_t i) {
  return dt == Dt::I32 ? static_cast<const int32_t *>(ids)[i]
                       : static_cast<const int64_t *>(ids)[i];
}

constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n items.
inline unsigned gridFor(int64_t n, int threads = kThreads) {
  int64_t blocks = (n + threads - 1) / threads;
  if (blocks < 1)
    blocks = 1;
  return static_cast<unsigned>(blocks < (1 << 20) ? blocks : (1 << 20));
}
// Blocks for one block per item (grid-stride when there are more).
inline unsigned blocksFor(int64_t items) {
  if (items < 1)
    return 1;
  return static_cast<unsigned>(items < (1 << 20) ? items : (1 << 20));
}

#define MGC_GRID_STRIDE(i, n)                                                  \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n);    \
       i += int64_t(gridDim.x) * blockDim.x)

// Records an error of the op at `step` for `element` (see DeviceError).
__device__ inline void raiseError(DeviceError *e, int32_t step, uint32_t code,
                                  int64_t element) {
  unsigned long long tag =
      (static_cast<unsigned long long>(step + 1) << 8) | code;
  unsigned long long old =
      atomicCAS(reinterpret_cast<unsigned long long *>(&e->owner), 0ull, tag);
  if (old == 0 || old == tag)
    atomicMin(reinterpret_cast<unsigned long long *>(&e->element),
              static_cast<unsigned long long>(element));
}

// NaN-propagating maximum, as the CPU's `if (v > m || isnan(v)) m = v`.
__device__ inline double nanMax(double a, double b) {
  if (isnan(a))
    return a;
  if (isnan(b))
    return b;
  return b > a ? b : a;
}

// Deterministic block reductions (fixed tree for a fixed block size): every
// thread passes its partial value and every thread gets the result. Needs
// blockDim.x a multiple of 32, at most 1024.
template <bool IsMax> __device__ inline double blockReduce(double v) {
  __shared__ double partials[32];
  for (int offset = 16; offset > 0; offset >>= 1) {
    double o = __shfl_down_sync(0xffffffffu, v, offset);
    v = IsMax ? nanMax(v, o) : v + o;
  }
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads(); // partials may still be read by a previous call
  if (lane == 0)
    partials[warp] = v;
  __syncthreads();
  int warps = blockDim.x / 32;
  if (warp == 0) {
    v = lane < warps ? partials[lane] : (IsMax ? -INFINITY : 0.0);
    for (int offset = 16; offset > 0; offset >>= 1) {
      double o = __shfl_down_sync(0xffffffffu, v, offset);
      v = IsMax ? nanMax(v, o) : v + o;
    }
    if (lane == 0)
      partials[0] = v;
  }
  __syncthreads();
  return partials[0];
}
__device__ inline double blockSum(double v) { return blockReduce<false>(v); }
__device__ inline double blockMax(double v) { return blockReduce<true>(v); }

inline cudaError_t lastError() { return cudaGetLastError(); }

} // namespace mgc::backend::cuda
