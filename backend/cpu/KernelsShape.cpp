// Shape ops (reshape, transpose, slice, concat, broadcast: copies of
// elements, whatever their type) and reductions over axes (sum, mean, max
// and the backward of max).
#include "backend/cpu/Elem.h"
#include "backend/cpu/Kernels.h"

#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace mgc::backend::cpu {

namespace {

using Dims = llvm::SmallVector<int64_t, 8>;

Dims rowMajorStrides(llvm::ArrayRef<int64_t> shape) {
  Dims strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    strides[d - 1] = strides[d] * shape[d];
  return strides;
}

// out[n] = in[base + sum_d idx_d(n) * inStrides[d]] for every row-major n of
// outShape, on elements of `bytes` bytes: transpose, slice and broadcast.
// Axes that are contiguous in both are merged first; then each row of the
// innermost axis is one run: a copy, a strided loop or a fill.
template <typename T>
void gatherTyped(const T *in, int64_t base, llvm::ArrayRef<int64_t> outShape,
                 llvm::ArrayRef<int64_t> inStrides, T *out, ThreadPool &pool) {
  Dims shape, strides;
  for (size_t d = 0; d < outShape.size(); ++d) {
    if (outShape[d] == 1)
      continue; // no step along it
    if (!shape.empty() && strides.back() == inStrides[d] * outShape[d]) {
      shape.back() *= outShape[d];
      strides.back() = inStrides[d];
      continue;
    }
    shape.push_back(outShape[d]);
    strides.push_back(inStrides[d]);
  }
  for (int64_t d : outShape)
    if (d == 0)
      return;
  if (shape.empty()) { // one element
    out[0] = in[base];
    return;
  }
  const int64_t inner = shape.back(), step = strides.back();
  const size_t outer = shape.size() - 1;
  int64_t rows = 1;
  for (size_t d = 0; d < outer; ++d)
    rows *= shape[d];
  int64_t grain = std::max<int64_t>(1, kElementGrain / inner);
  pool.parallelFor(rows, grain, [&](int64_t b, int64_t e) {
    // The multi-index and input offset of row b, then an odometer.
    Dims idx(outer, 0);
    int64_t rest = b, offset = base;
    for (size_t d = outer; d-- > 0;) {
      idx[d] = rest % shape[d];
      rest /= shape[d];
      offset += idx[d] * strides[d];
    }
    for (int64_t row = b; row < e; ++row) {
      T *dst = out + row * inner;
      const T *src = in + offset;
      if (step == 1)
        std::memcpy(dst, src, static_cast<size_t>(inner) * sizeof(T));
      else if (step == 0)
        std::fill(dst, dst + inner, src[0]);
      else
        for (int64_t k = 0; k < inner; ++k)
          dst[k] = src[k * step];
      for (size_t d = outer; d-- > 0;) {
        offset += strides[d];
        if (++idx[d] < shape[d])
          break;
        offset -= strides[d] * shape[d];
        idx[d] = 0;
      }
    }
  });
}

void gather(const KernelArgs &args, int64_t base,
            llvm::ArrayRef<int64_t> inStrides) {
  llvm::ArrayRef<int64_t> outShape = args.out.shape();
  switch (ir::dtypeBytes(args.out.dtype())) {
  case 2:
    return gatherTyped(args.in[0].as<uint16_t>(), base, outShape, inStrides,
                       args.out.as<uint16_t>(), args.pool);
  case 4:
    return gatherTyped(args.in[0].as<uint32_t>(), base, outShape, inStrides,
                       args.out.as<uint32_t>(), args.pool);
  default:
    return gatherTyped(args.in[0].as<uint64_t>(), base, outShape, inStrides,
                       args.out.as<uint64_t>(), args.pool);
  }
}

// The layout of a reduction: the kept axes (in order; they make the output,
// with or without keepdims) and the reduced axes, with input strides.
struct ReduceLayout {
  Dims keptShape, keptStrides, redShape, redStrides;
  int64_t count = 1; // elements folded into each output element
  // Every reduced axis comes before every kept axis (a sum over rows, as a
  // bias gradient): output o folds x[o + r * outputs] for r = 0, 1, ...
  bool leading = true;
  // Every kept axis comes before every reduced axis (a sum over each row):
  // output o folds x[o * count + r].
  bool trailing = true;
};

ReduceLayout reduceLayout(const KernelArgs &args, const ir::TensorType &in) {
  llvm::SmallVector<bool, 8> reduced(in.shape.size(), false);
  for (int64_t a : args.op.attrs().getInts("axes"))
    reduced[*ir::normalizeAxis(a, in.rank())] = true;
  Dims strides = rowMajorStrides(in.shape);
  ReduceLayout l;
  for (size_t d = 0; d < in.shape.size(); ++d) {
    if (reduced[d]) {
      l.leading = l.leading && l.keptShape.empty();
      l.redShape.push_back(in.shape[d]);
      l.redStrides.push_back(strides[d]);
      l.count *= in.shape[d];
    } else {
      l.trailing = l.trailing && l.redShape.empty();
      l.keptShape.push_back(in.shape[d]);
      l.keptStrides.push_back(strides[d]);
    }
  }
  return l;
}

// Calls f(o, base) for output elements o in [b, e), base being the input
// offset of its first reduced element.
template <typename F>
void forOutputs(const ReduceLayout &l, int64_t b, int64_t e, F f) {
  size_t rank = l.keptShape.size();
  Dims idx(rank, 0);
  int64_t rest = b, base = 0;
  for (size_t d = rank; d-- > 0;) {
    idx[d] = rest % l.keptShape[d];
    rest /= l.keptShape[d];
    base += idx[d] * l.keptStrides[d];
  }
  for (int64_t o = b; o < e; ++o) {
    f(o, base);
    for (size_t d = rank; d-- > 0;) {
      base += l.keptStrides[d];
      if (++idx[d] < l.keptShape[d])
        break;
      base -= l.keptStrides[d] * l.keptShape[d];
      idx[d] = 0;
    }
  }
}

// Calls f(offset) for the reduced elements of one output, in input
// row-major order (the interpreter's order of summation).
template <typename F>
void forReduced(const ReduceLayout &l, int64_t base, F f) {
  if (l.count == 0)
    return;
  size_t rank = l.redShape.size();
  Dims idx(rank, 0);
  int64_t offset = base;
  for (int64_t n = 0; n < l.count; ++n) {
    f(offset);
    for (size_t d = rank; d-- > 0;) {
      offset += l.redStrides[d];
      if (++idx[d] < l.redShape[d])
        break;
      offset -= l.redStrides[d] * l.redShape[d];
      idx[d] = 0;
    }
  }
}

enum class ReduceKind { Sum, Mean, Max };

// The float sum (or mean) of a reduction whose reduced axes all lead or all
// trail: the same f64 sums in the same order as the general loop below,
// without its index arithmetic per element. Leading axes sum a block of
// outputs at once, row after row, so the loads are contiguous and the
// loop vectorises across outputs.
template <typename S>
void sumContiguous(const S *x, S *y, int64_t outputs, const ReduceLayout &l,
                   bool mean, ThreadPool &pool) {
  using E = Elem<S>;
  using C = ComputeOf<S>;
  auto finish = [&](double acc) {
    if (mean)
      acc = l.count == 0 ? std::numeric_limits<double>::quiet_NaN()
                         : acc / static_cast<double>(l.count);
    return E::store(static_cast<C>(acc));
  };
  if (l.trailing) {
    pool.parallelFor(outputs, kRowGrain, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        const S *row = x + o * l.count;
        double acc = 0;
        for (int64_t r = 0; r < l.count; ++r)
          acc += static_cast<double>(E::load(row[r]));
        y[o] = finish(acc);
      }
    });
    return;
  }
  constexpr int64_t kColumns = 256;
  pool.parallelFor(outputs, kColumns, [&](int64_t b, int64_t e) {
    double acc[kColumns];
    for (int64_t c0 = b; c0 < e; c0 += kColumns) {
      int64_t n = std::min(kColumns, e - c0);
      std::fill(acc, acc + n, 0.0);
      for (int64_t r = 0; r < l.count; ++r) {
        const S *row = x + r * outputs + c0;
        for (int64_t j = 0; j < n; ++j)
          acc[j] += static_cast<double>(E::load(row[j]));
      }
      for (int64_t j = 0; j < n; ++j)
        y[c0 + j] = finish(acc[j]);
    }
  });
}

