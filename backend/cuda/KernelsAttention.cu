// Attention and its fused backward as flash-style tiled kernels
// (FlashAttention-2's algorithm on CUDA cores): no [T, T] matrix is ever
// written to memory. Tiles of kTile query rows and kTile key rows are staged
// in shared memory in the compute type (f32; f64 for f64 storage); a block
// of 16 x 16 threads computes one kTile x kTile block of scores, each thread
// two rows by two columns, and accumulates output rows of up to kMaxDh
// columns in registers (two rows by kMaxDh / 16 columns per thread). Every
// sum has a fixed order, so results are the same run to run. Which keys a
// query sees, which key/value head it reads and its mask entries come from
// ir::AttentionDims, as on the CPU; a row that sees no key is 0.
#include "backend/cuda/DeviceCommon.cuh"

#include <cmath>

namespace mgc::backend::cuda {

namespace {

constexpr int kTile = 32;                      // rows of a query or key tile
constexpr int kSide = 16;                      // threads per side of the block
constexpr int kBlock = kSide * kSide;          // threads per block
constexpr int kPer = kTile / kSide;            // rows (and columns) per thread
constexpr int kCols = kMaxAttentionDh / kSide; // output columns per thread
constexpr int kLdP = kTile + 1;                // row stride of a score tile

static_assert(kTile % kSide == 0 && kMaxAttentionDh % kSide == 0,
              "tiles split evenly among the threads");

__device__ inline float expC(float x) { return expf(x); }
__device__ inline double expC(double x) { return exp(x); }
__device__ inline float logC(float x) { return logf(x); }
__device__ inline double logC(double x) { return log(x); }
__device__ inline float maxC(float a, float b) { return fmaxf(a, b); }
__device__ inline double maxC(double a, double b) { return fmax(a, b); }

// Reductions over the 16 threads of a half warp (one row of the block:
// threadIdx.x = ty * 16 + tx, so a row's threads are lanes 0-15 or 16-31).
template <typename C> __device__ inline C rowMax(C v) {
  for (int o = kSide / 2; o > 0; o >>= 1)
    v = maxC(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
template <typename C> __device__ inline C rowSum(C v) {
  for (int o = kSide / 2; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Rows r0 .. r0 + kTile - 1 of one head's [t, dh] matrix into a tile of
// row stride dh + 1 (odd for even dh, so that threads reading one column
// of different rows hit different banks); rows at or past t are zeros.
template <typename S, typename C>
__device__ inline void loadTile(C *tile, const S *m, int64_t r0, int64_t t,
                                int dh) {
  int ld = dh + 1;
  for (int n = threadIdx.x; n < kTile * dh; n += kBlock) {
    int r = n / dh, x = n % dh;
    tile[r * ld + x] =
        r0 + r < t ? C(Elem<S>::load(m[(r0 + r) * dh + x])) : C(0);
  }
}

// a . b of two tile rows.
template <typename C>
__device__ inline C dotRows(const C *a, const C *b, int dh) {
  C acc = 0;
  for (int x = 0; x < dh; ++x)
    acc += a[x] * b[x];
  return acc;
}

// acc[i][c] += sum_j w[(row0 + i * kSide) * kLdP + j] * m[j * ld + tx + c * 16]
// over the kTile rows j of tile m: a block of scores times a value tile.
template <typename C>
__device__ __forceinline__ void accumulate(C (&acc)[kPer][kCols], const C *w,
                                           int row0, const C *m, int dh,
                                           int tx) {
  int ld = dh + 1;
  for (int j = 0; j < kTile; ++j) {
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      C wij = w[(row0 + i * kSide) * kLdP + j];
#pragma unroll
      for (int c = 0; c < kCols; ++c)
        if (tx + c * kSide < dh)
          acc[i][c] += wij * m[j * ld + tx + c * kSide];
    }
  }
}

// Writes rows r0 + ty + i * 16 (those below t) of acc * factor[i].
template <typename S, typename C>
__device__ __forceinline__ void storeRows(S *out, const C (&acc)[kPer][kCols],
                                          const C (&factor)[kPer], int64_t r0,
                                          int64_t t, int dh, int ty, int tx) {
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    int64_t r = r0 + ty + i * kSide;
    if (r >= t)
      continue;
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      int x = tx + c * kSide;
      if (x < dh)
        out[r * dh + x] =
            Elem<S>::store(static_cast<ComputeOf<S>>(acc[i][c] * factor[i]));
    }
  }
}

// The score of query row `row` and key `col` of head h (mask entries from
// maskBase), or -inf when the key is past the end, not visible or the row
// is past the end; qi and kj are the rows in shared memory.
template <typename S, typename C>
__device__ inline C scoreAt(const ir::AttentionDims &d, const C *qi,
                            const C *kj, const S *mask, int64_t maskBase,
                            int64_t row, int64_t col, C scale) {
  if (row >= d.tq || col >= d.tk || !d.visible(row, col))
    return C(-INFINITY);
  C s = dotRows(qi, kj, static_cast<int>(d.dh)) * scale;
  if (mask)
    s += C(Elem<S>::load(mask[d.maskAt(maskBase, row, col)]));
  return s;
}

// exp(s - m) for a running maximum m that may still be -inf (no visible
// key yet): 0 for s = -inf rather than NaN.
template <typename C> __device__ inline C expFrom(C s, C m) {
  return expC(s - (m == C(-INFINITY) ? C(0) : m));
}

// Keys [0, keyEnd) that any of query rows q0 .. q0 + kTile - 1 sees.
__device__ inline int64_t tileKeyEnd(const ir::AttentionDims &d, int64_t q0) {
  int64_t last = q0 + kTile < d.tq ? q0 + kTile - 1 : d.tq - 1;
  return d.keyEnd(last);
}

// Forward: one block per (head, query tile), heavy tiles (near the end of
// the sequence) first. For each key tile a row of the tile sees: the
// scores, the online softmax (running max m and sum l per row, the
// accumulated output rescaled by exp(m_old - m_new)), then P V into
// registers. Shared memory: q, k, v tiles and one score tile.
template <typename S, typename C>
__global__ void __launch_bounds__(kBlock)
    flashForward(ir::AttentionDims d, const S *q, const S *k, const S *v,
                 const S *mask, S *out, C scale) {
  extern __shared__ double smem[];
  int dh = static_cast<int>(d.dh), ld = dh + 1;
  C *sQ = reinterpret_cast<C *>(smem);
  C *sK = sQ + kTile * ld, *sV = sK + kTile * ld, *sP = sV + kTile * ld;
  int ty = threadIdx.x / kSide, tx = threadIdx.x % kSide;
  int64_t tiles = (d.tq + kTile - 1) / kTile;
  for (int64_t task = blockIdx.x; task < d.heads * tiles; task += gridDim.x) {
    int64_t h = task / tiles, q0 = (tiles - 1 - task % tiles) * kTile;
    int64_t qBase = d.qRowOffset(h, 0), kvBase = d.kvRowOffset(h, 0);
    int64_t maskBase = mask ? d.maskBase(h) : 0;
    __syncthreads(); // the previous task has read its tiles
    loadTile(sQ, q + qBase, q0, d.tq, dh);
    C m[kPer], l[kPer], acc[kPer][kCols];
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      m[i] = -INFINITY;
      l[i] = 0;
#pragma unroll
      for (int c = 0; c < kCols; ++c)
        acc[i][c] = 0;
    }
    int64_t kEnd = tileKeyEnd(d, q0);
    for (int64_t k0 = 0; k0 < kEnd; k0 += kTile) {
      __syncthreads(); // sK, sV and sP of the previous tile are consumed
      loadTile(sK, k + kvBase, k0, d.tk, dh);
      loadTile(sV, v + kvBase, k0, d.tk, dh);
      __syncthreads();
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        int r = ty + i * kSide;
        C s[kPer];
        C tileMax = -INFINITY;
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
          int c = tx + j * kSide;
          s[j] = scoreAt(d, sQ + r * ld, sK + c * ld, mask, maskBase, q0 + r,
                         k0 + c, scale);
          tileMax = maxC(tileMax, s[j]);
        }
        C mNew = maxC(m[i], rowMax(tileMax));
        C sum = 0;
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
          C p = expFrom(s[j], mNew);
          sP[r * kLdP + tx + j * kSide] = p;
          sum += p;
        }
        C alpha = expFrom(m[i], mNew); // 0 while m = -inf
        l[i] = l[i] * alpha + rowSum(sum);
        m[i] = mNew;
#pragma unroll
        for (int c = 0; c < kCols; ++c)
          acc[i][c] *= alpha;
      }
      __syncthreads();
      accumulate(acc, sP, ty, sV, dh, tx);
    }
    C inv[kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i)
      inv[i] = l[i] > C(0) ? C(1) / l[i] : C(0);
    storeRows(out + qBase, acc, inv, q0, d.tq, dh, ty, tx);
  }
}

