// The kernel launchers of the CUDA backend: plain functions on device
// pointers and sizes, one per kernel family, defined in the .cu files and
// called by the op dispatch (CudaKernels.cpp). This header sees no IR but
// the plain data of ir/AttentionDims.h, so that nvcc compiles only the
// kernels; every launcher enqueues its work on `Launch::stream` and returns
// the launch's error (never synchronises).
#pragma once

#include "ir/AttentionDims.h"
#include "ir/Target.h"
#include "ir/WindowDims.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace mgc::backend::cuda {

// Element types, in the order of ir::DType (CudaKernels.cpp checks it).
enum class Dt : uint8_t { F32, BF16, F16, F64, I32, I64 };

// A run-time error found by a kernel (an id out of range, an integer division
// by zero, a cast with no integer result). The first op that fails owns the
// record; it keeps the smallest failing element, and a one-thread kernel
// after the op (launchNoteValue) copies that element's value, so that the
// host can report what the CPU backend reports.
struct DeviceError {
  uint64_t owner;   // ((step + 1) << 8) | code; 0: no error
  uint64_t element; // smallest failing element (all ones: none)
  int64_t intValue; // the failing element's value (ids, divisors)
  double realValue; // the failing element's value (casts)
};
enum ErrorCode : uint32_t {
  kIdOutOfRange = 1,
  kDivisionByZero = 2,
  kCastOutOfRange = 3,
};

// Where a launcher enqueues and reports: the executor's stream, its error
// record and the position of the op in the step.
struct Launch {
  cudaStream_t stream = nullptr;
  DeviceError *error = nullptr;
  int32_t step = 0;
};

// Copies element `error->element` of `src` into the record, if the op of
// `launch.step` owns it.
cudaError_t launchNoteValue(const Launch &launch, const void *src, Dt dt);

// --- Elementwise (KernelsElementwise.cu): y[s] from x[s] (and b[s]).
enum class Unary : uint8_t {
  Neg,
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Tanh,
  Relu,
  Gelu,
  Sigmoid,
  Cos
};
enum class Binary : uint8_t {
  Add,
  Sub,
  Mul,
  Div,
  Minimum,
  Maximum,
  ReluGrad,
  GeluGrad,
  SigmoidGrad,
  TanhGrad
};

// --- Rotary embeddings, masks, activations (KernelsMath.cu): y[s] from up
// to three operands of the result's type; Where's first operand is the
// condition, of element type condDt (nonzero: true); MinGrad and MaxGrad
// take (dy, a, b) and give a's cotangent.
enum class MathOp : uint8_t {
  Sin,
  Abs,
  Sign,
  Softplus,
  Pow,
  Where,
  MinGrad,
  MaxGrad
};
cudaError_t launchMath(const Launch &launch, MathOp op, Dt dt, const void *a,
                       const void *b, const void *c, void *y, int64_t n,
                       Dt condDt = Dt::F32);
// y[i] = (i / inner) % size: the index along an axis of `size` elements
// with `inner` elements after it.
cudaError_t launchIota(const Launch &launch, Dt dt, void *y, int64_t n,
                       int64_t inner, int64_t size);

// out[0..n) = value (already rounded to dt).
cudaError_t launchFill(const Launch &launch, void *out, Dt dt, double value,
                       int64_t n);
cudaError_t launchCast(const Launch &launch, const void *x, Dt from, void *y,
                       Dt to, int64_t n);
cudaError_t launchUnary(const Launch &launch, Unary op, Dt dt, const void *x,
                        void *y, int64_t n);
cudaError_t launchBinary(const Launch &launch, Binary op, Dt dt, const void *a,
                         const void *b, void *y, int64_t n);
// Element i dropped when uniform01(seed, stream, first + i) < p
// (support/Random.h): `first` is the index of element 0 in the whole tensor
// (a device's part of it, dropout_part).
cudaError_t launchDropout(const Launch &launch, Dt dt, const void *x, void *y,
                          int64_t n, double p, uint64_t seed,
                          uint64_t randomStream, uint64_t first = 0);

// --- Shape ops and reductions (KernelsShape.cu).
// The limits of ir::kCudaTarget, which the compiler respects.
constexpr int kMaxRank = ir::kCudaTarget.maxRank;
struct Strided {
  int32_t rank = 0;
  int64_t shape[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};
};

