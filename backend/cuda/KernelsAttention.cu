// Causal attention and its fused backward as flash-style tiled kernels
// (FlashAttention-2's algorithm on CUDA cores): no [T, T] matrix is ever
// written to memory. Tiles of kTile query rows and kTile key rows are staged
// in shared memory in the compute type (f32; f64 for f64 storage); a block
// of 16 x 16 threads computes one kTile x kTile block of scores, each thread
// two rows by two columns, and accumulates output rows of up to kMaxDh
// columns in registers (two rows by kMaxDh / 16 columns per thread). Every
// sum has a fixed order, so results are the same run to run.
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

// Forward: one block per (head, query tile), heavy tiles (near the end of
// the sequence) first. For each key tile up to the diagonal: the scores,
// the online softmax (running max m and sum l per row, the accumulated
// output rescaled by exp(m_old - m_new)), then P V into registers.
// Shared memory: q, k, v tiles and one score tile.
template <typename S, typename C>
__global__ void __launch_bounds__(kBlock)
    flashForward(const S *q, const S *k, const S *v, S *out, int64_t heads,
                 int64_t t, int dh, C scale) {
  extern __shared__ double smem[];
  int ld = dh + 1;
  C *sQ = reinterpret_cast<C *>(smem);
  C *sK = sQ + kTile * ld, *sV = sK + kTile * ld, *sP = sV + kTile * ld;
  int ty = threadIdx.x / kSide, tx = threadIdx.x % kSide;
  int64_t tiles = (t + kTile - 1) / kTile;
  for (int64_t task = blockIdx.x; task < heads * tiles; task += gridDim.x) {
    int64_t h = task / tiles, q0 = (tiles - 1 - task % tiles) * kTile;
    int64_t base = h * t * dh;
    __syncthreads(); // the previous task has read its tiles
    loadTile(sQ, q + base, q0, t, dh);
    C m[kPer], l[kPer], acc[kPer][kCols];
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      m[i] = -INFINITY;
      l[i] = 0;
#pragma unroll
      for (int c = 0; c < kCols; ++c)
        acc[i][c] = 0;
    }
    int64_t kEnd = q0 + kTile < t ? q0 + kTile : t;
    for (int64_t k0 = 0; k0 < kEnd; k0 += kTile) {
      __syncthreads(); // sK, sV and sP of the previous tile are consumed
      loadTile(sK, k + base, k0, t, dh);
      loadTile(sV, v + base, k0, t, dh);
      __syncthreads();
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        int r = ty + i * kSide;
        C s[kPer];
        C tileMax = -INFINITY;
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
          int c = tx + j * kSide;
          // Key k0 + c is visible to query q0 + r when not after it; key 0
          // always is, so every row's max is finite after the first tile.
          s[j] = k0 + c > q0 + r
                     ? C(-INFINITY)
                     : dotRows(sQ + r * ld, sK + c * ld, dh) * scale;
          tileMax = maxC(tileMax, s[j]);
        }
        C mNew = maxC(m[i], rowMax(tileMax));
        C sum = 0;
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
          C p = expC(s[j] - mNew);
          sP[r * kLdP + tx + j * kSide] = p;
          sum += p;
        }
        C alpha = expC(m[i] - mNew); // 0 on the first tile (m = -inf)
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
      inv[i] = C(1) / l[i];
    storeRows(out + base, acc, inv, q0, t, dh, ty, tx);
  }
}