// Backward, first kernel: one block per (head, query tile). D_i = dy_i . y_i;
// a pass over the key tiles for each row's log-sum-exp; both to `stats`
// (two per row) for the second kernel; then a second pass for
// dq_i = sum_j ds_ij k_j with p_ij = exp(s_ij - lse_i) and
// ds_ij = p_ij (dy_i . v_j - D_i) * scale. A row that sees no key has
// lse = -inf and p = 0. Shared memory: q, dy, k, v tiles and one tile of ds.
template <typename S, typename C>
__global__ void __launch_bounds__(kBlock)
    flashBackwardQ(ir::AttentionDims d, const S *q, const S *k, const S *v,
                   const S *y, const S *dy, const S *mask, S *out, C *stats,
                   C scale) {
  extern __shared__ double smem[];
  int dh = static_cast<int>(d.dh), ld = dh + 1;
  C *sQ = reinterpret_cast<C *>(smem);
  C *sDY = sQ + kTile * ld, *sK = sDY + kTile * ld, *sV = sK + kTile * ld;
  C *sS = sV + kTile * ld;
  int ty = threadIdx.x / kSide, tx = threadIdx.x % kSide;
  int64_t tiles = (d.tq + kTile - 1) / kTile;
  for (int64_t task = blockIdx.x; task < d.heads * tiles; task += gridDim.x) {
    int64_t h = task / tiles, q0 = (tiles - 1 - task % tiles) * kTile;
    int64_t qBase = d.qRowOffset(h, 0), kvBase = d.kvRowOffset(h, 0);
    int64_t maskBase = mask ? d.maskBase(h) : 0;
    __syncthreads(); // the previous task has read its tiles
    loadTile(sQ, q + qBase, q0, d.tq, dh);
    loadTile(sDY, dy + qBase, q0, d.tq, dh);
    __syncthreads();
    C dRow[kPer], m[kPer], l[kPer], lse[kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      int r = ty + i * kSide;
      C part = 0;
      if (q0 + r < d.tq)
        for (int x = tx; x < dh; x += kSide)
          part += sDY[r * ld + x] *
                  C(Elem<S>::load(y[qBase + (q0 + r) * d.dh + x]));
      dRow[i] = rowSum(part);
      m[i] = -INFINITY;
      l[i] = 0;
    }
    int64_t kEnd = tileKeyEnd(d, q0);
    for (int64_t k0 = 0; k0 < kEnd; k0 += kTile) {
      __syncthreads();
      loadTile(sK, k + kvBase, k0, d.tk, dh);
      __syncthreads();
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        int r = ty + i * kSide;
        C s[kPer];
        C tileMax = -INFINITY;
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
          int c = tx + j * kSide;
          s[j] = scoreAt(d, sQ + r * ld, sK + c * ld, mask, maskBase, q0 + r,
                         k0 + c, scale);
          tileMax = maxC(tileMax, s[j]);
        }
        C mNew = maxC(m[i], rowMax(tileMax));
        C sum = 0;
#pragma unroll
        for (int j = 0; j < kPer; ++j)
          sum += expFrom(s[j], mNew);
        l[i] = l[i] * expFrom(m[i], mNew) + rowSum(sum);
        m[i] = mNew;
      }
    }
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      lse[i] = l[i] > C(0) ? m[i] + logC(l[i]) : C(-INFINITY);
      int64_t r = q0 + ty + i * kSide;
      if (tx == 0 && r < d.tq) {
        stats[2 * (h * d.tq + r)] = lse[i];
        stats[2 * (h * d.tq + r) + 1] = dRow[i];
      }
    }
    C acc[kPer][kCols];
