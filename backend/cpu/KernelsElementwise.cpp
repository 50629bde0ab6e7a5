// Constants, casts, elementwise arithmetic, dropout and the elementwise
// backward ops. Every kernel here maps element i of its operands to element
// i of its result: x[s] (, y[s]) -> out[s], in chunks of kElementGrain.
#include "backend/CollectivePlan.h"
#include "backend/cpu/Elem.h"
#include "backend/cpu/Kernels.h"

#include "ir/Interpreter.h"
#include "ir/ScalarMath.h"
#include "support/Random.h"

#include <cmath>
#include <limits>
#include <numbers>

namespace mgc::backend::cpu {

namespace {

// out[i] = f(x[i]) for a unary op, in the compute type of the storage.
template <typename F> LogicalResult mapUnary(const KernelArgs &args, F f) {
  return visitDType(args.out.dtype(), [&]<typename S>() {
    using E = Elem<S>;
    const S *x = args.in[0].as<S>();
    S *y = args.out.as<S>();
    args.pool.parallelFor(args.out.size(), kElementGrain,
                          [&](int64_t b, int64_t e) {
                            for (int64_t i = b; i < e; ++i)
                              y[i] = E::store(f(E::load(x[i])));
                          });
    return success();
  });
}

// out[i] = f(a[i], b[i]).
template <typename F> LogicalResult mapBinary(const KernelArgs &args, F f) {
  return visitDType(args.out.dtype(), [&]<typename S>() {
    using E = Elem<S>;
    const S *a = args.in[0].as<S>();
    const S *b = args.in[1].as<S>();
    S *y = args.out.as<S>();
    args.pool.parallelFor(args.out.size(), kElementGrain,
                          [&](int64_t lo, int64_t hi) {
                            for (int64_t i = lo; i < hi; ++i)
                              y[i] = E::store(f(E::load(a[i]), E::load(b[i])));
                          });
    return success();
  });
}

// Integer arithmetic wraps around (through uint64) rather than being
// undefined; the interpreter's exact values agree while they fit.
template <typename C> C wrapAdd(C a, C b) {
  if constexpr (std::is_integral_v<C>)
    return static_cast<C>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  else
    return a + b;
}
template <typename C> C wrapSub(C a, C b) {
  if constexpr (std::is_integral_v<C>)
    return static_cast<C>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
  else
    return a - b;
}
template <typename C> C wrapMul(C a, C b) {
  if constexpr (std::is_integral_v<C>)
    return static_cast<C>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  else
    return a * b;
}

} // namespace

// -> out[]: the constant in the op's dtype.
LogicalResult kernelConstant(const KernelArgs &args) {
  double value = args.op.attrs().getFloat("value");
  return visitDType(args.out.dtype(), [&]<typename S>() {
    using C = ComputeOf<S>;
    args.out.as<S>()[0] = Elem<S>::store(
        static_cast<C>(ir::roundToDType(value, args.out.dtype())));
    return success();
  });
}

// x[s] -> out[s] in another dtype: floats round as ir::roundToDType does
// (through f64, exact for every source type); integers truncate toward zero
// and a value with no integer of the target type is an error.
LogicalResult kernelCast(const KernelArgs &args) {
  ir::DType to = args.out.dtype();
  int64_t n = args.out.size();
  return visitDType(args.in[0].dtype(), [&]<typename In>() {
    const In *x = args.in[0].as<In>();
    auto read = [&](int64_t i) {
      return static_cast<double>(Elem<In>::load(x[i]));
    };
    return visitDType(to, [&]<typename Out>() -> LogicalResult {
      Out *y = args.out.as<Out>();
      using C = ComputeOf<Out>;
      if constexpr (kIsInt<Out>) {
        double lo =
            to == ir::DType::I32 ? -2147483648.0 : -9223372036854775808.0;
        double hi = to == ir::DType::I32 ? 2147483647.0 : 9223372036854775807.0;
        for (int64_t i = 0; i < n; ++i) {
          double t = std::trunc(read(i));
          if (!(t >= lo && t <= hi) ||
              (to == ir::DType::I64 && t >= 9223372036854775807.0))
            return args.fail("cast of " + ir::formatDouble(read(i)) + " to " +
                             ir::dtypeName(to).str() +
                             " is out of range in element " +
                             std::to_string(i));
          y[i] = Elem<Out>::store(static_cast<C>(t));
        }
        return success();
      } else if constexpr (std::is_same_v<ComputeOf<In>, float> &&
                           std::is_same_v<C, float>) {
        // Between f32, bf16 and f16: a float rounds once into the target
        // (the stores round as roundToDType does), in a loop that
        // vectorises for f32 and bf16.
        args.pool.parallelFor(n, kElementGrain, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i)
            y[i] = Elem<Out>::store(Elem<In>::load(x[i]));
        });
        return success();
      } else {
        args.pool.parallelFor(n, kElementGrain, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i)
            y[i] =
                Elem<Out>::store(static_cast<C>(ir::roundToDType(read(i), to)));
        });
        return success();
      }
    });
  });
}

// a[s], b[s] -> out[s]
LogicalResult kernelAdd(const KernelArgs &args) {
  return mapBinary(args, [](auto a, auto b) { return wrapAdd(a, b); });
}
LogicalResult kernelSub(const KernelArgs &args) {
  return mapBinary(args, [](auto a, auto b) { return wrapSub(a, b); });
}
LogicalResult kernelMul(const KernelArgs &args) {
  return mapBinary(args, [](auto a, auto b) { return wrapMul(a, b); });
}

