// matmul through OpenBLAS GEMM. Rows are cut into blocks of a fixed size
// (never depending on the thread count), each block one GEMM call with
// OpenBLAS itself single-threaded, so results are bit-identical whatever
// the number of threads. 16-bit floats are widened to f32 in scratch space,
// multiplied with sgemm, and rounded back.
#include "backend/cpu/Elem.h"
#include "backend/cpu/Kernels.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <mutex>

namespace mgc::backend::cpu {

namespace {

constexpr int64_t kRowBlock = 64;

void singleThreadedBlas() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

void gemm(const float *a, const float *b, float *c, int64_t m, int64_t n,
          int64_t k) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(m), int(n), int(k),
              1.0f, a, int(k), b, int(n), 0.0f, c, int(n));
}
void gemm(const double *a, const double *b, double *c, int64_t m, int64_t n,
          int64_t k) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(m), int(n), int(k),
              1.0, a, int(k), b, int(n), 0.0, c, int(n));
}

struct MatmulShape {
  int64_t batches, m, k, n;
  bool sharedB; // b is [K, N], used by every batch
};

// c = a @ b in T (float or double), blocks of rows in parallel. A shared b
// makes [..., M, K] @ [K, N] one [batches * M, K] GEMM.
template <typename T>
void gemmBlocks(const T *a, const T *b, T *c, const MatmulShape &s,
                ThreadPool &pool) {
  int64_t rows = s.sharedB ? s.batches * s.m : s.m;
  int64_t groups = s.sharedB ? 1 : s.batches;
  int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  pool.parallelFor(groups * blocks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t task = lo; task < hi; ++task) {
      int64_t g = task / blocks, r0 = (task % blocks) * kRowBlock;
      int64_t r1 = std::min(rows, r0 + kRowBlock);
      gemm(a + (g * rows + r0) * s.k, b + g * s.k * s.n,
           c + (g * rows + r0) * s.n, r1 - r0, s.n, s.k);
    }
  });
}

} // namespace

uint64_t scratchBytes(const ir::Op &op) {
  if (op.kind() == ir::OpKind::AttentionGrad)
    return attentionGradScratchBytes(op);
  if (op.kind() != ir::OpKind::Matmul)
    return collectiveScratchBytes(op);
  ir::DType dt = op.type().dtype;
  if (dt != ir::DType::BF16 && dt != ir::DType::F16)
    return 0;
  uint64_t elems = static_cast<uint64_t>(op.operand(0)->type().size()) +
                   static_cast<uint64_t>(op.operand(1)->type().size()) +
                   static_cast<uint64_t>(op.type().size());
  return elems * sizeof(float);
}

// a[..., M, K] @ b[K, N] or b[..., K, N] -> c[..., M, N]
LogicalResult kernelMatmul(const KernelArgs &args) {
  singleThreadedBlas();
  const ir::TensorType &at = *args.in[0].type, &bt = *args.in[1].type;
  MatmulShape s;
  s.m = at.shape[at.rank() - 2];
  s.k = at.shape[at.rank() - 1];
  s.n = bt.shape[bt.rank() - 1];
  s.batches = s.m * s.n == 0 ? 0 : args.out.size() / (s.m * s.n);
  if (s.batches == 0) // an empty result
    return success();
  s.sharedB = bt.rank() == 2;
  if (s.k == 0) { // an empty contraction: zeros
    std::memset(args.out.data, 0,
                static_cast<size_t>(args.out.size()) *
                    ir::dtypeBytes(args.out.dtype()));
    return success();
  }
  return visitDType(args.out.dtype(), [&]<typename S>() {
    using E = Elem<S>;
    const S *a = args.in[0].as<S>(), *b = args.in[1].as<S>();
    S *c = args.out.as<S>();
    if constexpr (std::is_same_v<S, float> || std::is_same_v<S, double>) {
      gemmBlocks(a, b, c, s, args.pool);
    } else if constexpr (kIsInt<S>) {
      // Integer matmul (rare): a plain loop in int64, wrapping.
      int64_t bStride = s.sharedB ? 0 : s.k * s.n;
      for (int64_t g = 0; g < s.batches; ++g)
        for (int64_t i = 0; i < s.m; ++i)
          for (int64_t j = 0; j < s.n; ++j) {
            uint64_t acc = 0;
            for (int64_t x = 0; x < s.k; ++x)
              acc +=
                  static_cast<uint64_t>(E::load(a[(g * s.m + i) * s.k + x])) *
                  static_cast<uint64_t>(E::load(b[g * bStride + x * s.n + j]));
            c[(g * s.m + i) * s.n + j] = E::store(static_cast<int64_t>(acc));
          }
    } else {
      // bf16 / f16: widen into scratch, sgemm, round back.
      int64_t na = args.in[0].size(), nb = args.in[1].size(),
              nc = args.out.size();
      float *fa = reinterpret_cast<float *>(args.scratch);
      float *fb = fa + na, *fc = fb + nb;
      auto widen = [&](const S *src, float *dst, int64_t count) {
        args.pool.parallelFor(count, kElementGrain,
                              [&](int64_t lo, int64_t hi) {
                                for (int64_t i = lo; i < hi; ++i)
                                  dst[i] = E::load(src[i]);
                              });
      };
      widen(a, fa, na);
      widen(b, fb, nb);
      gemmBlocks(fa, fb, fc, s, args.pool);
      args.pool.parallelFor(nc, kElementGrain, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i)
          c[i] = E::store(fc[i]);
      });
    }
    return success();
  });
}

} // namespace mgc::backend::cpu
