// Evaluation of attention and its fused backward, attention_grad: the
// reference the CPU and CUDA kernels are checked against, written as the
// textbook formulas in f64 with one row of probabilities at a time.
#include "ir/AttentionShape.h"
#include "ir/InterpreterKernels.h"

#include <cmath>
#include <limits>
#include <vector>

namespace mgc::ir::interp {

namespace {

// Operands of an attention or attention_grad op seen through its dims.
struct AttentionView {
  AttentionDims d;
  const double *q, *k, *v, *mask;
  double scale;

  AttentionView(const EvalContext &ctx, unsigned maskAt)
      : d(attentionDims(ctx.op)), q(ctx.in(0).data.data()),
        k(ctx.in(1).data.data()), v(ctx.in(2).data.data()),
        mask(d.masked ? ctx.in(maskAt).data.data() : nullptr),
        scale(1.0 / std::sqrt(static_cast<double>(d.dh))) {}

  const double *qRow(int64_t h, int64_t i) const {
    return q + d.qRowOffset(h, i);
  }
  const double *kRow(int64_t h, int64_t j) const {
    return k + d.kvRowOffset(h, j);
  }
  const double *vRow(int64_t h, int64_t j) const {
    return v + d.kvRowOffset(h, j);
  }

  // p[j] = softmax_j(q_i . k_j * scale + mask_ij) over the keys query row i
  // of head h sees, 0 for the others. A row that sees no key, or whose
  // scores are all -inf (masked out), has all probabilities 0: its output
  // and gradients are 0 (FlashAttention's convention; PyTorch gives NaN).
  void probabilities(int64_t h, int64_t i, std::vector<double> &p) const {
    std::fill(p.begin(), p.end(), 0.0);
    int64_t end = d.keyEnd(i), base = d.masked ? d.maskBase(h) : 0;
    for (int64_t j = 0; j < end; ++j) {
      double dot = 0;
      for (int64_t e = 0; e < d.dh; ++e)
        dot += qRow(h, i)[e] * kRow(h, j)[e];
      p[j] = dot * scale + (mask ? mask[d.maskAt(base, i, j)] : 0.0);
    }
    RowStats r = rowStats(p.data(), end, 1);
    if (r.max == -std::numeric_limits<double>::infinity()) {
      std::fill(p.begin(), p.end(), 0.0);
      return;
    }
    for (int64_t j = 0; j < end; ++j)
      p[j] = std::exp(p[j] - r.max) / r.sumExp;
  }
};

} // namespace

// out_i = sum_j p_ij v_j for every query head and row.
LogicalResult evalAttention(EvalContext &ctx) {
  AttentionView a(ctx, 3);
  const AttentionDims &d = a.d;
  std::vector<double> p(static_cast<size_t>(d.tk));
  double *out = ctx.result.data.data();
  for (int64_t h = 0; h < d.heads; ++h)
    for (int64_t i = 0; i < d.tq; ++i) {
      a.probabilities(h, i, p);
      double *row = out + d.qRowOffset(h, i);
      for (int64_t j = 0; j < d.tk; ++j)
        for (int64_t e = 0; e < d.dh; ++e)
          row[e] += p[j] * a.vRow(h, j)[e];
    }
  return success();
}

// (q, k, v, y, dy[, mask]) -> [..., H, Tq + 2 Tk, Dh]: per query head, dq,
// then that head's part of dk and dv. With p = softmax(s) per row and
// D_i = dy_i . y_i (= sum_j p_ij dp_ij when y is the forward result):
//   dv = p^T dy,  dp = dy v^T,  ds = p * (dp - D) / sqrt(Dh),
//   dq = ds k,    dk = ds^T q.
LogicalResult evalAttentionGrad(EvalContext &ctx) {
  AttentionView a(ctx, 5);
  const AttentionDims &d = a.d;
  const double *y = ctx.in(3).data.data(), *dy = ctx.in(4).data.data();
  std::vector<double> p(static_cast<size_t>(d.tk));
  for (int64_t h = 0; h < d.heads; ++h) {
    double *dq = ctx.result.data.data() + d.dqRowOffset(h, 0);
    double *dk = ctx.result.data.data() + d.dkRowOffset(h, 0);
    double *dv = ctx.result.data.data() + d.dvRowOffset(h, 0);
    for (int64_t i = 0; i < d.tq; ++i) {
      a.probabilities(h, i, p);
      const double *qi = a.qRow(h, i);
      const double *dyi = dy + d.qRowOffset(h, i);
      const double *yi = y + d.qRowOffset(h, i);
      double dRow = 0;
      for (int64_t e = 0; e < d.dh; ++e)
        dRow += dyi[e] * yi[e];
      for (int64_t j = 0; j < d.tk; ++j) {
        if (p[j] == 0)
          continue; // not visible, masked out or underflowed: no gradient
        double dp = 0;
        for (int64_t e = 0; e < d.dh; ++e)
          dp += dyi[e] * a.vRow(h, j)[e];
        double ds = p[j] * (dp - dRow) * a.scale;
        for (int64_t e = 0; e < d.dh; ++e) {
          dq[i * d.dh + e] += ds * a.kRow(h, j)[e];
          dk[j * d.dh + e] += ds * qi[e];
          dv[j * d.dh + e] += p[j] * dyi[e];
        }
      }
    }
  }
  return success();
}

} // namespace mgc::ir::interp
