// Causal attention and its fused backward. Neither kernel stores a [T, T]
// matrix: each task is one (head, row) and works through the row's scores
// one at a time, recomputing a score where a second pass needs it.
#include "backend/cpu/Elem.h"
#include "backend/cpu/Kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mgc::backend::cpu {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Columns of an output row accumulated at once on the stack: a head width
// above this is done in blocks, recomputing the scores for each block.
constexpr int64_t kBlock = 256;
// Scores of one row kept on the stack between two passes over the row; a
// longer row recomputes them.
constexpr int64_t kRowCache = 1024;

// q, k, v, y, dy[..., T, Dh] seen as heads of [T, Dh] matrices.
struct Heads {
  int64_t heads = 0, t = 0, dh = 0;
  explicit Heads(const ir::TensorType &qt) {
    t = qt.shape[qt.rank() - 2];
    dh = qt.shape[qt.rank() - 1];
    heads = t * dh == 0 ? 0 : qt.size() / (t * dh);
  }
};

// a . b over n elements in the compute type C, in eight interleaved partial
// sums (which the compiler can keep in vector registers) added in a fixed
// order, so the result does not depend on threads.
template <typename S> ComputeOf<S> dotRow(const S *a, const S *b, int64_t n) {
  using E = Elem<S>;
  using C = ComputeOf<S>;
  C acc[8] = {};
  int64_t x = 0;
  for (; x + 8 <= n; x += 8)
    for (int u = 0; u < 8; ++u)
      acc[u] += C(E::load(a[x + u])) * C(E::load(b[x + u]));
  C total = ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
            ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; x < n; ++x)
    total += C(E::load(a[x])) * C(E::load(b[x]));
  return total;
}

// acc[0..n) += w * row[x0 .. x0 + n).
template <typename S>
void axpyRow(ComputeOf<S> *acc, ComputeOf<S> w, const S *row, int64_t n) {
  for (int64_t x = 0; x < n; ++x)
    acc[x] += w * ComputeOf<S>(Elem<S>::load(row[x]));
}

} // namespace

// q, k, v[H, T, Dh] (any leading axes) -> out[H, T, Dh]:
// softmax(causal_mask(q k^T / sqrt(Dh))) v, one (head, query row) per task,
// in f32 for f32, bf16 and f16 storage (f64 for f64). A first pass over
// the visible keys finds the scores' maximum, keeping the scores of a row
// of up to kRowCache keys on the stack (a longer row recomputes them); a
// second accumulates exp(s - max) v in blocks of Dh on the stack, so the
// kernel needs no scratch space.
LogicalResult kernelAttention(const KernelArgs &args) {
  Heads hd(*args.in[0].type);
  int64_t heads = hd.heads, t = hd.t, dh = hd.dh;
  if (heads == 0)
    return success();
  return visitFloat(args.out.dtype(), [&]<typename S>() {
    using E = Elem<S>;
    using C = ComputeOf<S>;
    const S *q = args.in[0].as<S>(), *k = args.in[1].as<S>(),
            *v = args.in[2].as<S>();
    S *out = args.out.as<S>();
    C scale = C(1.0 / std::sqrt(static_cast<double>(dh)));
    args.pool.parallelFor(heads * t, kRowGrain, [&](int64_t b, int64_t e) {
      C acc[kBlock], scores[kRowCache];
      for (int64_t task = b; task < e; ++task) {
        int64_t h = task / t, i = task % t;
        const S *qi = q + task * dh;
        const S *kh = k + h * t * dh, *vh = v + h * t * dh;
        bool cached = i < kRowCache;
        C m = -C(kInf);
        for (int64_t j = 0; j <= i; ++j) {
          C s = dotRow(qi, kh + j * dh, dh) * scale;
          if (cached)
            scores[j] = s;
          if (s > m || std::isnan(s))
            m = s;
        }
        for (int64_t x0 = 0; x0 < dh; x0 += kBlock) {
          int64_t n = std::min(dh, x0 + kBlock) - x0;
          std::fill(acc, acc + n, C(0));
          C sum = 0;
          for (int64_t j = 0; j <= i; ++j) {
            C s = cached ? scores[j] : dotRow(qi, kh + j * dh, dh) * scale;
            C p = std::exp(s - m);
            sum += p;
            axpyRow(acc, p, vh + j * dh + x0, n);
          }
          for (int64_t x = 0; x < n; ++x)
            out[task * dh + x0 + x] = E::store(acc[x] / sum);
        }
      }
    });
    return success();
  });
}

// The row statistics of attention_grad, two per (head, row): the
// log-sum-exp of the row's scores and D = dy . y.
uint64_t attentionGradScratchBytes(const ir::Op &op) {
  Heads hd(op.operand(0)->type());
  return static_cast<uint64_t>(hd.heads * hd.t) * 2 * sizeof(double);
}