// x[s] -> out[s without (or with size-1) reduced axes]. Floats accumulate in
// f64, integers in int64; each output element is summed by one thread in
// input order.
LogicalResult reduce(const KernelArgs &args, ReduceKind kind) {
  const ir::TensorType &inType = *args.in[0].type;
  ReduceLayout l = reduceLayout(args, inType);
  int64_t outputs = args.out.size();
  if (kind == ReduceKind::Max && l.count == 0 && outputs > 0)
    return args.fail("max over an empty axis of " + inType.str() +
                     " has no value");
  return visitDType(args.out.dtype(), [&]<typename S>() {
    using E = Elem<S>;
    using C = ComputeOf<S>;
    using A = std::conditional_t<kIsInt<S>, int64_t, double>;
    const S *x = args.in[0].as<S>();
    S *y = args.out.as<S>();
    if constexpr (!kIsInt<S>) {
      if (kind != ReduceKind::Max && (l.leading || l.trailing)) {
        sumContiguous<S>(x, y, outputs, l, kind == ReduceKind::Mean, args.pool);
        return success();
      }
    }
    args.pool.parallelFor(outputs, kRowGrain, [&](int64_t b, int64_t e) {
      forOutputs(l, b, e, [&](int64_t o, int64_t base) {
        if (kind == ReduceKind::Max) {
          C acc = kIsInt<S> ? std::numeric_limits<C>::lowest()
                            : -std::numeric_limits<C>::infinity();
          forReduced(l, base, [&](int64_t i) {
            C v = E::load(x[i]);
            if constexpr (kIsInt<S>) {
              acc = v > acc ? v : acc;
            } else if (v > acc || std::isnan(v)) {
              acc = std::isnan(acc) ? acc : v;
            }
          });
          y[o] = E::store(acc);
          return;
        }
        A acc = 0;
        forReduced(l, base, [&](int64_t i) {
          if constexpr (kIsInt<S>)
            acc = static_cast<A>(static_cast<uint64_t>(acc) +
                                 static_cast<uint64_t>(E::load(x[i])));
          else
            acc += static_cast<A>(E::load(x[i]));
        });
        if (kind == ReduceKind::Mean) {
          if constexpr (kIsInt<S>)
            acc = l.count == 0 ? 0 : acc / l.count;
          else
            acc = l.count == 0 ? std::numeric_limits<A>::quiet_NaN()
                               : acc / static_cast<A>(l.count);
        }
        y[o] = E::store(static_cast<C>(acc));
      });
    });
    return success();
  });
}

} // namespace