#pragma unroll
    for (int i = 0; i < kPer; ++i)
#pragma unroll
      for (int c = 0; c < kCols; ++c)
        acc[i][c] = 0;
    for (int64_t k0 = 0; k0 < kEnd; k0 += kTile) {
      __syncthreads(); // sK, sV and sS of the previous tile are consumed
      loadTile(sK, k + kvBase, k0, d.tk, dh);
      loadTile(sV, v + kvBase, k0, d.tk, dh);
      __syncthreads();
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        int r = ty + i * kSide;
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
          int c = tx + j * kSide;
          C ds = 0;
          C s = scoreAt(d, sQ + r * ld, sK + c * ld, mask, maskBase, q0 + r,
                        k0 + c, scale);
          if (s != C(-INFINITY) && lse[i] != C(-INFINITY)) {
            C p = expC(s - lse[i]);
            ds = p * (dotRows(sDY + r * ld, sV + c * ld, dh) - dRow[i]) * scale;
          }
          sS[r * kLdP + c] = ds;
        }
      }
      __syncthreads();
      accumulate(acc, sS, ty, sK, dh, tx);
    }
    C one[kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i)
      one[i] = 1;
    storeRows(out + d.dqRowOffset(h, 0), acc, one, q0, d.tq, dh, ty, tx);
  }
}

