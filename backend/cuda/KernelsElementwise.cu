// Constants, casts, elementwise arithmetic, activations, dropout and the
// elementwise backward ops: x[s] (, b[s]) -> y[s], one thread per element in
// a grid-stride loop. The formulas are those of backend/cpu/
// KernelsElementwise.cpp, in the same compute types (f32 for f32, bf16 and
// f16 storage; f64; int64 for integers, wrapping on overflow).
#include "backend/cuda/DeviceCommon.cuh"
#include "backend/cuda/LaunchGrouped.h"

#include <cmath>

namespace mgc::backend::cuda {

namespace {

constexpr double kGeluC = 0.7978845608028654; // sqrt(2 / pi)

// Device math in the compute type C (float or double).
__device__ inline float dexp(float x) { return expf(x); }
__device__ inline double dexp(double x) { return exp(x); }
__device__ inline float dlog(float x) { return logf(x); }
__device__ inline double dlog(double x) { return log(x); }
__device__ inline float dsqrt(float x) { return sqrtf(x); }
__device__ inline double dsqrt(double x) { return sqrt(x); }
__device__ inline float dtanh(float x) { return tanhf(x); }
__device__ inline double dtanh(double x) { return tanh(x); }
__device__ inline float dcos(float x) { return cosf(x); }
__device__ inline double dcos(double x) { return cos(x); }

template <typename C> __device__ C wrapAdd(C a, C b) {
  if constexpr (std::is_integral_v<C>)
    return static_cast<C>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  else
    return a + b;
}
template <typename C> __device__ C wrapSub(C a, C b) {
  if constexpr (std::is_integral_v<C>)
    return static_cast<C>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
  else
    return a - b;
}
template <typename C> __device__ C wrapMul(C a, C b) {
  if constexpr (std::is_integral_v<C>)
    return static_cast<C>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  else
    return a * b;
}

template <Unary Op, typename C> __device__ C unary(C x) {
  if constexpr (Op == Unary::Neg) {
    return wrapSub(C(0), x);
  } else if constexpr (std::is_integral_v<C>) {
    return x; // integers reach only neg (the shape rules refuse the rest)
  } else if constexpr (Op == Unary::Exp) {
    return dexp(x);
  } else if constexpr (Op == Unary::Log) {
    return dlog(x);
  } else if constexpr (Op == Unary::Sqrt) {
    return dsqrt(x);
  } else if constexpr (Op == Unary::Rsqrt) {
    return C(1) / dsqrt(x);
  } else if constexpr (Op == Unary::Tanh) {
    return dtanh(x);
  } else if constexpr (Op == Unary::Relu) {
    return x <= 0 ? C(0) : x; // NaN propagates
  } else if constexpr (Op == Unary::Gelu) {
    const C c = static_cast<C>(kGeluC);
    return C(0.5) * x * (C(1) + dtanh(c * (x + C(0.044715) * x * x * x)));
  } else if constexpr (Op == Unary::Sigmoid) {
    return C(1) / (C(1) + dexp(-x));
  } else {
    return dcos(x);
  }
}

template <Binary Op, typename C> __device__ C binary(C a, C b) {
  if constexpr (Op == Binary::Add) {
    return wrapAdd(a, b);
  } else if constexpr (Op == Binary::Sub) {
    return wrapSub(a, b);
  } else if constexpr (Op == Binary::Mul) {
    return wrapMul(a, b);
  } else if constexpr (Op == Binary::Div) {
    if constexpr (std::is_integral_v<C>) {
      if (b == 0) // reported by the caller; any value will do
        return 0;
      if (b == -1) // the one quotient that can overflow: wrap it
        return wrapSub(C(0), a);
    }
    return a / b;
  } else if constexpr (Op == Binary::Minimum || Op == Binary::Maximum) {
    if constexpr (!std::is_integral_v<C>)
      if (isnan(a) || isnan(b))
        return C(NAN);
    if constexpr (Op == Binary::Minimum)
      return b < a ? b : a;
    else
      return b > a ? b : a;
  } else if constexpr (std::is_integral_v<C>) {
    return a; // the backward ops are float-only
  } else if constexpr (Op == Binary::ReluGrad) {
    return b > 0 ? a : C(0);
  } else if constexpr (Op == Binary::GeluGrad) {
    const C c = static_cast<C>(kGeluC);
    C x = b;
    C t = dtanh(c * (x + C(0.044715) * x * x * x));
    C du = c * (C(1) + C(3) * C(0.044715) * x * x);
    return a * (C(0.5) * (C(1) + t) + C(0.5) * x * (C(1) - t * t) * du);
  } else if constexpr (Op == Binary::SigmoidGrad) {
    return a * b * (C(1) - b);
  } else {
    return a * (C(1) - b * b);
  }
}

template <typename S>
__global__ void fillKernel(S *out, ComputeOf<S> value, int64_t n) {
  MGC_GRID_STRIDE(i, n) { out[i] = Elem<S>::store(value); }
}

template <Unary Op, typename S>
__global__ void unaryKernel(const S *x, S *y, int64_t n) {
  using E = Elem<S>;
  MGC_GRID_STRIDE(i, n) { y[i] = E::store(unary<Op>(E::load(x[i]))); }
}

template <Binary Op, typename S>
__global__ void binaryKernel(const S *a, const S *b, S *y, int64_t n,
                             DeviceError *error, int32_t step) {
  using E = Elem<S>;
  MGC_GRID_STRIDE(i, n) {
    auto bv = E::load(b[i]);
    if constexpr (Op == Binary::Div && kIsInt<S>)
      if (bv == 0)
        raiseError(error, step, kDivisionByZero, i);
    y[i] = E::store(binary<Op>(E::load(a[i]), bv));
  }
}

template <typename S> __device__ double toDouble(S v) {
  return static_cast<double>(Elem<S>::load(v));
}
template <typename S> __device__ S fromDouble(double v);
template <> __device__ float fromDouble<float>(double v) {
  return static_cast<float>(v);
}
template <> __device__ double fromDouble<double>(double v) { return v; }
template <> __device__ bf16 fromDouble<bf16>(double v) {
  return __double2bfloat16(v);
}
template <> __device__ f16 fromDouble<f16>(double v) {
  return __double2half(v);
}

// Floats round once from the exact f64 value (as ir::roundToDType); integers
// truncate toward zero and a value with no integer of the type is an error.
template <typename In, typename Out>
__global__ void castKernel(const In *x, Out *y, int64_t n, DeviceError *error,
                           int32_t step) {
  MGC_GRID_STRIDE(i, n) {
    double v = toDouble(x[i]);
    if constexpr (kIsInt<Out>) {
      double t = trunc(v);
      constexpr bool i32 = sizeof(Out) == 4;
      double lo = i32 ? -2147483648.0 : -9223372036854775808.0;
      double hi = i32 ? 2147483647.0 : 9223372036854775807.0;
      if (!(t >= lo && t <= hi) || (!i32 && t >= 9223372036854775807.0)) {
        raiseError(error, step, kCastOutOfRange, i);
        y[i] = 0;
      } else {
        y[i] = static_cast<Out>(static_cast<int64_t>(t));
      }
    } else {
      y[i] = fromDouble<Out>(v);
    }
  }
}

__device__ inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// uniform01(seed, stream, i) of support/Random.h, with the stream's part
// (splitmix64(seed ^ splitmix64(stream))) computed once on the host.
template <typename S>
__global__ void dropoutKernel(const S *x, S *y, int64_t n, double p,
                              double scale, uint64_t key, uint64_t first) {
  using E = Elem<S>;
  using C = ComputeOf<S>;
  MGC_GRID_STRIDE(i, n) {
    double u =
        (splitmix64(key + first + static_cast<uint64_t>(i)) >> 11) * 0x1.0p-53;
    if (p == 0)
      y[i] = x[i];
    else
      y[i] = u < p ? E::store(C(0))
                   : E::store(static_cast<C>(E::load(x[i]) * scale));
  }
}

uint64_t hostSplitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

template <typename S>
__global__ void noteKernel(DeviceError *error, uint64_t tagStep, const S *src) {
  if ((error->owner >> 8) != tagStep || error->element == ~0ull)
    return;
  S v = src[error->element];
  if constexpr (kIsInt<S>)
    error->intValue = static_cast<int64_t>(v);
  else
    error->realValue = static_cast<double>(Elem<S>::load(v));
}

template <typename C> __device__ C loadAs(const void *p, Dt dt, int64_t i) {
  switch (dt) {
  case Dt::BF16:
    return static_cast<C>(__bfloat162float(static_cast<const bf16 *>(p)[i]));
  case Dt::F16:
    return static_cast<C>(__half2float(static_cast<const f16 *>(p)[i]));
  case Dt::F64:
    return static_cast<C>(static_cast<const double *>(p)[i]);
  default:
    return static_cast<C>(static_cast<const float *>(p)[i]);
  }
}

template <typename C> __device__ C applyFused(FusedCode op, C a, C b) {
  switch (op) {
  case FusedCode::Add:
    return binary<Binary::Add>(a, b);
  case FusedCode::Sub:
    return binary<Binary::Sub>(a, b);
  case FusedCode::Mul:
    return binary<Binary::Mul>(a, b);
  case FusedCode::Div:
    return binary<Binary::Div>(a, b);
  case FusedCode::Minimum:
    return binary<Binary::Minimum>(a, b);
  case FusedCode::Maximum:
    return binary<Binary::Maximum>(a, b);
  case FusedCode::ReluGrad:
    return binary<Binary::ReluGrad>(a, b);
  case FusedCode::GeluGrad:
    return binary<Binary::GeluGrad>(a, b);
  case FusedCode::SigmoidGrad:
    return binary<Binary::SigmoidGrad>(a, b);
  case FusedCode::TanhGrad:
    return binary<Binary::TanhGrad>(a, b);
  case FusedCode::Neg:
    return unary<Unary::Neg>(a);
  case FusedCode::Exp:
    return unary<Unary::Exp>(a);
  case FusedCode::Log:
    return unary<Unary::Log>(a);
  case FusedCode::Sqrt:
    return unary<Unary::Sqrt>(a);
  case FusedCode::Rsqrt:
    return unary<Unary::Rsqrt>(a);
  case FusedCode::Tanh:
    return unary<Unary::Tanh>(a);
  case FusedCode::Relu:
    return unary<Unary::Relu>(a);
  case FusedCode::Gelu:
    return unary<Unary::Gelu>(a);
  case FusedCode::Sigmoid:
    return unary<Unary::Sigmoid>(a);
  case FusedCode::Cos:
    return unary<Unary::Cos>(a);
  case FusedCode::CastBF16:
    return static_cast<C>(
        __bfloat162float(__double2bfloat16(static_cast<double>(a))));
  case FusedCode::CastF16:
    return static_cast<C>(__half2float(__double2half(static_cast<double>(a))));
  case FusedCode::CastF32:
    return static_cast<C>(static_cast<float>(a));
  case FusedCode::CastF64:
    break;
  }
  return a;
}

// The program's instructions for one element, in registers `regs`
// (compute type C); `load(k)` reads operand k of the element. Returns the
// last instruction's result. Shared by the fused and grouped kernels, so
// that both compute the same bits.
template <typename C, typename Load>
__device__ __forceinline__ C runFusedProgram(const FusedProgram &p, C *regs,
                                             Load load) {
  for (int j = 0; j < p.numInstrs; ++j) {
    C args[2] = {C(0), C(0)};
    for (int a = 0; a < 2; ++a) {
      int32_t k = p.argIndex[j][a];
      switch (p.argKind[j][a]) {
      case 0:
        args[a] = load(k);
        break;
      case 1:
        args[a] = regs[k];
        break;
      default:
        args[a] = static_cast<C>(p.literal[j][a]);
        break;
      }
    }
    regs[j] = applyFused<C>(p.op[j], args[0], args[1]);
  }
  return regs[p.numInstrs - 1];
}

// One thread per element: the instructions in registers (compute type C),
// the last one stored once.
template <typename C, typename Out>
__global__ void fusedKernel(FusedProgram p, Out *out, int64_t n) {
  C regs[kMaxFusedInstrs];
  MGC_GRID_STRIDE(i, n) {
    int64_t index[kMaxRank];
    int64_t rest = i;
    for (int d = p.rank - 1; d >= 0; --d) {
      index[d] = rest % p.shape[d];
      rest /= p.shape[d];
    }
    C last = runFusedProgram<C>(p, regs, [&](int32_t k) {
      int64_t offset = 0;
      for (int d = 0; d < p.rank; ++d)
        offset += index[d] * p.strides[k][d];
      return loadAs<C>(p.operand[k], p.operandDt[k], offset);
    });
    out[i] = Elem<Out>::store(static_cast<ComputeOf<Out>>(last));
  }
}

template <Unary Op>
cudaError_t unaryTyped(const Launch &l, Dt dt, const void *x, void *y,
                       int64_t n) {
  return visitAll(dt, [&]<typename S>() {
    unaryKernel<Op, S><<<gridFor(n), kThreads, 0, l.stream>>>(
        static_cast<const S *>(x), static_cast<S *>(y), n);
    return lastError();
  });
}

template <Binary Op>
cudaError_t binaryTyped(const Launch &l, Dt dt, const void *a, const void *b,
                        void *y, int64_t n) {
  return visitAll(dt, [&]<typename S>() {
    binaryKernel<Op, S><<<gridFor(n), kThreads, 0, l.stream>>>(
        static_cast<const S *>(a), static_cast<const S *>(b),
        static_cast<S *>(y), n, l.error, l.step);
    return lastError();
  });
}

} // namespace

cudaError_t launchNoteValue(const Launch &l, const void *src, Dt dt) {
  return visitAll(dt, [&]<typename S>() {
    noteKernel<S><<<1, 1, 0, l.stream>>>(l.error,
                                         static_cast<uint64_t>(l.step + 1),
                                         static_cast<const S *>(src));
    return lastError();
  });
}

cudaError_t launchFused(const Launch &l, const FusedProgram &program, Dt dt,
                        void *out, int64_t n) {
  if (n <= 0 || program.numInstrs <= 0)
    return cudaSuccess;
  return visitFloat(dt, [&]<typename S>() {
    using C = std::conditional_t<std::is_same_v<S, double>, double, float>;
    fusedKernel<C, S><<<gridFor(n), kThreads, 0, l.stream>>>(
        program, static_cast<S *>(out), n);
    return lastError();
  });
}

cudaError_t launchFill(const Launch &l, void *out, Dt dt, double value,
                       int64_t n) {
  if (n <= 0)
    return cudaSuccess;
  return visitAll(dt, [&]<typename S>() {
    fillKernel<S><<<gridFor(n), kThreads, 0, l.stream>>>(
        static_cast<S *>(out), static_cast<ComputeOf<S>>(value), n);
    return lastError();
  });
}

cudaError_t launchCast(const Launch &l, const void *x, Dt from, void *y, Dt to,
                       int64_t n) {
  if (n <= 0)
    return cudaSuccess;
  return visitAll(from, [&]<typename In>() {
    return visitAll(to, [&]<typename Out>() {
      castKernel<In, Out><<<gridFor(n), kThreads, 0, l.stream>>>(
          static_cast<const In *>(x), static_cast<Out *>(y), n, l.error,
          l.step);
      return lastError();
    });
  });
}

cudaError_t launchUnary(const Launch &l, Unary op, Dt dt, const void *x,
                        void *y, int64_t n) {
  if (n <= 0)
    return cudaSuccess;
  switch (op) {
  case Unary::Neg:
    return unaryTyped<Unary::Neg>(l, dt, x, y, n);
  case Unary::Exp:
    return unaryTyped<Unary::Exp>(l, dt, x, y, n);
  case Unary::Log:
    return unaryTyped<Unary::Log>(l, dt, x, y, n);
  case Unary::Sqrt:
    return unaryTyped<Unary::Sqrt>(l, dt, x, y, n);
  case Unary::Rsqrt:
    return unaryTyped<Unary::Rsqrt>(l, dt, x, y, n);
  case Unary::Tanh:
    return unaryTyped<Unary::Tanh>(l, dt, x, y, n);
  case Unary::Relu:
    return unaryTyped<Unary::Relu>(l, dt, x, y, n);
  case Unary::Gelu:
    return unaryTyped<Unary::Gelu>(l, dt, x, y, n);
  case Unary::Sigmoid:
    return unaryTyped<Unary::Sigmoid>(l, dt, x, y, n);
  case Unary::Cos:
    break;
  }
  return unaryTyped<Unary::Cos>(l, dt, x, y, n);
}

cudaError_t launchBinary(const Launch &l, Binary op, Dt dt, const void *a,
                         const void *b, void *y, int64_t n) {
  if (n <= 0)
    return cudaSuccess;
  switch (op) {
  case Binary::Add:
    return binaryTyped<Binary::Add>(l, dt, a, b, y, n);
  case Binary::Sub:
    return binaryTyped<Binary::Sub>(l, dt, a, b, y, n);
  case Binary::Mul:
    return binaryTyped<Binary::Mul>(l, dt, a, b, y, n);
  case Binary::Div:
    return binaryTyped<Binary::Div>(l, dt, a, b, y, n);
  case Binary::Minimum:
    return binaryTyped<Binary::Minimum>(l, dt, a, b, y, n);
  case Binary::Maximum:
    return binaryTyped<Binary::Maximum>(l, dt, a, b, y, n);
  case Binary::ReluGrad:
    return binaryTyped<Binary::ReluGrad>(l, dt, a, b, y, n);
  case Binary::GeluGrad:
    return binaryTyped<Binary::GeluGrad>(l, dt, a, b, y, n);
  case Binary::SigmoidGrad:
    return binaryTyped<Binary::SigmoidGrad>(l, dt, a, b, y, n);
  case Binary::TanhGrad:
    break;
  }
  return binaryTyped<Binary::TanhGrad>(l, dt, a, b, y, n);
}

cudaError_t launchDropout(const Launch &l, Dt dt, const void *x, void *y,
                          int64_t n, double p, uint64_t seed,
                          uint64_t randomStream, uint64_t first) {
  if (n <= 0)
    return cudaSuccess;
  uint64_t key = hostSplitmix64(seed ^ hostSplitmix64(randomStream));
  double scale = 1.0 / (1.0 - p);
  return visitFloat(dt, [&]<typename S>() {
    dropoutKernel<S><<<gridFor(n), kThreads, 0, l.stream>>>(
        static_cast<const S *>(x), static_cast<S *>(y), n, p, scale, key,
        first);
    return lastError();
  });
}

} // namespace mgc::backend::cuda