// x[s] -> out[shape]: the same bytes.
LogicalResult kernelReshape(const KernelArgs &args) {
  size_t bytes =
      static_cast<size_t>(args.out.size()) * ir::dtypeBytes(args.out.dtype());
  if (bytes)
    std::memcpy(args.out.data, args.in[0].data, bytes);
  return success();
}

// A training step's mode_select is its train operand (a forward program
// has none left: the eval-mode pass picks).
LogicalResult kernelModeSelect(const KernelArgs &args) {
  return kernelReshape(args);
}

// x[s] -> out[t], t[i] = s[perm[i]].
LogicalResult kernelTranspose(const KernelArgs &args) {
  const ir::TensorType &in = *args.in[0].type;
  Dims inStrides = rowMajorStrides(in.shape), strides;
  for (int64_t p : args.op.attrs().getInts("perm"))
    strides.push_back(inStrides[*ir::normalizeAxis(p, in.rank())]);
  gather(args, 0, strides);
  return success();
}

// x[..., d, ...] -> out[..., end - start, ...]
LogicalResult kernelSlice(const KernelArgs &args) {
  const ir::TensorType &in = *args.in[0].type;
  int64_t axis = *ir::normalizeAxis(args.op.attrs().getInt("axis"), in.rank());
  Dims strides = rowMajorStrides(in.shape);
  gather(args, args.op.attrs().getInt("start") * strides[axis], strides);
  return success();
}

