// The elementwise ops of rotary embeddings, masks and activations (sin,
// abs, sign, pow, softplus, where), iota, and the cotangent of minimum and
// maximum: element i of the operands to element i of the result, in chunks
// of kElementGrain, with the formulas of ir/ScalarMath.h.
#include "backend/cpu/Elem.h"
#include "backend/cpu/Kernels.h"

#include "ir/ScalarMath.h"

#include <cmath>

namespace mgc::backend::cpu {

namespace {

// out[i] = f(i, load) for every element, in the result's compute type;
// `load(k, i)` reads element i of operand k of the result's storage type.
template <typename F> LogicalResult mapElements(const KernelArgs &args, F f) {
  return visitDType(args.out.dtype(), [&]<typename S>() {
    using E = Elem<S>;
    S *y = args.out.as<S>();
    auto load = [&](unsigned k, int64_t i) {
      return E::load(args.in[k].as<S>()[i]);
    };
    args.pool.parallelFor(args.out.size(), kElementGrain,
                          [&](int64_t b, int64_t e) {
                            for (int64_t i = b; i < e; ++i)
                              y[i] = E::store(f(load, i));
                          });
    return success();
  });
}

} // namespace

// x[s] -> out[s]
LogicalResult kernelSin(const KernelArgs &args) {
  return mapElements(args, [](auto load, int64_t i) {
    auto x = load(0, i);
    return decltype(x)(std::sin(x));
  });
}
LogicalResult kernelAbs(const KernelArgs &args) {
  return mapElements(
      args, [](auto load, int64_t i) { return ir::scalar::abs(load(0, i)); });
}
LogicalResult kernelSign(const KernelArgs &args) {
  return mapElements(
      args, [](auto load, int64_t i) { return ir::scalar::sign(load(0, i)); });
}
LogicalResult kernelSoftplus(const KernelArgs &args) {
  return mapElements(args, [](auto load, int64_t i) {
    return ir::scalar::softplus(load(0, i));
  });
}

// a[s], b[s] -> out[s]
LogicalResult kernelPow(const KernelArgs &args) {
  return mapElements(args, [](auto load, int64_t i) {
    auto a = load(0, i);
    return decltype(a)(std::pow(a, load(1, i)));
  });
}

// cond[s] (any element type), a[s], b[s] -> out[s]
LogicalResult kernelWhere(const KernelArgs &args) {
  return visitDType(args.in[0].dtype(), [&]<typename T>() {
    const T *cond = args.in[0].as<T>();
    return mapElements(args, [&](auto load, int64_t i) {
      return Elem<T>::load(cond[i]) != 0 ? load(1, i) : load(2, i);
    });
  });
}

// -> out[shape]: each element's index along `axis`.
LogicalResult kernelIota(const KernelArgs &args) {
  llvm::ArrayRef<int64_t> shape = args.out.shape();
  int64_t axis = *ir::normalizeAxis(args.op.attrs().getInt("axis"),
                                    static_cast<int64_t>(shape.size()));
  ir::AxisSplit split = ir::splitAtAxis(shape, axis);
  int64_t inner = split.inner, size = split.dim;
  return visitDType(args.out.dtype(), [&]<typename S>() {
    using C = ComputeOf<S>;
    S *y = args.out.as<S>();
    args.pool.parallelFor(
        args.out.size(), kElementGrain, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i)
            y[i] = Elem<S>::store(static_cast<C>((i / inner) % size));
        });
    return success();
  });
}

// dy[s], a[s], b[s] -> da[s] of minimum(a, b) or maximum(a, b).
LogicalResult kernelMinMaxGrad(const KernelArgs &args) {
  bool isMax = args.op.attrs().getBool("maximum");
  return mapElements(args, [&](auto load, int64_t i) {
    auto dy = load(0, i), a = load(1, i), b = load(2, i);
    return isMax ? ir::scalar::minmaxGrad<true>(dy, a, b)
                 : ir::scalar::minmaxGrad<false>(dy, a, b);
  });
}

} // namespace mgc::backend::cpu