// q, k, v, y, dy[H, T, Dh] (any leading axes) -> [3, H, T, Dh] = dq, dk, dv.
// FlashAttention-2's backward on rows instead of tiles, in two passes that
// each own what they write (so no two tasks add into one row):
//  1. per (head, query row i): lse_i = log sum_j exp(s_ij) and
//     D_i = dy_i . y_i into the scratch space, then
//     dq_i = sum_{j <= i} ds_ij k_j, with p_ij = exp(s_ij - lse_i),
//     ds_ij = p_ij (dy_i . v_j - D_i) / sqrt(Dh);
//  2. per (head, key row j), from the statistics of every row i >= j:
//     dk_j = sum_{i >= j} ds_ij q_i and dv_j = sum_{i >= j} p_ij dy_i.
// Scores and products are computed in f32 for f32, bf16 and f16 storage
// (f64 for f64).
LogicalResult kernelAttentionGrad(const KernelArgs &args) {
  Heads hd(*args.in[0].type);
  int64_t heads = hd.heads, t = hd.t, dh = hd.dh;
  if (heads == 0)
    return success();
  if (args.scratchBytes < attentionGradScratchBytes(args.op))
    return args.fail("attention_grad needs " +
                     std::to_string(attentionGradScratchBytes(args.op)) +
                     " bytes of scratch space, got " +
                     std::to_string(args.scratchBytes));
  double *stats = reinterpret_cast<double *>(args.scratch);
  int64_t part = heads * t * dh; // elements of each of dq, dk, dv
  return visitFloat(args.out.dtype(), [&]<typename S>() {
    using E = Elem<S>;
    using C = ComputeOf<S>;
    const S *q = args.in[0].as<S>(), *k = args.in[1].as<S>(),
            *v = args.in[2].as<S>(), *y = args.in[3].as<S>(),
            *dy = args.in[4].as<S>();
    S *dq = args.out.as<S>(), *dk = dq + part, *dv = dq + 2 * part;
    C scale = C(1.0 / std::sqrt(static_cast<double>(dh)));

    args.pool.parallelFor(heads * t, kRowGrain, [&](int64_t b, int64_t e) {
      C acc[kBlock], scores[kRowCache];
      for (int64_t task = b; task < e; ++task) {
        int64_t h = task / t, i = task % t;
        const S *qi = q + task * dh, *dyi = dy + task * dh;
        const S *kh = k + h * t * dh, *vh = v + h * t * dh;
        bool cached = i < kRowCache;
        auto score = [&](int64_t j) {
          return cached ? scores[j] : dotRow(qi, kh + j * dh, dh) * scale;
        };
        // Online log-sum-exp over the visible keys (one pass).
        C m = -C(kInf), sum = 0;
        for (int64_t j = 0; j <= i; ++j) {
          C s = dotRow(qi, kh + j * dh, dh) * scale;
          if (cached)
            scores[j] = s;
          if (s > m || std::isnan(s)) {
            sum = sum * std::exp(m - s) + C(1);
            m = s;
          } else {
            sum += std::exp(s - m);
          }
        }
        C lse = m + std::log(sum);
        C dRow = dotRow(dyi, y + task * dh, dh);
        stats[2 * task] = lse;
        stats[2 * task + 1] = dRow;
        for (int64_t x0 = 0; x0 < dh; x0 += kBlock) {
          int64_t n = std::min(dh, x0 + kBlock) - x0;
          std::fill(acc, acc + n, C(0));
          for (int64_t j = 0; j <= i; ++j) {
            C p = std::exp(score(j) - lse);
            C ds = p * (dotRow(dyi, vh + j * dh, dh) - dRow) * scale;
            axpyRow(acc, ds, kh + j * dh + x0, n);
          }
          for (int64_t x = 0; x < n; ++x)
            dq[task * dh + x0 + x] = E::store(acc[x]);
        }
      }
    });

    args.pool.parallelFor(heads * t, kRowGrain, [&](int64_t b, int64_t e) {
      C accK[kBlock], accV[kBlock];
      for (int64_t task = b; task < e; ++task) {
        int64_t h = task / t, j = task % t;
        const S *kj = k + task * dh, *vj = v + task * dh;
        const S *qh = q + h * t * dh, *dyh = dy + h * t * dh;
        const double *sh = stats + 2 * h * t;
        for (int64_t x0 = 0; x0 < dh; x0 += kBlock) {
          int64_t n = std::min(dh, x0 + kBlock) - x0;
          std::fill(accK, accK + n, C(0));
          std::fill(accV, accV + n, C(0));
          for (int64_t i = j; i < t; ++i) {
            C lse = C(sh[2 * i]), dRow = C(sh[2 * i + 1]);
            C p = std::exp(dotRow(qh + i * dh, kj, dh) * scale - lse);
            C ds = p * (dotRow(dyh + i * dh, vj, dh) - dRow) * scale;
            axpyRow(accK, ds, qh + i * dh + x0, n);
            axpyRow(accV, p, dyh + i * dh + x0, n);
          }
          for (int64_t x = 0; x < n; ++x) {
            dk[task * dh + x0 + x] = E::store(accK[x]);
            dv[task * dh + x0 + x] = E::store(accV[x]);
          }
        }
      }
    });
    return success();
  });
}

} // namespace mgc::backend::cpu