// x_k[..., d_k, ...] -> out[..., sum d_k, ...]: per outer index, one
// contiguous chunk from each operand in order.
LogicalResult kernelConcat(const KernelArgs &args) {
  const ir::TensorType &outType = *args.out.type;
  int64_t axis =
      *ir::normalizeAxis(args.op.attrs().getInt("axis"), outType.rank());
  int64_t elem = ir::dtypeBytes(outType.dtype);
  auto [outer, dim, inner] = ir::splitAtAxis(outType.shape, axis);
  int64_t outRow = dim * inner * elem;
  int64_t offset = 0;
  for (const TensorRef &t : args.in) {
    int64_t chunk = t.shape()[axis] * inner * elem;
    if (chunk > 0)
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(args.out.data + o * outRow + offset, t.data + o * chunk,
                    static_cast<size_t>(chunk));
    offset += chunk;
  }
  return success();
}

// x[s] -> out[shape]: size-1 and missing axes read with stride 0.
LogicalResult kernelBroadcast(const KernelArgs &args) {
  const ir::TensorType &in = *args.in[0].type;
  llvm::ArrayRef<int64_t> outShape = args.out.shape();
  Dims inStrides = rowMajorStrides(in.shape);
  int64_t lead = static_cast<int64_t>(outShape.size()) - in.rank();
  Dims strides(outShape.size(), 0);
  for (int64_t d = lead; d < static_cast<int64_t>(outShape.size()); ++d)
    if (in.shape[d - lead] != 1)
      strides[d] = inStrides[d - lead];
  gather(args, 0, strides);
  return success();
}

LogicalResult kernelSum(const KernelArgs &args) {
  return reduce(args, ReduceKind::Sum);
}
LogicalResult kernelMean(const KernelArgs &args) {
  return reduce(args, ReduceKind::Mean);
}
LogicalResult kernelMax(const KernelArgs &args) {
  return reduce(args, ReduceKind::Max);
}

// dy[r], x[s], y[r] -> dx[s]: each dy shared evenly among the elements of x
// equal to their maximum y, 0 elsewhere.
LogicalResult kernelMaxGrad(const KernelArgs &args) {
  const ir::TensorType &inType = *args.in[1].type;
  ReduceLayout l = reduceLayout(args, inType);
  return visitFloat(args.out.dtype(), [&]<typename S>() {
    using E = Elem<S>;
    using C = ComputeOf<S>;
    const S *dy = args.in[0].as<S>(), *x = args.in[1].as<S>(),
            *y = args.in[2].as<S>();
    S *dx = args.out.as<S>();
    args.pool.parallelFor(
        args.in[0].size(), kRowGrain, [&](int64_t b, int64_t e) {
          forOutputs(l, b, e, [&](int64_t o, int64_t base) {
            C m = E::load(y[o]);
            double ties = 0;
            forReduced(l, base, [&](int64_t i) { ties += E::load(x[i]) == m; });
            C share =
                static_cast<C>(static_cast<double>(E::load(dy[o])) / ties);
            forReduced(l, base, [&](int64_t i) {
              dx[i] = E::store(E::load(x[i]) == m ? share : C(0));
            });
          });
        });
    return success();
  });
}

} // namespace mgc::backend::cpu