// Backward, second kernel: one block per (query head, key tile), after the
// first; each query head writes its own rows of dk and dv (the gradient
// rule sums a key/value head's group). For each query tile that sees the
// key tile, with the rows' lse and D from `stats`: p and ds transposed into
// shared memory ([key][query]), then dv_j += sum_i p_ij dy_i and
// dk_j += sum_i ds_ij q_i in registers. Shared memory: k, v, q, dy tiles,
// the p and ds tiles, and the rows' lse and D.
template <typename S, typename C>
__global__ void __launch_bounds__(kBlock)
    flashBackwardKV(ir::AttentionDims d, const S *q, const S *k, const S *v,
                    const S *dy, const S *mask, S *out, const C *stats,
                    C scale) {
  extern __shared__ double smem[];
  int dh = static_cast<int>(d.dh), ld = dh + 1;
  C *sK = reinterpret_cast<C *>(smem);
  C *sV = sK + kTile * ld, *sQ = sV + kTile * ld, *sDY = sQ + kTile * ld;
  C *sP = sDY + kTile * ld, *sS = sP + kTile * kLdP;
  C *sLse = sS + kTile * kLdP, *sD = sLse + kTile;
  int ty = threadIdx.x / kSide, tx = threadIdx.x % kSide;
  int64_t tiles = (d.tk + kTile - 1) / kTile;
  for (int64_t task = blockIdx.x; task < d.heads * tiles; task += gridDim.x) {
    // Heavy tiles (near the start of the sequence) first.
    int64_t h = task / tiles, k0 = (task % tiles) * kTile;
    int64_t qBase = d.qRowOffset(h, 0), kvBase = d.kvRowOffset(h, 0);
    int64_t maskBase = mask ? d.maskBase(h) : 0;
    __syncthreads(); // the previous task has read its tiles
    loadTile(sK, k + kvBase, k0, d.tk, dh);
    loadTile(sV, v + kvBase, k0, d.tk, dh);
    C accK[kPer][kCols], accV[kPer][kCols];
#pragma unroll
    for (int i = 0; i < kPer; ++i)
#pragma unroll
      for (int c = 0; c < kCols; ++c)
        accK[i][c] = accV[i][c] = 0;
    int64_t qStart = d.rowBegin(k0) / kTile * kTile;
    for (int64_t q0 = qStart; q0 < d.tq; q0 += kTile) {
      __syncthreads(); // sQ, sDY, sP, sS of the previous tile are consumed
      loadTile(sQ, q + qBase, q0, d.tq, dh);
      loadTile(sDY, dy + qBase, q0, d.tq, dh);
      if (threadIdx.x < kTile) {
        int64_t r = q0 + threadIdx.x;
        sLse[threadIdx.x] = r < d.tq ? stats[2 * (h * d.tq + r)] : C(0);
        sD[threadIdx.x] = r < d.tq ? stats[2 * (h * d.tq + r) + 1] : C(0);
      }
      __syncthreads();
      // Thread (ty, tx) holds keys ty + 16 a and queries tx + 16 b.
#pragma unroll
      for (int a = 0; a < kPer; ++a) {
        int j = ty + a * kSide;
#pragma unroll
        for (int b = 0; b < kPer; ++b) {
          int i = tx + b * kSide;
          C p = 0, ds = 0;
          C s = scoreAt(d, sQ + i * ld, sK + j * ld, mask, maskBase, q0 + i,
                        k0 + j, scale);
          if (s != C(-INFINITY) && sLse[i] != C(-INFINITY)) {
            p = expC(s - sLse[i]);
            ds = p * (dotRows(sDY + i * ld, sV + j * ld, dh) - sD[i]) * scale;
          }
          sP[j * kLdP + i] = p;
          sS[j * kLdP + i] = ds;
        }
      }
      __syncthreads();
      accumulate(accV, sP, ty, sDY, dh, tx);
      accumulate(accK, sS, ty, sQ, dh, tx);
    }
    C one[kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i)
      one[i] = 1;
    storeRows(out + d.dkRowOffset(h, 0), accK, one, k0, d.tk, dh, ty, tx);
    storeRows(out + d.dvRowOffset(h, 0), accV, one, k0, d.tk, dh, ty, tx);
  }
}

