// matmul through cuBLASLt: a[..., M, K] @ b[K, N] (one GEMM of
// prod(...) * M rows) or b[..., K, N] (a strided batch). Row-major C = A B is
// computed as the column-major C^T = B^T A^T, so no data moves. The
// descriptors and the algorithm are chosen once, when the executor is made;
// a step only calls cublasLtMatmul. f32 computes in f32 (no TF32), bf16 and
// f16 with f32 accumulation (tensor cores), f64 in f64.
//
// matmul_epilogue (ir/MatmulEpilogue.h) uses the same plan with cuBLASLt's
// epilogue where cuBLASLt can run it: the bias (CUBLASLT_EPILOGUE_BIAS) in
// f32, bf16 and f16; GELU after the bias (_GELU_BIAS) and the GELU gradient
// (_DGELU, h as the auxiliary input) in bf16 and f16. What cuBLASLt does
// not do (f64, the GELUs in f32, a DGELU whose h has a row length that is
// not a multiple of 8, an epilogue with no algorithm) is left to the op's
// kernel after the GEMM (after()); all decided when the plan is made.
#pragma once

#include "ir/Graph.h"
#include "support/Diagnostics.h"
#include "support/Result.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <memory>

namespace mgc::backend::cuda {

// The ops whose kernel runs a MatmulPlan (made when the executor is made).
inline bool usesMatmulPlan(ir::OpKind kind) {
  return kind == ir::OpKind::Matmul || kind == ir::OpKind::MatmulEpilogue;
}

// What of a matmul_epilogue is left to run after the GEMM (in place on its
// result, with the bias or h): nothing when cuBLASLt's epilogue did it all.
enum class EpilogueAfter { None, Bias, BiasGelu, Gelu, GeluGrad };

class MatmulPlan {
public:
  // Reports (at the op) and returns null when cuBLASLt has no algorithm.
  static std::unique_ptr<MatmulPlan> create(const ir::Op &op,
                                            cublasLtHandle_t handle,
                                            size_t workspaceBytes,
                                            DiagnosticEngine &diag);
  ~MatmulPlan();
  MatmulPlan(const MatmulPlan &) = delete;
  MatmulPlan &operator=(const MatmulPlan &) = delete;

  LogicalResult run(const void *a, const void *b, void *c, void *workspace,
                    cudaStream_t stream, DiagnosticEngine &diag) const;
  // matmul_epilogue: `extra` is the bias or h (operand 2). Runs the GEMM
  // with cuBLASLt's part of the epilogue; the caller runs after().
  LogicalResult run(const void *a, const void *b, const void *extra, void *c,
                    void *workspace, cudaStream_t stream,
                    DiagnosticEngine &diag) const;
  EpilogueAfter after() const { return after_; }
  // cuBLASLt's epilogue (CUBLASLT_EPILOGUE_DEFAULT for none).
  cublasLtEpilogue_t ltEpilogue() const { return ltEpilogue_; }

private:
  MatmulPlan(const ir::Op &op, cublasLtHandle_t handle)
      : op_(op), handle_(handle) {}
  LogicalResult setEpilogue(cublasLtEpilogue_t lt, int64_t n, int64_t m,
                            int64_t batches, DiagnosticEngine &diag);

  const ir::Op &op_;
  cublasLtHandle_t handle_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t layoutA_ = nullptr, layoutB_ = nullptr,
                         layoutC_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  size_t workspaceBytes_ = 0;
  bool doublePrecision_ = false;
  // An empty result (nothing to do) or an empty contraction (zeros).
  bool empty_ = false, zeros_ = false;
  size_t resultBytes_ = 0;
  cublasLtEpilogue_t ltEpilogue_ = CUBLASLT_EPILOGUE_DEFAULT;
  EpilogueAfter after_ = EpilogueAfter::None;
};

} // namespace mgc::backend::cuda