// A `fused` op's expression (ir/FusedExpr.h) for the device: instructions in
// the order of ir::FusedOp (CudaKernels.cpp checks it), operands read through
// broadcast strides over the result's shape.
constexpr int kMaxFusedInstrs = ir::kCudaTarget.maxFusedInstrs;
constexpr int kMaxFusedOperands = ir::kCudaTarget.maxFusedOperands;
enum class FusedCode : uint8_t {
  Add,
  Sub,
  Mul,
  Div,
  Minimum,
  Maximum,
  ReluGrad,
  GeluGrad,
  SigmoidGrad,
  TanhGrad,
  Neg,
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Tanh,
  Relu,
  Gelu,
  Sigmoid,
  Cos,
  CastBF16,
  CastF16,
  CastF32,
  CastF64
};
struct FusedProgram {
  int32_t numInstrs = 0, numOperands = 0;
  FusedCode op[kMaxFusedInstrs] = {};
  uint8_t argKind[kMaxFusedInstrs][2] = {}; // 0 operand, 1 result, 2 literal
  int32_t argIndex[kMaxFusedInstrs][2] = {};
  double literal[kMaxFusedInstrs][2] = {};
  const void *operand[kMaxFusedOperands] = {};
  Dt operandDt[kMaxFusedOperands] = {};
  // Per operand, its stride along each dimension of `shape` (0: broadcast).
  int64_t strides[kMaxFusedOperands][kMaxRank] = {};
  int32_t rank = 0;
  int64_t shape[kMaxRank] = {};
};
// out[shape] in dt = the program's last result, computed in f32 (f64 for an
// f64 result).
cudaError_t launchFused(const Launch &launch, const FusedProgram &program,
                        Dt dt, void *out, int64_t n);
// y[n] = in[base + sum_d idx_d(n) * strides[d]] over the row-major indices
// of `out.shape`, elements of `elemBytes` (2, 4 or 8) bytes.
cudaError_t launchGather(const Launch &launch, const void *in, int64_t base,
                         const Strided &out, void *y, int elemBytes);

enum class Reduce : uint8_t { Sum, Mean, Max };
// The kept axes (making the outputs, in order) and the reduced ones, with
// input strides; `count` elements fold into each output.
struct ReduceShape {
  Strided kept, reduced;
  int64_t count = 1;
  int64_t outputs = 1;
};
cudaError_t launchReduce(const Launch &launch, Reduce kind, Dt dt,
                         const void *x, void *y, const ReduceShape &s);
// dy[outputs], x, y[outputs] -> dx: dy shared among the ties of the max.
cudaError_t launchMaxGrad(const Launch &launch, Dt dt, const void *dy,
                          const void *x, const void *y, void *dx,
                          const ReduceShape &s);

// --- Normalisations, losses, lookups (KernelsNN.cu).
// outer * inner lines of `dim` elements `inner` apart.
struct Lines {
  int64_t outer = 1, dim = 1, inner = 1;
};
cudaError_t launchSoftmax(const Launch &launch, Dt dt, const void *x, void *y,
                          Lines lines, bool logarithm);
cudaError_t launchSoftmaxGrad(const Launch &launch, Dt dt, const void *dy,
                              const void *y, void *dx, Lines lines,
                              bool logarithm);
// layernorm, or with centered = false rmsnorm (mean 0, beta null).
cudaError_t launchLayernorm(const Launch &launch, Dt dt, const void *x,
                            const void *gamma, const void *beta, void *y,
                            int64_t rows, int64_t d, double eps,
                            bool centered = true);
cudaError_t launchLayernormGradX(const Launch &launch, Dt dt, const void *dy,
                                 const void *x, const void *gamma, void *dx,
                                 int64_t rows, int64_t d, double eps,
                                 bool centered = true);
// Entries above the diagonal of each [t, t] matrix set to -inf (mask) or 0.
cudaError_t launchCausalMask(const Launch &launch, Dt dt, const void *x,
                             void *y, int64_t matrices, int64_t t,
                             bool negInfinity);
// The part [begin, begin + size) of an indexed dimension of `whole` that a
// device holds (all of it outside tensor parallelism): ids in [0, whole)
// outside the part give zeros, ids outside [0, whole) are errors.
struct IdPart {
  int64_t begin = 0, size = 0, whole = 0;
};
// table[part.size, d] -> out[count, d]
// x[rows, 2 * half] with rows cycling through t positions pos[t] (i32 or
// i64) -> y: rope's rotation, backwards with inverse.
cudaError_t launchRope(const Launch &launch, Dt dt, const void *x, Dt posDt,
                       const void *pos, void *y, int64_t rows, int64_t t,
                       int64_t half, double theta, bool inverse);
cudaError_t launchEmbedding(const Launch &launch, Dt idDt, const void *ids,
                            int64_t count, const void *table, IdPart part,
                            int64_t d, int elemBytes, void *out);
// dy[count, d] -> out[part.size, d]
cudaError_t launchEmbeddingGrad(const Launch &launch, Dt dt, Dt idDt,
                                const void *dy, const void *ids, int64_t count,
                                IdPart part, int64_t d, void *out);
