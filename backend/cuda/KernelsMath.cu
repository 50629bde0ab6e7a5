// The elementwise ops of rotary embeddings, masks and activations (sin,
// abs, sign, softplus, pow, where), iota, and the cotangent of minimum and
// maximum: one thread per element in a grid-stride loop, with the formulas
// of ir/ScalarMath.h in the same compute types as the CPU kernels
// (backend/cpu/KernelsMath.cpp).
#include "backend/cuda/DeviceCommon.cuh"

#include <cmath>

namespace mgc::backend::cuda {

namespace {

__device__ inline float dsin(float x) { return sinf(x); }
__device__ inline double dsin(double x) { return sin(x); }
__device__ inline float dpow(float a, float b) { return powf(a, b); }
__device__ inline double dpow(double a, double b) { return pow(a, b); }
__device__ inline float dsoftplus(float x) {
  return (x > 0 ? x : 0.0f) + log1pf(expf(-fabsf(x)));
}
__device__ inline double dsoftplus(double x) {
  return (x > 0 ? x : 0.0) + log1p(exp(-fabs(x)));
}

template <MathOp Op, typename C> __device__ C math(C a, C b, C c) {
  if constexpr (Op == MathOp::Abs) {
    return a < 0 ? C(-a) : a; // NaN stays NaN
  } else if constexpr (Op == MathOp::Sign) {
    if constexpr (!std::is_integral_v<C>)
      if (isnan(a))
        return a;
    return C((a > 0) - (a < 0));
  } else if constexpr (std::is_integral_v<C>) {
    if constexpr (Op == MathOp::Pow) {
      return static_cast<C>(
          pow(static_cast<double>(a), static_cast<double>(b)));
    } else {
      return a; // the shape rules keep the others to floats
    }
  } else if constexpr (Op == MathOp::Sin) {
    return dsin(a);
  } else if constexpr (Op == MathOp::Softplus) {
    return dsoftplus(a);
  } else if constexpr (Op == MathOp::Pow) {
    return dpow(a, b);
  } else {
    // MinGrad, MaxGrad: (dy, a, b) = (a, b, c).
    if (isnan(b) || isnan(c))
      return C(NAN);
    if (b == c)
      return a * C(0.5);
    return (Op == MathOp::MaxGrad ? b > c : b < c) ? a : C(0);
  }
}

template <MathOp Op, typename S>
__global__ void mathKernel(const S *a, const S *b, const S *c, S *y,
                           int64_t n) {
  using E = Elem<S>;
  MGC_GRID_STRIDE(i, n) {
    using C = ComputeOf<S>;
    C x = E::load(a[i]);
    C u = b ? E::load(b[i]) : C(0);
    C v = c ? E::load(c[i]) : C(0);
    y[i] = E::store(math<Op>(x, u, v));
  }
}

template <typename T, typename S>
__global__ void whereKernel(const T *cond, const S *a, const S *b, S *y,
                            int64_t n) {
  MGC_GRID_STRIDE(i, n) { y[i] = Elem<T>::load(cond[i]) != 0 ? a[i] : b[i]; }
}

template <typename S>
__global__ void iotaKernel(S *y, int64_t n, int64_t inner, int64_t size) {
  using C = ComputeOf<S>;
  MGC_GRID_STRIDE(i, n) { y[i] = Elem<S>::store(C((i / inner) % size)); }
}

template <MathOp Op>
cudaError_t mathTyped(const Launch &l, Dt dt, const void *a, const void *b,
                      const void *c, void *y, int64_t n) {
  return visitAll(dt, [&]<typename S>() {
    mathKernel<Op, S><<<gridFor(n), kThreads, 0, l.stream>>>(
        static_cast<const S *>(a), static_cast<const S *>(b),
        static_cast<const S *>(c), static_cast<S *>(y), n);
    return lastError();
  });
}

} // namespace

cudaError_t launchMath(const Launch &l, MathOp op, Dt dt, const void *a,
                       const void *b, const void *c, void *y, int64_t n,
                       Dt condDt) {
  if (n <= 0)
    return cudaSuccess;
  switch (op) {
  case MathOp::Sin:
    return mathTyped<MathOp::Sin>(l, dt, a, nullptr, nullptr, y, n);
  case MathOp::Abs:
    return mathTyped<MathOp::Abs>(l, dt, a, nullptr, nullptr, y, n);
  case MathOp::Sign:
    return mathTyped<MathOp::Sign>(l, dt, a, nullptr, nullptr, y, n);
  case MathOp::Softplus:
    return mathTyped<MathOp::Softplus>(l, dt, a, nullptr, nullptr, y, n);
  case MathOp::Pow:
    return mathTyped<MathOp::Pow>(l, dt, a, b, nullptr, y, n);
  case MathOp::MinGrad:
    return mathTyped<MathOp::MinGrad>(l, dt, a, b, c, y, n);
  case MathOp::MaxGrad:
    return mathTyped<MathOp::MaxGrad>(l, dt, a, b, c, y, n);
  case MathOp::Where:
    break;
  }
  return visitAll(condDt, [&]<typename T>() {
    return visitAll(dt, [&]<typename S>() {
      whereKernel<T, S><<<gridFor(n), kThreads, 0, l.stream>>>(
          static_cast<const T *>(a), static_cast<const S *>(b),
          static_cast<const S *>(c), static_cast<S *>(y), n);
      return lastError();
    });
  });
}

cudaError_t launchIota(const Launch &l, Dt dt, void *y, int64_t n,
                       int64_t inner, int64_t size) {
  if (n <= 0)
    return cudaSuccess;
  return visitAll(dt, [&]<typename S>() {
    iotaKernel<S><<<gridFor(n), kThreads, 0, l.stream>>>(static_cast<S *>(y), n,
                                                         inner, size);
    return lastError();
  });
}

} // namespace mgc::backend::cuda
