// Attention and its fused backward. Neither kernel stores a [Tq, Tk]
// matrix: each task is one (head, row) and works through the row's scores
// one at a time, recomputing a score where a second pass needs it. Which
// keys a query sees, which key/value head it reads and where its mask
// entries are come from ir::AttentionDims, as in the interpreter.
#include "backend/cpu/Elem.h"
#include "backend/cpu/Kernels.h"
#include "ir/AttentionShape.h"

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

// The operands of an attention or attention_grad op in storage type S, and
// the scores s_ij = q_i . k_j / sqrt(Dh) + mask_ij in its compute type.
template <typename S> struct Operands {
  using C = ComputeOf<S>;
  ir::AttentionDims d;
  const S *q, *k, *v, *mask;
  C scale;

  Operands(const KernelArgs &args, unsigned maskAt)
      : d(ir::attentionDims(args.op)), q(args.in[0].as<S>()),
        k(args.in[1].as<S>()), v(args.in[2].as<S>()),
        mask(d.masked ? args.in[maskAt].as<S>() : nullptr),
        scale(C(1.0 / std::sqrt(static_cast<double>(d.dh)))) {}

  const S *qRow(int64_t h, int64_t i) const {
    return q + d.qRowOffset(h, i);
  }
  const S *kRow(int64_t h, int64_t j) const {
    return k + d.kvRowOffset(h, j);
  }
  const S *vRow(int64_t h, int64_t j) const {
    return v + d.kvRowOffset(h, j);
  }
  // The score of query row i (qi = qRow(h, i)) and key j of head h, whose
  // mask entries start at maskBase.
  C score(const S *qi, int64_t h, int64_t i, int64_t j,
          int64_t maskBase) const {
    C s = dotRow(qi, kRow(h, j), d.dh) * scale;
    if (mask)
      s += C(Elem<S>::load(mask[d.maskAt(maskBase, i, j)]));
    return s;
  }
};

} // namespace

// q[H, Tq, Dh], k, v[Hkv, Tk, Dh] (any leading axes) -> out[H, Tq, Dh]:
// softmax(s) v over the keys each row sees, one (head, query row) per task,
// in f32 for f32, bf16 and f16 storage (f64 for f64). A first pass over the
// visible keys finds the scores' maximum, keeping the scores of a row of up
// to kRowCache keys on the stack (a longer row recomputes them); a second
// accumulates exp(s - max) v in blocks of Dh on the stack, so the kernel
// needs no scratch space. A row with no visible key, or all of whose
// scores are -inf, is 0.
LogicalResult kernelAttention(const KernelArgs &args) {
  return visitFloat(args.out.dtype(), [&]<typename S>() {
    using E = Elem<S>;
    using C = ComputeOf<S>;
    Operands<S> a(args, 3);
    const ir::AttentionDims &d = a.d;
    int64_t dh = d.dh;
    S *out = args.out.as<S>();
    args.pool.parallelFor(d.heads * d.tq, kRowGrain, [&](int64_t b,
                                                          int64_t e) {
      C acc[kBlock], scores[kRowCache];
      for (int64_t task = b; task < e; ++task) {
        int64_t h = task / d.tq, i = task % d.tq;
        const S *qi = a.qRow(h, i);
        S *row = out + d.qRowOffset(h, i);
        int64_t end = d.keyEnd(i), base = d.masked ? d.maskBase(h) : 0;
        bool cached = end <= kRowCache;
        C m = -C(kInf);
        for (int64_t j = 0; j < end; ++j) {
          C s = a.score(qi, h, i, j, base);
          if (cached)
            scores[j] = s;
          if (s > m || std::isnan(s))
            m = s;
        }
        if (m == -C(kInf)) {
          std::fill(row, row + dh, E::store(C(0)));
          continue;
        }
        for (int64_t x0 = 0; x0 < dh; x0 += kBlock) {
          int64_t n = std::min(dh, x0 + kBlock) - x0;
          std::fill(acc, acc + n, C(0));
          C sum = 0;
          for (int64_t j = 0; j < end; ++j) {
            C s = cached ? scores[j] : a.score(qi, h, i, j, base);
            C p = std::exp(s - m);
            sum += p;
            axpyRow(acc, p, a.vRow(h, j) + x0, n);
          }
          for (int64_t x = 0; x < n; ++x)
            row[x0 + x] = E::store(acc[x] / sum);
        }
      }
    });
    return success();
  });
}

// The row statistics of attention_grad, two per (query head, row): the
// log-sum-exp of the row's scores and D = dy . y.
uint64_t attentionGradScratchBytes(const ir::Op &op) {
  ir::AttentionDims d = ir::attentionDims(op);
  return static_cast<uint64_t>(d.heads * d.tq) * 2 * sizeof(double);
}