// The pieces of cross_entropy on logits split by classes (rows of c
// classes, part `part` of them): sum over the row of exp(x - m) in f64;
// the target's logit (0 where the part lacks it); and
// dy * (exp(x - m) / s - onehot(target)) / rows.
cudaError_t launchSumExp(const Launch &launch, Dt dt, const void *x,
                         const void *m, int64_t rows, int64_t c, void *out);
cudaError_t launchClassLogit(const Launch &launch, Dt dt, Dt idDt,
                             const void *logits, const void *targets,
                             int64_t rows, int64_t c, IdPart part, void *out);
cudaError_t launchCrossEntropyGradStats(const Launch &launch, Dt dt, Dt idDt,
                                        const void *dy, const void *logits,
                                        const void *m, const void *s,
                                        const void *targets, int64_t rows,
                                        int64_t c, IdPart part, void *out);
// `partial` holds `positions` doubles (the executor's scratch space).
cudaError_t launchCrossEntropy(const Launch &launch, Dt dt, Dt idDt,
                               const void *logits, const void *targets,
                               int64_t positions, int64_t classes,
                               double *partial, void *out);
cudaError_t launchCrossEntropyGrad(const Launch &launch, Dt dt, Dt idDt,
                                   const void *dy, const void *logits,
                                   const void *targets, int64_t positions,
                                   int64_t classes, void *out);
cudaError_t launchMse(const Launch &launch, Dt dt, const void *a, const void *b,
                      int64_t n, void *out);

// --- Flash-style attention (KernelsAttention.cu): any lengths, heads of at
// most kMaxAttentionDh columns (a thread keeps its part of an output row in
// registers). `d` (ir/AttentionDims.h, plain data) says which keys a query
// sees, which key/value head it reads and where its mask entries are;
// `mask` is null when d.masked is false.
constexpr int64_t kMaxAttentionDh = ir::kCudaTarget.maxAttentionHeadDim;
// q[heads, tq, dh], k, v[heads / group, tk, dh] -> out[heads, tq, dh].
cudaError_t launchAttention(const Launch &launch, Dt dt,
                            const ir::AttentionDims &d, const void *q,
                            const void *k, const void *v, const void *mask,
                            void *out);
// Scratch bytes of attention_grad: two statistics per (query head, row).
uint64_t attentionGradScratch(const ir::AttentionDims &d);
// q, k, v, y, dy -> out[heads, tq + 2 tk, dh]: per query head, the rows of
// dq, then that head's dk and dv; with `scratch` of attentionGradScratch(d)
// bytes.
cudaError_t launchAttentionGrad(const Launch &launch, Dt dt,
                                const ir::AttentionDims &d, const void *q,
                                const void *k, const void *v, const void *y,
                                const void *dy, const void *mask, void *out,
                                void *scratch);

// --- Convolution and pooling over NCHW images (KernelsConv.cu): direct
// kernels, one thread per result element, on the geometry `d`
// (ir/WindowDims.h, plain data).
// x[N, C, H, W], w[K, C/g, R, S] -> y[N, K, OH, OW]
cudaError_t launchConv2d(const Launch &launch, Dt dt, const ir::WindowDims &d,
                         const void *x, const void *w, void *y);
// dy[N, K, OH, OW], w -> dx[N, C, H, W]
cudaError_t launchConv2dGradX(const Launch &launch, Dt dt,
                              const ir::WindowDims &d, const void *dy,
                              const void *w, void *dx);
// dy[N, K, OH, OW], x -> dw[K, C/g, R, S]
cudaError_t launchConv2dGradW(const Launch &launch, Dt dt,
                              const ir::WindowDims &d, const void *dy,
                              const void *x, void *dw);
// x -> y: max_pool2d, or avg_pool2d when `average`.
cudaError_t launchPool2d(const Launch &launch, Dt dt, const ir::WindowDims &d,
                         bool average, const void *x, void *y);
// dy (and x for max_pool2d; null for avg_pool2d) -> dx.
cudaError_t launchPool2dGrad(const Launch &launch, Dt dt,
                             const ir::WindowDims &d, const void *dy,
                             const void *x, void *dx);

// --- The communicators' reductions (KernelsReduce.cu), as
// backend/cpu/Reductions.h computes them, bit for bit: dst[i] = srcs[0][i]
// + srcs[1][i] + ... in that order (f32 and f64 in their own type, bf16 and
// f16 in f32 rounded once, integers wrapping), or the maximum (the first
// NaN, else the first of the largest values). `dst` may be one of the
// sources; at most kMaxReduceParts sources.
constexpr int kMaxReduceParts = 32;
struct ReduceParts {
  const void *src[kMaxReduceParts];
  int count = 0;
};
cudaError_t launchSumParts(cudaStream_t stream, Dt dt, const ReduceParts &parts,
                           void *dst, int64_t n);
cudaError_t launchMaxParts(cudaStream_t stream, Dt dt, const ReduceParts &parts,
                           void *dst, int64_t n);

} // namespace mgc::backend::cuda