namespace mgc::backend::cuda {

// --- Grouped launches: the fused expression over several tensors.
namespace {

// One block per chunk (grid-stride over the group's chunks): the chunk's
// tensor found by binary search over firstChunk, then one thread per
// element, computing exactly what fusedKernel computes for that element.
template <typename C, typename Out>
__global__ void fusedGroupKernel(FusedProgram p, uint32_t scalarMask,
                                 const FusedGroupTensor *tensors,
                                 int32_t count, int64_t chunks) {
  C regs[kMaxFusedInstrs];
  for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    int32_t lo = 0, hi = count - 1;
    while (lo < hi) {
      int32_t mid = lo + (hi - lo + 1) / 2;
      if (tensors[mid].firstChunk <= c)
        lo = mid;
      else
        hi = mid - 1;
    }
    const FusedGroupTensor &t = tensors[lo];
    int64_t begin = (c - t.firstChunk) * kFusedGroupChunk;
    int64_t end = begin + kFusedGroupChunk < t.n ? begin + kFusedGroupChunk
                                                 : t.n;
    Out *out = static_cast<Out *>(t.out);
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
      C last = runFusedProgram<C>(p, regs, [&](int32_t k) {
        return loadAs<C>(t.operand[k], p.operandDt[k],
                         (scalarMask >> k) & 1u ? 0 : i);
      });
      out[i] = Elem<Out>::store(static_cast<ComputeOf<Out>>(last));
    }
  }
}

} // namespace

cudaError_t launchFusedGroup(const Launch &l, const FusedProgram &program,
                             uint32_t scalarMask, Dt dt,
                             const FusedGroupTensor *tensors, int32_t count,
                             int64_t chunks) {
  if (chunks <= 0 || count <= 0 || program.numInstrs <= 0)
    return cudaSuccess;
  return visitFloat(dt, [&]<typename S>() {
    using C = std::conditional_t<std::is_same_v<S, double>, double, float>;
    fusedGroupKernel<C, S><<<blocksFor(chunks), kThreads, 0, l.stream>>>(
        program, scalarMask, tensors, count, chunks);
    return lastError();
  });
}

} // namespace mgc::backend::cuda
