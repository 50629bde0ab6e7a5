// Evaluation of attention's fused backward, attention_grad: the reference
// the CPU and CUDA kernels are checked against, written as the textbook
// formulas in f64 with one row of probabilities at a time.
#include "ir/InterpreterKernels.h"

#include <cmath>
#include <limits>
#include <vector>

namespace mgc::ir::interp {

// q, k, v, y, dy[..., T, Dh] -> [3, ..., T, Dh] = [dq, dk, dv]. Per head,
// with s = q k^T / sqrt(Dh) causally masked, p = softmax(s) and
// D_i = dy_i . y_i (= sum_j p_ij dp_ij when y is the forward result):
//   dv = p^T dy,  dp = dy v^T,  ds = p * (dp - D) / sqrt(Dh),
//   dq = ds k,    dk = ds^T q.
LogicalResult evalAttentionGrad(EvalContext &ctx) {
  const HostTensor &q = ctx.in(0), &k = ctx.in(1), &v = ctx.in(2),
                   &y = ctx.in(3), &dy = ctx.in(4);
  int64_t t = q.type.shape[q.type.rank() - 2];
  int64_t dh = q.type.shape[q.type.rank() - 1];
  if (t == 0 || dh == 0) // nothing to compute: the result is empty
    return success();
  int64_t heads = q.type.size() / (t * dh);
  int64_t part = q.type.size(); // elements of one of dq, dk, dv
  double scale = 1.0 / std::sqrt(static_cast<double>(dh));
  double *dq = ctx.result.data.data();
  double *dk = dq + part, *dv = dq + 2 * part;
  std::vector<double> p(static_cast<size_t>(t));
  for (int64_t h = 0; h < heads; ++h) {
    int64_t base = h * t * dh;
    const double *qh = q.data.data() + base, *kh = k.data.data() + base,
                 *vh = v.data.data() + base, *yh = y.data.data() + base,
                 *dyh = dy.data.data() + base;
    for (int64_t i = 0; i < t; ++i) {
      const double *qi = qh + i * dh, *dyi = dyh + i * dh;
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j <= i; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < dh; ++e)
          dot += qi[e] * kh[j * dh + e];
        p[j] = dot * scale;
        if (p[j] > m || std::isnan(p[j]))
          m = p[j];
      }
      double sum = 0;
      for (int64_t j = 0; j <= i; ++j)
        sum += std::exp(p[j] - m);
      for (int64_t j = 0; j <= i; ++j)
        p[j] = std::exp(p[j] - m) / sum;
      double dRow = 0;
      for (int64_t e = 0; e < dh; ++e)
        dRow += dyi[e] * yh[i * dh + e];
      for (int64_t j = 0; j <= i; ++j) {
        double dp = 0;
        for (int64_t e = 0; e < dh; ++e)
          dp += dyi[e] * vh[j * dh + e];
        double ds = p[j] * (dp - dRow) * scale;
        for (int64_t e = 0; e < dh; ++e) {
          dq[base + i * dh + e] += ds * kh[j * dh + e];
          dk[base + j * dh + e] += ds * qi[e];
          dv[base + j * dh + e] += p[j] * dyi[e];
        }
      }
    }
  }
  return success();
}

} // namespace mgc::ir::interp
