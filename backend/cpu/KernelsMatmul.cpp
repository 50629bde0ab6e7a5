// matmul through OpenBLAS GEMM. The result is cut into tiles of a fixed
// size (blocks of rows, and of columns when there are few rows; never
// depending on the thread count), each tile one GEMM call with OpenBLAS
// itself single-threaded, so results are bit-identical whatever the number
// of threads. bf16 products are summed in f32 by AVX512_BF16's dot
// products or their exact emulation (GemmBF16.h); f16 is widened to f32 in
// scratch space and multiplied with sgemm; both are rounded back tile by
// tile. matmul_epilogue runs the same tiles and applies its epilogue to
// each while it is in cache, rounding as the unfused ops would
// (ir/MatmulEpilogue.h), so it gives the unfused matmul, add and gelu (or
// gelu_grad) bit for bit.
#include "backend/CollectivePlan.h"
#include "backend/cpu/Elem.h"
#include "backend/cpu/GemmBF16.h"
#include "backend/cpu/Kernels.h"

#include "ir/MatmulEpilogue.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <type_traits>

namespace mgc::backend::cpu {

namespace {

constexpr int64_t kRowBlock = 128;
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

// One tile of c = op(a) @ op(b): rows [r0, r1) of group g's rows of c,
// columns [c0, c1). A shared b makes [..., M, K] @ [K, N] one group of
// batches * M rows.
struct MatmulTile {
  int64_t g, r0, r1, c0, c1;
  int64_t rows; // rows of c per group
  // Offsets of the tile's first row of op(a) (of a transposed a, 2-D and
  // one group: its column r0), its first column of op(b) (of a transposed
  // b: its row c0), and its first element of c.
  int64_t aOffset(const MatmulShape &s) const {
    return s.transA ? r0 : (g * rows + r0) * s.k;
  }
  int64_t bOffset(const MatmulShape &s) const {
    return g * s.k * s.n + (s.transB ? c0 * s.k : c0);
  }
  int64_t cOffset(const MatmulShape &s) const {
    return (g * rows + r0) * s.n + c0;
  }
  // The stored rows' lengths of a and b.
  int64_t lda(const MatmulShape &s) const { return s.transA ? rows : s.k; }
  int64_t ldb(const MatmulShape &s) const { return s.transB ? s.k : s.n; }
};

// The groups of c, one per b (one when b is shared by every batch).
int64_t groupsOf(const MatmulShape &s) { return s.sharedB ? 1 : s.batches; }

// Calls tile(t) for every tile of c, in parallel: blocks of kRowBlock
// rows, and with few row blocks also of kColBlock columns, so that a batch
// of 64 or 256 rows still keeps several cores busy. The tiling depends
// only on the shapes, never on the thread count.
template <typename Tile>
void forTiles(const MatmulShape &s, ThreadPool &pool, Tile tile) {
  int64_t rows = s.sharedB ? s.batches * s.m : s.m;
  int64_t groups = groupsOf(s);
  int64_t rowBlocks = (rows + kRowBlock - 1) / kRowBlock;
  int64_t colBlock = rowBlocks < kFewRowBlocks ? kColBlock : s.n;
  int64_t colBlocks = std::max<int64_t>(1, (s.n + colBlock - 1) / colBlock);
  int64_t tiles = rowBlocks * colBlocks;
  pool.parallelFor(groups * tiles, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t task = lo; task < hi; ++task) {
      MatmulTile t;
      t.g = task / tiles;
      int64_t i = task % tiles;
      t.rows = rows;
      t.r0 = (i / colBlocks) * kRowBlock;
      t.r1 = std::min(rows, t.r0 + kRowBlock);
      t.c0 = (i % colBlocks) * colBlock;
      t.c1 = std::min(s.n, t.c0 + colBlock);
      tile(t);
    }
  });
}

// c = a @ b in T (float or double), one GEMM call per tile. `after(r0, r1,
// c0, c1)` runs on the tile of c (rows [r0, r1) of the whole c) that a task
// has just written.
template <typename T, typename After>
void gemmBlocks(const T *a, const T *b, T *c, const MatmulShape &s,
                ThreadPool &pool, After after) {
  forTiles(s, pool, [&](const MatmulTile &t) {
    gemm(a + t.aOffset(s), b + t.bOffset(s), c + t.cOffset(s), t.r1 - t.r0,
         t.c1 - t.c0, s.k, s, t.lda(s), t.ldb(s), s.n);
    after(t.g * t.rows + t.r0, t.g * t.rows + t.r1, t.c0, t.c1);
  });
}
template <typename T>
void gemmBlocks(const T *a, const T *b, T *c, const MatmulShape &s,
                ThreadPool &pool) {
  gemmBlocks(a, b, c, s, pool, [](int64_t, int64_t, int64_t, int64_t) {});
}

