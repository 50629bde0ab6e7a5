// The ops of tensor parallelism over a vocabulary: the pieces of
// cross_entropy on logits split by classes, and the device versions of
// embedding and embedding_grad on a table split by rows. An op with `sizes`
// holds part c of the classes or rows, c being attribute `part` or, when
// the parts are even and `part` is -1, the device's coordinate on `axis`
// from the communicator. Ids and targets outside the part contribute zeros;
// ids outside the whole dimension are errors, as for the logical ops.
#include "backend/CollectivePlan.h"
#include "backend/cpu/Elem.h"
#include "backend/cpu/Kernels.h"
#include "ir/ScalarMath.h"

#include <cmath>
#include <cstring>

namespace mgc::backend::cpu {

namespace {

using PartRange = IndexPart;

// The range of the op's part (backend/CollectivePlan.h); false (with the
// error set) when the device cannot tell.
bool partRange(const KernelArgs &args, int64_t whole, PartRange &out) {
  std::string error;
  std::optional<IndexPart> part =
      planIndexPart(args.op, args.comm, whole, error);
  if (!part) {
    (void)args.fail(error);
    return false;
  }
  out = *part;
  return true;
}

// Checks every id of an integer operand against [0, whole).
LogicalResult checkIds(const KernelArgs &args, unsigned operand, int64_t whole,
                       const char *what) {
  const TensorRef &ids = args.in[operand];
  for (int64_t n = 0; n < ids.size(); ++n) {
    int64_t v = loadId(ids.data, ids.dtype(), n);
    if (v < 0 || v >= whole)
      return args.fail(std::string(what) + " " + std::to_string(v) +
                       " is out of range [0, " + std::to_string(whole) +
                       ") in element " + std::to_string(n));
  }
  return success();
}

} // namespace

// x[P, C], m[P] -> s[P]: sum over c of exp(x - m), in f64.
LogicalResult kernelSumExp(const KernelArgs &args) {
  int64_t c = args.in[0].shape().back();
  int64_t rows = args.out.size();
  return visitFloat(args.out.dtype(), [&]<typename S>() {
    using E = Elem<S>;
    const S *x = args.in[0].as<S>(), *m = args.in[1].as<S>();
    S *out = args.out.as<S>();
    args.pool.parallelFor(rows, kRowGrain, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        double mp = E::load(m[p]), s = 0;
        for (int64_t j = 0; j < c; ++j)
          s += ir::scalar::expNoDenormals(double(E::load(x[p * c + j])) - mp);
        out[p] = E::store(static_cast<ComputeOf<S>>(s));
      }
    });
    return success();
  });
}

// logits[P, C], targets[P] -> [P]: the target's logit, 0 where the part
// does not hold the target.
LogicalResult kernelClassLogit(const KernelArgs &args) {
  int64_t c = args.in[0].shape().back();
  PartRange r;
  if (!partRange(args, c, r) ||
      failed(checkIds(args, 1, r.whole, "class_logit target")))
    return failure();
  const TensorRef &targets = args.in[1];
  size_t bytes = ir::dtypeBytes(args.out.dtype());
  std::memset(args.out.data, 0, static_cast<size_t>(args.out.size()) * bytes);
  for (int64_t p = 0; p < targets.size(); ++p) {
    int64_t t = loadId(targets.data, targets.dtype(), p);
    if (r.holds(t))
      std::memcpy(args.out.data + p * bytes,
                  args.in[0].data + (p * c + t - r.begin) * bytes, bytes);
  }
  return success();
}

// dy[], logits[P, C], m[P], s[P], targets[P] -> dlogits[P, C]:
// dy * (exp(logits - m) / s - onehot(target)) / P.
LogicalResult kernelCrossEntropyGradStats(const KernelArgs &args) {
  int64_t c = args.in[1].shape().back();
  PartRange r;
  if (!partRange(args, c, r) ||
      failed(checkIds(args, 4, r.whole, "cross_entropy_grad_stats target")))
    return failure();
  const TensorRef &targets = args.in[4];
  int64_t positions = targets.size();
  return visitFloat(args.out.dtype(), [&]<typename S>() {
    using E = Elem<S>;
    using C = ComputeOf<S>;
    const S *logits = args.in[1].as<S>();
    const S *m = args.in[2].as<S>(), *s = args.in[3].as<S>();
    S *out = args.out.as<S>();
    double scale =
        E::load(args.in[0].as<S>()[0]) / static_cast<double>(positions);
    args.pool.parallelFor(positions, kRowGrain, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        double mp = E::load(m[p]), sp = E::load(s[p]);
        int64_t t = loadId(targets.data, targets.dtype(), p) - r.begin;
        for (int64_t j = 0; j < c; ++j) {
          double v = ir::scalar::expNoDenormals(
                         double(E::load(logits[p * c + j])) - mp) /
                     sp * scale;
          out[p * c + j] = E::store(static_cast<C>(j == t ? v - scale : v));
        }
      }
    });
    return success();
  });
}

// table[rows, D] (part c of the rows), ids[P] -> [P, D]: the rows the part
// holds, zero rows for the other ids.
LogicalResult kernelEmbeddingPart(const KernelArgs &args) {
  int64_t rows = args.in[0].shape()[0], d = args.in[0].shape()[1];
  PartRange r;
  if (!partRange(args, rows, r) ||
      failed(checkIds(args, 1, r.whole, "embedding_part id")))
    return failure();
  int64_t rowBytes = d * ir::dtypeBytes(args.out.dtype());
  const TensorRef &ids = args.in[1];
  args.pool.parallelFor(ids.size(), kRowGrain * 16, [&](int64_t b, int64_t e) {
    for (int64_t n = b; n < e; ++n) {
      int64_t id = loadId(ids.data, ids.dtype(), n);
      std::byte *dst = args.out.data + n * rowBytes;
      if (r.holds(id))
        std::memcpy(dst, args.in[0].data + (id - r.begin) * rowBytes,
                    static_cast<size_t>(rowBytes));
      else
        std::memset(dst, 0, static_cast<size_t>(rowBytes));
    }
  });
  return success();
}

// dy[P, D], ids[P] -> [sizes[c], D]: each row of the part accumulates dy of
// the positions whose id it holds, in order of position. Threads split the
// columns, as for embedding_grad.
LogicalResult kernelEmbeddingGradPart(const KernelArgs &args) {
  int64_t rows = args.out.shape()[0], d = args.out.shape()[1];
  PartRange r;
  if (!partRange(args, rows, r) ||
      failed(checkIds(args, 1, r.whole, "embedding_grad_part id")))
    return failure();
  const TensorRef &ids = args.in[1];
  return visitFloat(args.out.dtype(), [&]<typename S>() {
    using E = Elem<S>;
    const S *dy = args.in[0].as<S>();
    S *out = args.out.as<S>();
    args.pool.parallelFor(d, 64, [&](int64_t b, int64_t e) {
      for (int64_t row = 0; row < rows; ++row)
        for (int64_t j = b; j < e; ++j)
          out[row * d + j] = E::store(0);
      for (int64_t n = 0; n < ids.size(); ++n) {
        int64_t id = loadId(ids.data, ids.dtype(), n);
        if (!r.holds(id))
          continue;
        S *row = out + (id - r.begin) * d;
        for (int64_t j = b; j < e; ++j)
          row[j] = E::store(E::load(row[j]) + E::load(dy[n * d + j]));
      }
    });
    return success();
  });
}

} // namespace mgc::backend::cpu