// Backward, first kernel: one block per (head, query tile). D_i = dy_i . y_i;
// a pass over the key tiles for each row's log-sum-exp; both to `stats`
// (two per row) for the second kernel; then a second pass for
// dq_i = sum_j ds_ij k_j with p_ij = exp(s_ij - lse_i) and
// ds_ij = p_ij (dy_i . v_j - D_i) * scale.
// Shared memory: q, dy, k, v tiles and one tile of ds.
template <typename S, typename C>
__global__ void __launch_bounds__(kBlock)
    flashBackwardQ(const S *q, const S *k, const S *v, const S *y, const S *dy,
                   S *dq, C *stats, int64_t heads, int64_t t, int dh, C scale) {
  extern __shared__ double smem[];
  int ld = dh + 1;
  C *sQ = reinterpret_cast<C *>(smem);
  C *sDY = sQ + kTile * ld, *sK = sDY + kTile * ld, *sV = sK + kTile * ld;
  C *sS = sV + kTile * ld;
  int ty = threadIdx.x / kSide, tx = threadIdx.x % kSide;
  int64_t tiles = (t + kTile - 1) / kTile;
  for (int64_t task = blockIdx.x; task < heads * tiles; task += gridDim.x) {
    int64_t h = task / tiles, q0 = (tiles - 1 - task % tiles) * kTile;
    int64_t base = h * t * dh;
    __syncthreads(); // the previous task has read its tiles
    loadTile(sQ, q + base, q0, t, dh);
    loadTile(sDY, dy + base, q0, t, dh);
    __syncthreads();
    C dRow[kPer], m[kPer], l[kPer], lse[kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      int r = ty + i * kSide;
      C part = 0;
      if (q0 + r < t)
        for (int x = tx; x < dh; x += kSide)
          part +=
              sDY[r * ld + x] * C(Elem<S>::load(y[base + (q0 + r) * dh + x]));
      dRow[i] = rowSum(part);
      m[i] = -INFINITY;
      l[i] = 0;
    }
    int64_t kEnd = q0 + kTile < t ? q0 + kTile : t;
    for (int64_t k0 = 0; k0 < kEnd; k0 += kTile) {
      __syncthreads();
      loadTile(sK, k + base, k0, t, dh);
      __syncthreads();
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        int r = ty + i * kSide;
        C s[kPer];
        C tileMax = -INFINITY;
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
          int c = tx + j * kSide;
          s[j] = k0 + c > q0 + r
                     ? C(-INFINITY)
                     : dotRows(sQ + r * ld, sK + c * ld, dh) * scale;
          tileMax = maxC(tileMax, s[j]);
        }
        C mNew = maxC(m[i], rowMax(tileMax));
        C sum = 0;
#pragma unroll
        for (int j = 0; j < kPer; ++j)
          sum += expC(s[j] - mNew);
        l[i] = l[i] * expC(m[i] - mNew) + rowSum(sum);
        m[i] = mNew;
      }
    }
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      lse[i] = m[i] + logC(l[i]);
      int64_t r = q0 + ty + i * kSide;
      if (tx == 0 && r < t) {
        stats[2 * (h * t + r)] = lse[i];
        stats[2 * (h * t + r) + 1] = dRow[i];
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
      loadTile(sK, k + base, k0, t, dh);
      loadTile(sV, v + base, k0, t, dh);
      __syncthreads();
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        int r = ty + i * kSide;
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
          int c = tx + j * kSide;
          C ds = 0;
          if (k0 + c <= q0 + r) {
            C p = expC(dotRows(sQ + r * ld, sK + c * ld, dh) * scale - lse[i]);
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
    storeRows(dq + base, acc, one, q0, t, dh, ty, tx);
  }
}