// a[s], b[s] -> out[s]; integers truncate toward zero, and dividing by zero
// is an error (checked before any thread starts).
LogicalResult kernelDiv(const KernelArgs &args) {
  if (ir::isInteger(args.out.dtype())) {
    ir::DType dt = args.in[1].dtype();
    for (int64_t i = 0; i < args.out.size(); ++i)
      if (loadId(args.in[1].data, dt, i) == 0)
        return args.fail("integer division by zero in element " +
                         std::to_string(i));
  }
  return mapBinary(args, [](auto a, auto b) {
    using C = decltype(a);
    if constexpr (std::is_integral_v<C>) {
      if (b == -1) // the one quotient that can overflow: wrap it
        return wrapSub(C(0), a);
      return a / b;
    } else {
      return a / b;
    }
  });
}

// x[s] -> out[s]
LogicalResult kernelNeg(const KernelArgs &args) {
  return mapUnary(args, [](auto x) { return wrapSub(decltype(x)(0), x); });
}
LogicalResult kernelExp(const KernelArgs &args) {
  return mapUnary(args, [](auto x) { return decltype(x)(std::exp(x)); });
}
LogicalResult kernelLog(const KernelArgs &args) {
  return mapUnary(args, [](auto x) { return decltype(x)(std::log(x)); });
}
LogicalResult kernelSqrt(const KernelArgs &args) {
  return mapUnary(args, [](auto x) { return decltype(x)(std::sqrt(x)); });
}
LogicalResult kernelRsqrt(const KernelArgs &args) {
  return mapUnary(args, [](auto x) { return ir::scalar::rsqrt(x); });
}
LogicalResult kernelTanh(const KernelArgs &args) {
  return mapUnary(args, [](auto x) { return ir::scalar::tanhOf(x); });
}
LogicalResult kernelRelu(const KernelArgs &args) {
  return mapUnary(args, [](auto x) { return ir::scalar::relu(x); });
}
LogicalResult kernelGelu(const KernelArgs &args) {
  return mapUnary(args, [](auto x) { return ir::scalar::gelu(x); });
}
LogicalResult kernelSigmoid(const KernelArgs &args) {
  return mapUnary(args, [](auto x) { return ir::scalar::sigmoid(x); });
}

// x[s] -> out[s]: element i is dropped when uniform01(seed, "dropout", i) < p
// (the same counter-based mask as the interpreter), the rest scaled by
// 1 / (1 - p).
namespace {

// Dropout with element i's mask drawn at index `first` + i of the whole
// tensor.
LogicalResult dropoutFrom(const KernelArgs &args, uint64_t first) {
  double p = args.op.attrs().getFloat("p");
  uint64_t seed = static_cast<uint64_t>(args.op.attrs().getInt("seed"));
  const uint64_t stream = hashName("dropout");
  const double scale = 1.0 / (1.0 - p);
  return visitFloat(args.out.dtype(), [&]<typename S>() {
    using E = Elem<S>;
    using C = ComputeOf<S>;
    const S *x = args.in[0].as<S>();
    S *y = args.out.as<S>();
    args.pool.parallelFor(
        args.out.size(), kElementGrain, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) {
            if (p == 0)
              y[i] = x[i];
            else
              y[i] =
                  uniform01(seed, stream, first + static_cast<uint64_t>(i)) < p
                      ? E::store(C(0))
                      : E::store(static_cast<C>(E::load(x[i]) * scale));
          }
        });
    return success();
  });
}

} // namespace

LogicalResult kernelDropout(const KernelArgs &args) {
  return dropoutFrom(args, 0);
}

// x[rows, ...] (rows `part` of the whole tensor's first dimension) ->
// out: the whole tensor's mask at this part's elements.
LogicalResult kernelDropoutPart(const KernelArgs &args) {
  const TensorRef &x = args.in[0];
  int64_t rows = x.shape().empty() ? 1 : x.shape()[0];
  std::string error;
  std::optional<IndexPart> part =
      planIndexPart(args.op, args.comm, rows, error);
  if (!part)
    return args.fail(error);
  int64_t perRow = rows > 0 ? x.size() / rows : 0;
  return dropoutFrom(args, static_cast<uint64_t>(part->begin * perRow));
}

// dy[s], x[s] -> dx[s]: dy where x > 0.
LogicalResult kernelReluGrad(const KernelArgs &args) {
  return mapBinary(args,
                   [](auto dy, auto x) { return ir::scalar::reluGrad(dy, x); });
}

// dy[s], x[s] -> dx[s]: dy * gelu'(x).
LogicalResult kernelGeluGrad(const KernelArgs &args) {
  return mapBinary(args,
                   [](auto dy, auto x) { return ir::scalar::geluGrad(dy, x); });
}

// dy[s], y[s] -> dx[s] from the forward results.
LogicalResult kernelSigmoidGrad(const KernelArgs &args) {
  return mapBinary(
      args, [](auto dy, auto y) { return ir::scalar::sigmoidGrad(dy, y); });
}
LogicalResult kernelTanhGrad(const KernelArgs &args) {
  return mapBinary(args,
                   [](auto dy, auto y) { return ir::scalar::tanhGrad(dy, y); });
}

// x[s] -> out[s]
LogicalResult kernelCos(const KernelArgs &args) {
  return mapUnary(args, [](auto x) { return decltype(x)(std::cos(x)); });
}

// a[s], b[s] -> out[s]: the smaller / larger; NaN if either is NaN.
LogicalResult kernelMinimum(const KernelArgs &args) {
  return mapBinary(args,
                   [](auto a, auto b) { return ir::scalar::pick<true>(a, b); });
}
LogicalResult kernelMaximum(const KernelArgs &args) {
  return mapBinary(
      args, [](auto a, auto b) { return ir::scalar::pick<false>(a, b); });
}

} // namespace mgc::backend::cpu
