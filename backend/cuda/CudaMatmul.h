// matmul through cuBLASLt: a[..., M, K] @ b[K, N] (one GEMM of
// prod(...) * M rows) or b[..., K, N] (a strided batch). Row-major C = A B is
// computed as the column-major C^T = B^T A^T, so no data moves. The
// descriptors and the algorithm are chosen once, when the executor is made;
// a step only calls cublasLtMatmul. f32 computes in f32 (no TF32), bf16 and
// f16 with f32 accumulation (tensor cores), f64 in f64.
#pragma once

#include "ir/Graph.h"
#include "support/Diagnostics.h"
#include "support/Result.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <memory>

namespace mgc::backend::cuda {

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

private:
  MatmulPlan(const ir::Op &op, cublasLtHandle_t handle)
      : op_(op), handle_(handle) {}

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
};

} // namespace mgc::backend::cuda