// (q, k, v, y, dy[, mask]) -> [H, Tq + 2 Tk, Dh] (any leading axes): per
// query head h, the rows of dq, then those of dk and dv that come through
// h. FlashAttention-2's backward on rows instead of tiles, in two passes
// that each own what they write (so no two tasks add into one row):
//  1. per (head, query row i): lse_i = log sum_j exp(s_ij) and
//     D_i = dy_i . y_i into the scratch space, then
//     dq_i = sum_j ds_ij k_j, with p_ij = exp(s_ij - lse_i),
//     ds_ij = p_ij (dy_i . v_j - D_i) / sqrt(Dh);
//  2. per (head, key row j), from the statistics of every row i that sees
//     j: dk_j = sum_i ds_ij q_i and dv_j = sum_i p_ij dy_i.
// Scores and products are computed in f32 for f32, bf16 and f16 storage
// (f64 for f64). A row with no visible key (lse = -inf) adds nothing.
LogicalResult kernelAttentionGrad(const KernelArgs &args) {
  if (args.scratchBytes < attentionGradScratchBytes(args.op))
    return args.fail("attention_grad needs " +
                     std::to_string(attentionGradScratchBytes(args.op)) +
                     " bytes of scratch space, got " +
                     std::to_string(args.scratchBytes));
  double *stats = reinterpret_cast<double *>(args.scratch);
  return visitFloat(args.out.dtype(), [&]<typename S>() {
    using E = Elem<S>;
    using C = ComputeOf<S>;
    Operands<S> a(args, 5);
    const ir::AttentionDims &d = a.d;
    int64_t dh = d.dh;
    const S *y = args.in[3].as<S>(), *dy = args.in[4].as<S>();
    S *out = args.out.as<S>();

    args.pool.parallelFor(d.heads * d.tq, kRowGrain, [&](int64_t b,
                                                          int64_t e) {
      C acc[kBlock], scores[kRowCache];
      for (int64_t task = b; task < e; ++task) {
        int64_t h = task / d.tq, i = task % d.tq;
        const S *qi = a.qRow(h, i), *dyi = dy + d.qRowOffset(h, i);
        S *dq = out + d.dqRowOffset(h, i);
        int64_t end = d.keyEnd(i), base = d.masked ? d.maskBase(h) : 0;
        bool cached = end <= kRowCache;
        auto score = [&](int64_t j) {
          return cached ? scores[j] : a.score(qi, h, i, j, base);
        };
        // Online log-sum-exp over the visible keys (one pass); keys with a
        // score of -inf add nothing.
        C m = -C(kInf), sum = 0;
        for (int64_t j = 0; j < end; ++j) {
          C s = a.score(qi, h, i, j, base);
          if (cached)
            scores[j] = s;
          if (s > m || std::isnan(s)) {
            sum = sum * std::exp(m - s) + C(1);
            m = s;
          } else if (s != -C(kInf)) {
            sum += std::exp(s - m);
          }
        }
        C lse = m + std::log(sum);
        C dRow = dotRow(dyi, y + d.qRowOffset(h, i), dh);
        stats[2 * task] = lse;
        stats[2 * task + 1] = dRow;
        if (lse == -C(kInf)) {
          std::fill(dq, dq + dh, E::store(C(0)));
          continue;
        }
        for (int64_t x0 = 0; x0 < dh; x0 += kBlock) {
          int64_t n = std::min(dh, x0 + kBlock) - x0;
          std::fill(acc, acc + n, C(0));
          for (int64_t j = 0; j < end; ++j) {
            C p = std::exp(score(j) - lse);
            C ds = p * (dotRow(dyi, a.vRow(h, j), dh) - dRow) * a.scale;
            axpyRow(acc, ds, a.kRow(h, j) + x0, n);
          }
          for (int64_t x = 0; x < n; ++x)
            dq[x0 + x] = E::store(acc[x]);
        }
      }
    });

    args.pool.parallelFor(d.heads * d.tk, kRowGrain, [&](int64_t b,
                                                          int64_t e) {
      C accK[kBlock], accV[kBlock];
      for (int64_t task = b; task < e; ++task) {
        int64_t h = task / d.tk, j = task % d.tk;
        const S *vj = a.vRow(h, j);
        S *dk = out + d.dkRowOffset(h, j), *dv = out + d.dvRowOffset(h, j);
        const S *dyh = dy + d.qRowOffset(h, 0);
        const double *sh = stats + 2 * h * d.tq;
        int64_t base = d.masked ? d.maskBase(h) : 0;
        for (int64_t x0 = 0; x0 < dh; x0 += kBlock) {
          int64_t n = std::min(dh, x0 + kBlock) - x0;
          std::fill(accK, accK + n, C(0));
          std::fill(accV, accV + n, C(0));
          for (int64_t i = d.rowBegin(j); i < d.tq; ++i) {
            C lse = C(sh[2 * i]), dRow = C(sh[2 * i + 1]);
            if (lse == -C(kInf))
              continue;
            const S *qi = a.qRow(h, i);
            C p = std::exp(a.score(qi, h, i, j, base) - lse);
            C ds = p * (dotRow(dyh + i * dh, vj, dh) - dRow) * a.scale;
            axpyRow(accK, ds, qi + x0, n);
            axpyRow(accV, p, dyh + i * dh + x0, n);
          }
          for (int64_t x = 0; x < n; ++x) {
            dk[x0 + x] = E::store(accK[x]);
            dv[x0 + x] = E::store(accV[x]);
          }
        }
      }
    });
    return success();
  });
}

} // namespace mgc::backend::cpu