// The compute type of storage S: f32, except f64 for f64.
template <typename S> using Compute = ComputeOf<S>;

// Sets the kernel's dynamic shared memory limit when it needs more than
// the default 48 KiB (up to the device's opt-in limit).
template <typename K> cudaError_t allowShared(K kernel, size_t bytes) {
  if (bytes <= 48 * 1024)
    return cudaSuccess;
  return cudaFuncSetAttribute(kernel,
                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(bytes));
}

template <typename C> size_t forwardShared(int dh) {
  return (3 * size_t(kTile) * (dh + 1) + size_t(kTile) * kLdP) * sizeof(C);
}
template <typename C> size_t backwardQShared(int dh) {
  return (4 * size_t(kTile) * (dh + 1) + size_t(kTile) * kLdP) * sizeof(C);
}
template <typename C> size_t backwardKVShared(int dh) {
  return (4 * size_t(kTile) * (dh + 1) + 2 * size_t(kTile) * kLdP +
          2 * size_t(kTile)) *
         sizeof(C);
}

} // namespace

cudaError_t launchAttention(const Launch &l, Dt dt,
                            const ir::AttentionDims &d, const void *q,
                            const void *k, const void *v, const void *mask,
                            void *out) {
  if (d.heads <= 0 || d.tq <= 0 || d.dh <= 0)
    return cudaSuccess;
  if (d.dh > kMaxAttentionDh)
    return cudaErrorInvalidValue;
  int64_t tasks = d.heads * ((d.tq + kTile - 1) / kTile);
  return visitFloat(dt, [&]<typename S>() {
    using C = Compute<S>;
    size_t shared = forwardShared<C>(static_cast<int>(d.dh));
    if (cudaError_t e = allowShared(flashForward<S, C>, shared))
      return e;
    flashForward<S, C><<<blocksFor(tasks), kBlock, shared, l.stream>>>(
        d, static_cast<const S *>(q), static_cast<const S *>(k),
        static_cast<const S *>(v), static_cast<const S *>(mask),
        static_cast<S *>(out), C(1.0 / std::sqrt(static_cast<double>(d.dh))));
    return lastError();
  });
}

uint64_t attentionGradScratch(const ir::AttentionDims &d) {
  return static_cast<uint64_t>(d.heads < 0 || d.tq < 0 ? 0 : d.heads * d.tq) *
         2 * sizeof(double);
}

cudaError_t launchAttentionGrad(const Launch &l, Dt dt,
                                const ir::AttentionDims &d, const void *q,
                                const void *k, const void *v, const void *y,
                                const void *dy, const void *mask, void *out,
                                void *scratch) {
  if (d.heads <= 0 || d.dh <= 0 || d.tq + d.tk <= 0)
    return cudaSuccess;
  if (d.dh > kMaxAttentionDh || !scratch)
    return cudaErrorInvalidValue;
  int dh = static_cast<int>(d.dh);
  int64_t tasksQ = d.heads * ((d.tq + kTile - 1) / kTile);
  int64_t tasksKV = d.heads * ((d.tk + kTile - 1) / kTile);
  return visitFloat(dt, [&]<typename S>() {
    using C = Compute<S>;
    const S *ms = static_cast<const S *>(mask);
    C *stats = static_cast<C *>(scratch);
    C scale = C(1.0 / std::sqrt(static_cast<double>(d.dh)));
    size_t sharedQ = backwardQShared<C>(dh), sharedKV = backwardKVShared<C>(dh);
    if (cudaError_t e = allowShared(flashBackwardQ<S, C>, sharedQ))
      return e;
    if (cudaError_t e = allowShared(flashBackwardKV<S, C>, sharedKV))
      return e;
    if (tasksQ > 0) {
      flashBackwardQ<S, C><<<blocksFor(tasksQ), kBlock, sharedQ, l.stream>>>(
          d, static_cast<const S *>(q), static_cast<const S *>(k),
          static_cast<const S *>(v), static_cast<const S *>(y),
          static_cast<const S *>(dy), ms, static_cast<S *>(out), stats, scale);
      if (cudaError_t e = lastError())
        return e;
    }
    if (tasksKV > 0) {
      flashBackwardKV<S, C>
          <<<blocksFor(tasksKV), kBlock, sharedKV, l.stream>>>(
              d, static_cast<const S *>(q), static_cast<const S *>(k),
              static_cast<const S *>(v), static_cast<const S *>(dy), ms,
              static_cast<S *>(out), stats, scale);
      return lastError();
    }
    return cudaSuccess;
  });
}

} // namespace mgc::backend::cuda
