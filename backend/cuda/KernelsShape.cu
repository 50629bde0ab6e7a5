// Strided gathers (transpose, slice, broadcast) and reductions over axes
// (sum, mean, max, max_grad). Reductions accumulate floats in f64 and
// integers in int64, as the CPU kernels do; each output element is computed
// by one thread, or by one block with a fixed tree when its reduction is
// long, so results never depend on timing.
#include "backend/cuda/DeviceCommon.cuh"

#include <cmath>

namespace mgc::backend::cuda {

namespace {

// The offset, in `s`'s strides, of the row-major index n of s.shape.
__device__ inline int64_t offsetOf(const Strided &s, int64_t n) {
  int64_t offset = 0;
  for (int d = s.rank - 1; d >= 0; --d) {
    int64_t extent = s.shape[d];
    offset += (n % extent) * s.strides[d];
    n /= extent;
  }
  return offset;
}

template <typename T>
__global__ void gatherKernel(const T *in, int64_t base, Strided out, T *y,
                             int64_t n) {
  MGC_GRID_STRIDE(i, n) { y[i] = in[base + offsetOf(out, i)]; }
}

template <typename S>
using Acc = std::conditional_t<kIsInt<S>, int64_t, double>;

// The fold of one output's reduced elements from index `from` in steps of
// `step` (a thread's share), in input row-major order.
template <Reduce Kind, typename S>
__device__ Acc<S> foldRange(const S *x, int64_t base, const ReduceShape &s,
                            int64_t from, int64_t step) {
  using E = Elem<S>;
  Acc<S> acc;
  if constexpr (Kind == Reduce::Max)
    acc = kIsInt<S> ? Acc<S>(INT64_MIN) : Acc<S>(-INFINITY);
  else
    acc = 0;
  for (int64_t r = from; r < s.count; r += step) {
    Acc<S> v = static_cast<Acc<S>>(E::load(x[base + offsetOf(s.reduced, r)]));
    if constexpr (Kind == Reduce::Max) {
      if constexpr (kIsInt<S>)
        acc = v > acc ? v : acc;
      else
        acc = nanMax(acc, v);
    } else if constexpr (kIsInt<S>) {
      acc = static_cast<int64_t>(static_cast<uint64_t>(acc) +
                                 static_cast<uint64_t>(v));
    } else {
      acc += v;
    }
  }
  return acc;
}

template <Reduce Kind, typename S>
__device__ void storeResult(S *y, int64_t o, Acc<S> acc, int64_t count) {
  using C = ComputeOf<S>;
  if constexpr (Kind == Reduce::Mean) {
    if constexpr (kIsInt<S>)
      acc = count == 0 ? 0 : acc / count;
    else
      acc = count == 0 ? Acc<S>(NAN) : acc / static_cast<double>(count);
  }
  y[o] = Elem<S>::store(static_cast<C>(acc));
}

// One thread per output: short reductions, many outputs.
template <Reduce Kind, typename S>
__global__ void reduceThreadKernel(const S *x, S *y, ReduceShape s) {
  MGC_GRID_STRIDE(o, s.outputs) {
    int64_t base = offsetOf(s.kept, o);
    storeResult<Kind>(y, o, foldRange<Kind>(x, base, s, 0, 1), s.count);
  }
}

// One block per output: long reductions. Integers sum exactly, so only
// floats depend on the tree, which is fixed.
template <Reduce Kind, typename S>
__global__ void reduceBlockKernel(const S *x, S *y, ReduceShape s) {
  for (int64_t o = blockIdx.x; o < s.outputs; o += gridDim.x) {
    int64_t base = offsetOf(s.kept, o);
    Acc<S> part = foldRange<Kind>(x, base, s, threadIdx.x, blockDim.x);
    Acc<S> total;
    if constexpr (kIsInt<S>) {
      // Exact in int64 (wrapping): a shared-memory sum in thread order.
      __shared__ int64_t parts[kThreads];
      parts[threadIdx.x] = part;
      __syncthreads();
      if (threadIdx.x == 0) {
        total = parts[0];
        for (int t = 1; t < blockDim.x; ++t)
          total = Kind == Reduce::Max
                      ? (parts[t] > total ? parts[t] : total)
                      : static_cast<int64_t>(static_cast<uint64_t>(total) +
                                             static_cast<uint64_t>(parts[t]));
        storeResult<Kind>(y, o, total, s.count);
      }
      __syncthreads();
    } else {
      total = Kind == Reduce::Max ? blockMax(part) : blockSum(part);
      if (threadIdx.x == 0)
        storeResult<Kind>(y, o, total, s.count);
    }
  }
}

template <Reduce Kind>
cudaError_t reduceTyped(const Launch &l, Dt dt, const void *x, void *y,
                        const ReduceShape &s) {
  return visitAll(dt, [&]<typename S>() {
    const S *in = static_cast<const S *>(x);
    S *out = static_cast<S *>(y);
    // Few outputs with long reductions: a block each; otherwise a thread.
    if (s.count >= 1024 && s.outputs < 4096)
      reduceBlockKernel<Kind, S>
          <<<blocksFor(s.outputs), kThreads, 0, l.stream>>>(in, out, s);
    else
      reduceThreadKernel<Kind, S>
          <<<gridFor(s.outputs), kThreads, 0, l.stream>>>(in, out, s);
    return lastError();
  });
}

template <typename S>
__global__ void maxGradKernel(const S *dy, const S *x, const S *y, S *dx,
                              ReduceShape s) {
  using E = Elem<S>;
  using C = ComputeOf<S>;
  MGC_GRID_STRIDE(o, s.outputs) {
    int64_t base = offsetOf(s.kept, o);
    C m = E::load(y[o]);
    double ties = 0;
    for (int64_t r = 0; r < s.count; ++r)
      ties += E::load(x[base + offsetOf(s.reduced, r)]) == m;
    C share = static_cast<C>(static_cast<double>(E::load(dy[o])) / ties);
    for (int64_t r = 0; r < s.count; ++r) {
      int64_t i = base + offsetOf(s.reduced, r);
      dx[i] = E::store(E::load(x[i]) == m ? share : C(0));
    }
  }
}

} // namespace

cudaError_t launchGather(const Launch &l, const void *in, int64_t base,
                         const Strided &out, void *y, int elemBytes) {
  int64_t n = 1;
  for (int d = 0; d < out.rank; ++d)
    n *= out.shape[d];
  if (n <= 0)
    return cudaSuccess;
  switch (elemBytes) {
  case 2:
    gatherKernel<<<gridFor(n), kThreads, 0, l.stream>>>(
        static_cast<const uint16_t *>(in), base, out,
        static_cast<uint16_t *>(y), n);
    break;
  case 4:
    gatherKernel<<<gridFor(n), kThreads, 0, l.stream>>>(
        static_cast<const uint32_t *>(in), base, out,
        static_cast<uint32_t *>(y), n);
    break;
  default:
    gatherKernel<<<gridFor(n), kThreads, 0, l.stream>>>(
        static_cast<const uint64_t *>(in), base, out,
        static_cast<uint64_t *>(y), n);
    break;
  }
  return lastError();
}

cudaError_t launchReduce(const Launch &l, Reduce kind, Dt dt, const void *x,
                         void *y, const ReduceShape &s) {
  if (s.outputs <= 0)
    return cudaSuccess;
  switch (kind) {
  case Reduce::Sum:
    return reduceTyped<Reduce::Sum>(l, dt, x, y, s);
  case Reduce::Mean:
    return reduceTyped<Reduce::Mean>(l, dt, x, y, s);
  case Reduce::Max:
    break;
  }
  return reduceTyped<Reduce::Max>(l, dt, x, y, s);
}

cudaError_t launchMaxGrad(const Launch &l, Dt dt, const void *dy, const void *x,
                          const void *y, void *dx, const ReduceShape &s) {
  if (s.outputs <= 0)
    return cudaSuccess;
  return visitFloat(dt, [&]<typename S>() {
    maxGradKernel<S><<<gridFor(s.outputs), kThreads, 0, l.stream>>>(
        static_cast<const S *>(dy), static_cast<const S *>(x),
        static_cast<const S *>(y), static_cast<S *>(dx), s);
    return lastError();
  });
}

} // namespace mgc::backend::cuda