// c = a @ b for bf16 a and b into f32 c (gemmBF16Packed), over the same
// tiles, every group of b packed first (into `packed`, in parallel);
// `after` as gemmBlocks's.
template <typename After>
void gemmBlocksBF16(const BF16 *a, const BF16 *b, float *c, uint32_t *packed,
                    const MatmulShape &s, ThreadPool &pool, After after) {
  const uint16_t *ab = &a->bits, *bb = &b->bits;
  int64_t words = bf16PackedWords(s.k, s.n); // per group
  int64_t blocks = (s.n + kBF16Columns - 1) / kBF16Columns;
  pool.parallelFor(groupsOf(s) * blocks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t task = lo; task < hi; ++task) {
      int64_t g = task / blocks, q = task % blocks;
      packBF16({bb + g * s.k * s.n, s.transB ? s.k : s.n, s.transB}, s.k, s.n,
               q, q + 1, packed + g * words);
    }
  });
  forTiles(s, pool, [&](const MatmulTile &t) {
    gemmBF16Packed({ab + t.aOffset(s), t.lda(s), s.transA},
                   packed + t.g * words, s.k, t.c0, t.c1, c + t.cOffset(s),
                   s.n, t.r1 - t.r0);
    after(t.g * t.rows + t.r0, t.g * t.rows + t.r1, t.c0, t.c1);
  });
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

// c = a @ b for 16-bit a and b (S), each tile's products in f32 into the
// scratch space (of the whole c), then after(r0, r1, c0, c1) on the tile:
// bf16 through gemmBF16, f16 widened to f32 (in the scratch space after the
// products) and multiplied with sgemm.
template <typename S, typename After>
void gemm16(const KernelArgs &args, const MatmulShape &s, After after) {
  const S *a = args.in[0].as<S>(), *b = args.in[1].as<S>();
  float *products = reinterpret_cast<float *>(args.scratch);
  if constexpr (std::is_same_v<S, BF16>) {
    auto *packed = reinterpret_cast<uint32_t *>(products + args.out.size());
    gemmBlocksBF16(a, b, products, packed, s, args.pool, after);
  } else {
    int64_t na = args.in[0].size(), nb = args.in[1].size();
    float *fa = products + args.out.size(), *fb = fa + na;
    auto widen = [&](const S *src, float *dst, int64_t count) {
      args.pool.parallelFor(count, kElementGrain, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i)
          dst[i] = Elem<S>::load(src[i]);
      });
    };
    widen(a, fa, na);
    widen(b, fb, nb);
    gemmBlocks(fa, fb, products, s, args.pool, after);
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
  if (op.kind() == ir::OpKind::CrossEntropy)
    return crossEntropyScratchBytes(op);
  if (op.kind() == ir::OpKind::Conv2d || op.kind() == ir::OpKind::Conv2dGradX ||
      op.kind() == ir::OpKind::Conv2dGradW)
    return convScratchBytes(op);
  if (op.kind() != ir::OpKind::Matmul &&
      op.kind() != ir::OpKind::MatmulEpilogue)
    return collectiveScratchBytes(op);
  // 16-bit storage: the f32 products (gemm16), then for bf16 every group
  // of b packed (as many words as b has elements, and the padding of the
  // last block of columns) and for f16 the widened operands.
  ir::DType dt = op.type().dtype;
  if (dt != ir::DType::BF16 && dt != ir::DType::F16)
    return 0;
  const ir::TensorType &bt = op.operand(1)->type();
  uint64_t elems = static_cast<uint64_t>(op.type().size());
  if (dt == ir::DType::F16)
    elems += static_cast<uint64_t>(op.operand(0)->type().size()) +
             static_cast<uint64_t>(bt.size());
  else if (bt.rank() >= 2) {
    int64_t k = bt.shape[bt.rank() - 2], n = bt.shape[bt.rank() - 1];
    int64_t groups = k * n == 0 ? 0 : bt.size() / (k * n);
    elems += static_cast<uint64_t>(groups * bf16PackedWords(k, n));
  }
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
      // bf16 / f16: f32 products, each tile rounded as it is done.
      const float *products = reinterpret_cast<const float *>(args.scratch);
      gemm16<S>(args, s, [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
        for (int64_t row = r0; row < r1; ++row)
          for (int64_t j = c0; j < c1; ++j)
            c[row * s.n + j] = E::store(products[row * s.n + j]);
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
      // bf16 / f16: f32 products, each tile rounded and given the epilogue
      // as it is done.
      const float *products = reinterpret_cast<const float *>(args.scratch);
      gemm16<S>(args, s, [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
        epilogueRange<S>(*e, products, c, x, s.n, r0, r1, c0, c1);
      });
    }
    return success();
  });
}

} // namespace mgc::backend::cpu