// Backward, second kernel: one block per (head, key tile), after the first.
// For each query tile from the diagonal on, with the rows' lse and D from
// `stats`: p and ds transposed into shared memory ([key][query]), then
// dv_j += sum_i p_ij dy_i and dk_j += sum_i ds_ij q_i in registers.
// Shared memory: k, v, q, dy tiles, the p and ds tiles, and the rows' lse
// and D.
template <typename S, typename C>
__global__ void __launch_bounds__(kBlock)
    flashBackwardKV(const S *q, const S *k, const S *v, const S *dy, S *dk,
                    S *dv, const C *stats, int64_t heads, int64_t t, int dh,
                    C scale) {
  extern __shared__ double smem[];
  int ld = dh + 1;
  C *sK = reinterpret_cast<C *>(smem);
  C *sV = sK + kTile * ld, *sQ = sV + kTile * ld, *sDY = sQ + kTile * ld;
  C *sP = sDY + kTile * ld, *sS = sP + kTile * kLdP;
  C *sLse = sS + kTile * kLdP, *sD = sLse + kTile;
  int ty = threadIdx.x / kSide, tx = threadIdx.x % kSide;
  int64_t tiles = (t + kTile - 1) / kTile;
  for (int64_t task = blockIdx.x; task < heads * tiles; task += gridDim.x) {
    // Heavy tiles (near the start of the sequence) first.
    int64_t h = task / tiles, k0 = (task % tiles) * kTile;
    int64_t base = h * t * dh;
    __syncthreads(); // the previous task has read its tiles
    loadTile(sK, k + base, k0, t, dh);
    loadTile(sV, v + base, k0, t, dh);
    C accK[kPer][kCols], accV[kPer][kCols];
#pragma unroll
    for (int i = 0; i < kPer; ++i)
#pragma unroll
      for (int c = 0; c < kCols; ++c)
        accK[i][c] = accV[i][c] = 0;
    for (int64_t q0 = k0; q0 < t; q0 += kTile) {
      __syncthreads(); // sQ, sDY, sP, sS of the previous tile are consumed
      loadTile(sQ, q + base, q0, t, dh);
      loadTile(sDY, dy + base, q0, t, dh);
      if (threadIdx.x < kTile) {
        int64_t r = q0 + threadIdx.x;
        sLse[threadIdx.x] = r < t ? stats[2 * (h * t + r)] : C(0);
        sD[threadIdx.x] = r < t ? stats[2 * (h * t + r) + 1] : C(0);
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
          if (q0 + i < t && k0 + j <= q0 + i) {
            p = expC(dotRows(sQ + i * ld, sK + j * ld, dh) * scale - sLse[i]);
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
    storeRows(dk + base, accK, one, k0, t, dh, ty, tx);
    storeRows(dv + base, accV, one, k0, t, dh, ty, tx);
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

cudaError_t launchAttention(const Launch &l, Dt dt, const void *q,
                            const void *k, const void *v, void *out,
                            int64_t heads, int64_t t, int64_t dh) {
  if (heads <= 0 || t <= 0 || dh <= 0)
    return cudaSuccess;
  if (dh > kMaxAttentionDh)
    return cudaErrorInvalidValue;
  int d = static_cast<int>(dh);
  int64_t tasks = heads * ((t + kTile - 1) / kTile);
  return visitFloat(dt, [&]<typename S>() {
    using C = Compute<S>;
    size_t shared = forwardShared<C>(d);
    if (cudaError_t e = allowShared(flashForward<S, C>, shared))
      return e;
    flashForward<S, C><<<blocksFor(tasks), kBlock, shared, l.stream>>>(
        static_cast<const S *>(q), static_cast<const S *>(k),
        static_cast<const S *>(v), static_cast<S *>(out), heads, t, d,
        C(1.0 / std::sqrt(static_cast<double>(dh))));
    return lastError();
  });
}

uint64_t attentionGradScratch(int64_t heads, int64_t t) {
  return static_cast<uint64_t>(heads < 0 || t < 0 ? 0 : heads * t) * 2 *
         sizeof(double);
}

cudaError_t launchAttentionGrad(const Launch &l, Dt dt, const void *q,
                                const void *k, const void *v, const void *y,
                                const void *dy, void *out, void *scratch,
                                int64_t heads, int64_t t, int64_t dh) {
  if (heads <= 0 || t <= 0 || dh <= 0)
    return cudaSuccess;
  if (dh > kMaxAttentionDh || !scratch)
    return cudaErrorInvalidValue;
  int d = static_cast<int>(dh);
  int64_t tasks = heads * ((t + kTile - 1) / kTile);
  int64_t part = heads * t * dh; // elements of each of dq, dk, dv
  return visitFloat(dt, [&]<typename S>() {
    using C = Compute<S>;
    S *dq = static_cast<S *>(out);
    C *stats = static_cast<C *>(scratch);
    C scale = C(1.0 / std::sqrt(static_cast<double>(dh)));
    size_t sharedQ = backwardQShared<C>(d), sharedKV = backwardKVShared<C>(d);
    if (cudaError_t e = allowShared(flashBackwardQ<S, C>, sharedQ))
      return e;
    if (cudaError_t e = allowShared(flashBackwardKV<S, C>, sharedKV))
      return e;
    flashBackwardQ<S, C><<<blocksFor(tasks), kBlock, sharedQ, l.stream>>>(
        static_cast<const S *>(q), static_cast<const S *>(k),
        static_cast<const S *>(v), static_cast<const S *>(y),
        static_cast<const S *>(dy), dq, stats, heads, t, d, scale);
    if (cudaError_t e = lastError())
      return e;
    flashBackwardKV<S, C><<<blocksFor(tasks), kBlock, sharedKV, l.stream>>>(
        static_cast<const S *>(q), static_cast<const S *>(k),
        static_cast<const S *>(v), static_cast<const S *>(dy), dq + part,
        dq + 2 * part, stats, heads, t, d, scale);
    return lastError();
  });
}

} // namespace mgc::backend::cuda
