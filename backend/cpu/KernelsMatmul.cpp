// matmul through OpenBLAS GEMM. The result is cut into tiles of a fixed
// size (blocks of rows, and of columns when there are few rows; never
// depending on the thread count), each tile one GEMM call with OpenBLAS
// itself single-threaded, so results are bit-identical whatever the number
// of threads. 16-bit floats are widened to f32 in scratch space,
// multiplied with sgemm, and rounded back. matmul_epilogue runs the same
// GEMM calls and applies its epilogue to each tile while it is in cache, rounding as the unfused ops would (ir/MatmulEpilogue.h), so it
// gives the unfused matmul, add and gelu (or gelu_grad) bit for bit.
#include "backend/CollectivePlan.h"
#include "backend/cpu/Elem.h"
#include "backend/cpu/Kernels.h"

#include "ir/MatmulEpilogue.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <type_traits>

namespace mgc::backend::cpu {

namespace {

constexpr int64_t kRowBlock = 64;
// With fewer row blocks than this, columns are cut into blocks too.
constexpr int64_t kFewRowBlocks = 8;
constexpr int64_t kColBlock = 256;

struct MatmulShape {
  int64_t batches, m, k, n;
  bool sharedB; // b is [K, N], used by every batch
  // a is stored [K, M] (2-D), b [N, K] (2-D): read through GEMM's
  // transpose flags (KernelArgs::transposed).
  bool transA = false, transB = false;
};

// c[m, n] (rows of ldc elements) = op(a) @ op(b): a points at row r0 of
// op(a) (a column of a transposed a), b at column c0 of op(b) (a row of a
// transposed b); lda and ldb are the stored rows' lengths.
template <typename T>
void gemm(const T *a, const T *b, T *c, int64_t m, int64_t n, int64_t k,
          const MatmulShape &s, int64_t lda, int64_t ldb, int64_t ldc) {
  auto ta = s.transA ? CblasTrans : CblasNoTrans;
  auto tb = s.transB ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, ta, tb, int(m), int(n), int(k), 1.0f, a,
                int(lda), b, int(ldb), 0.0f, c, int(ldc));
  else
    cblas_dgemm(CblasRowMajor, ta, tb, int(m), int(n), int(k), 1.0, a,
                int(lda), b, int(ldb), 0.0, c, int(ldc));
}

// c = a @ b in T (float or double), tiles of c in parallel: blocks of
// kRowBlock rows, and with few row blocks also of kColBlock columns, so
// that a batch of 64 rows still keeps every core busy. The tiling depends
// only on the shapes, never on the thread count. A shared b makes
// [..., M, K] @ [K, N] one [batches * M, K] GEMM. `after(rows, cols)` runs
// on the tile of c (rows [r0, r1) of the whole c, columns [c0, c1)) that a
// task has just written.
template <typename T, typename After>
void gemmBlocks(const T *a, const T *b, T *c, const MatmulShape &s,
                ThreadPool &pool, After after) {
  int64_t rows = s.sharedB ? s.batches * s.m : s.m;
  int64_t groups = s.sharedB ? 1 : s.batches;
  int64_t rowBlocks = (rows + kRowBlock - 1) / kRowBlock;
  int64_t colBlock = rowBlocks < kFewRowBlocks ? kColBlock : s.n;
  int64_t colBlocks = std::max<int64_t>(1, (s.n + colBlock - 1) / colBlock);
  int64_t tiles = rowBlocks * colBlocks;
  pool.parallelFor(groups * tiles, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t task = lo; task < hi; ++task) {
      int64_t g = task / tiles, tile = task % tiles;
      int64_t r0 = (tile / colBlocks) * kRowBlock, r1 = std::min(rows, r0 + kRowBlock);
      int64_t c0 = (tile % colBlocks) * colBlock, c1 = std::min(s.n, c0 + colBlock);
      // Rows r0.. of op(a): of a transposed a (2-D, one group), its
      // columns r0..; columns c0.. of op(b): of a transposed b, its rows.
      const T *rowsOfA = s.transA ? a + r0 : a + (g * rows + r0) * s.k;
      const T *colsOfB = b + g * s.k * s.n + (s.transB ? c0 * s.k : c0);
      gemm(rowsOfA, colsOfB, c + (g * rows + r0) * s.n + c0, r1 - r0, c1 - c0,
           s.k, s, s.transA ? rows : s.k, s.transB ? s.k : s.n, s.n);
      after(g * rows + r0, g * rows + r1, c0, c1);
    }
  });
}
template <typename T>
void gemmBlocks(const T *a, const T *b, T *c, const MatmulShape &s,
                ThreadPool &pool) {
  gemmBlocks(a, b, c, s, pool, [](int64_t, int64_t, int64_t, int64_t) {});
}

MatmulShape matmulShape(const KernelArgs &args) {
  const ir::TensorType &at = *args.in[0].type, &bt = *args.in[1].type;
  MatmulShape s;
  s.transA = args.transposed[0];
  s.transB = args.transposed[1];
  s.m = at.shape[at.rank() - (s.transA ? 1 : 2)];
  s.k = at.shape[at.rank() - (s.transA ? 2 : 1)];
  s.n = bt.shape[bt.rank() - (s.transB ? 2 : 1)];
  s.batches = s.m * s.n == 0 ? 0 : args.out.size() / (s.m * s.n);
  s.sharedB = bt.rank() == 2;
  return s;
}

// The tile rows [r0, r1) x columns [c0, c1) of c (rows of n) from their
// products: acc in f32 (16-bit types, then rounded to S as the unfused
// matmul stores them) or, when acc is null, c itself; x is bias[n] or h
// (gelu_grad).
template <typename S>
void epilogueRange(ir::MatmulEpilogue e, const float *acc, S *c, const S *x,
                   int64_t n, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  using E = Elem<S>;
  using C = ComputeOf<S>;
  auto round = [](C v) { return E::load(E::store(v)); };
  // One loop per epilogue and source of the products, chosen before it, so
  // that the loop over a row's columns vectorises.
  auto rows = [&]<ir::MatmulEpilogue K, bool kFromAcc>() {
    for (int64_t row = r0; row < r1; ++row) {
      S *cRow = c + row * n;
      const S *xRow = K == ir::MatmulEpilogue::GeluGrad ? x + row * n : x;
      const float *accRow = kFromAcc ? acc + row * n : nullptr;
      for (int64_t j = c0; j < c1; ++j) {
        C p = kFromAcc ? round(static_cast<C>(accRow[j])) : E::load(cRow[j]);
        cRow[j] =
            E::store(ir::applyMatmulEpilogue<C>(K, p, E::load(xRow[j]), round));
      }
    }
  };
  auto withSource = [&]<ir::MatmulEpilogue K>() {
    if (acc)
      rows.template operator()<K, true>();
    else
      rows.template operator()<K, false>();
  };
  switch (e) {
  case ir::MatmulEpilogue::Bias:
    return withSource.template operator()<ir::MatmulEpilogue::Bias>();
  case ir::MatmulEpilogue::BiasGelu:
    return withSource.template operator()<ir::MatmulEpilogue::BiasGelu>();
  case ir::MatmulEpilogue::GeluGrad:
    return withSource.template operator()<ir::MatmulEpilogue::GeluGrad>();
  }
}

} // namespace

void singleThreadedBlas() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

uint64_t scratchBytes(const ir::Op &op) {
  if (op.kind() == ir::OpKind::AttentionGrad)
    return attentionGradScratchBytes(op);
  if (op.kind() == ir::OpKind::Conv2d || op.kind() == ir::OpKind::Conv2dGradX ||
      op.kind() == ir::OpKind::Conv2dGradW)
    return convScratchBytes(op);
  if (op.kind() != ir::OpKind::Matmul &&
      op.kind() != ir::OpKind::MatmulEpilogue)
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
  MatmulShape s = matmulShape(args);
  if (s.batches == 0) // an empty result
    return success();
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

// a[..., M, K] @ b -> c[..., M, N], then the epilogue: + bias[N],
// gelu(+ bias[N]) or gelu_grad(c, h[..., M, N]).
LogicalResult kernelMatmulEpilogue(const KernelArgs &args) {
  std::optional<ir::MatmulEpilogue> e =
      ir::parseMatmulEpilogue(args.op.attrs().getString("epilogue"));
  if (!e)
    return args.fail("matmul_epilogue: unknown epilogue '" +
                     args.op.attrs().getString("epilogue") + "'");
  singleThreadedBlas();
  MatmulShape s = matmulShape(args);
  if (s.batches == 0) // an empty result
    return success();
  return visitFloat(args.out.dtype(), [&]<typename S>() {
    const S *a = args.in[0].as<S>(), *b = args.in[1].as<S>();
    const S *x = args.in[2].as<S>();
    S *c = args.out.as<S>();
    int64_t nc = args.out.size();
    if (s.k == 0) { // an empty contraction: the epilogue of zeros
      std::memset(c, 0, static_cast<size_t>(nc) * sizeof(S));
      args.pool.parallelFor(nc / s.n, kRowGrain, [&](int64_t lo, int64_t hi) {
        epilogueRange<S>(*e, nullptr, c, x, s.n, lo, hi, 0, s.n);
      });
    } else if constexpr (std::is_same_v<S, float> ||
                         std::is_same_v<S, double>) {
      gemmBlocks(a, b, c, s, args.pool,
                 [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
                   epilogueRange<S>(*e, nullptr, c, x, s.n, r0, r1, c0, c1);
                 });
    } else {
      // bf16 / f16: widen into scratch, sgemm, then round each block and
      // apply the epilogue.
      using E = Elem<S>;
      int64_t na = args.in[0].size(), nb = args.in[1].size();
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
      gemmBlocks(fa, fb, fc, s, args.pool,
                 [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
                   epilogueRange<S>(*e, fc, c, x, s.n, r0, r1, c0, c1);
                 });
    }
    return success();
  });
}

} // namespace mgc::backend::cpu
