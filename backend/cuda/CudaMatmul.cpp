// cuBLASLt GEMM plans for matmul.
#include "backend/cuda/CudaMatmul.h"

#include "backend/cuda/CudaCheck.h"

#include <numeric>

namespace mgc::backend::cuda {

namespace {

cudaDataType_t dataType(ir::DType dt) {
  switch (dt) {
  case ir::DType::BF16:
    return CUDA_R_16BF;
  case ir::DType::F16:
    return CUDA_R_16F;
  case ir::DType::F64:
    return CUDA_R_64F;
  default:
    return CUDA_R_32F;
  }
}

// The largest power of two (at most 256) dividing every byte stride: the
// alignment cuBLASLt may assume of each matrix of a batch (buffers start at
// multiples of 64 bytes).
uint32_t alignmentOf(std::initializer_list<uint64_t> strides) {
  uint64_t g = 64;
  for (uint64_t s : strides)
    if (s)
      g = std::gcd(g, s);
  uint32_t a = 1;
  while (a < 256 && g % (2 * a) == 0)
    a *= 2;
  return a;
}

} // namespace

MatmulPlan::~MatmulPlan() {
  if (layoutA_)
    cublasLtMatrixLayoutDestroy(layoutA_);
  if (layoutB_)
    cublasLtMatrixLayoutDestroy(layoutB_);
  if (layoutC_)
    cublasLtMatrixLayoutDestroy(layoutC_);
  if (desc_)
    cublasLtMatmulDescDestroy(desc_);
}

std::unique_ptr<MatmulPlan> MatmulPlan::create(const ir::Op &op,
                                               cublasLtHandle_t handle,
                                               size_t workspaceBytes,
                                               DiagnosticEngine &diag) {
  std::unique_ptr<MatmulPlan> p(new MatmulPlan(op, handle));
  const ir::TensorType &at = op.operand(0)->type(), &bt = op.operand(1)->type();
  int64_t m = at.shape[at.rank() - 2], k = at.shape[at.rank() - 1];
  int64_t n = bt.shape[bt.rank() - 1];
  int64_t batches = m * n == 0 ? 0 : op.type().size() / (m * n);
  p->resultBytes_ =
      static_cast<size_t>(op.type().size()) * ir::dtypeBytes(op.type().dtype);
  if (batches == 0) {
    p->empty_ = true;
    return p;
  }
  if (k == 0) {
    p->zeros_ = true;
    return p;
  }
  bool shared = bt.rank() == 2;
  if (shared) { // one GEMM over every row of a
    m *= batches;
    batches = 1;
  }
  ir::DType dt = op.type().dtype;
  uint64_t elem = ir::dtypeBytes(dt);
  cudaDataType_t type = dataType(dt);
  p->doublePrecision_ = dt == ir::DType::F64;
  cublasComputeType_t compute =
      p->doublePrecision_ ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
  cudaDataType_t scale = p->doublePrecision_ ? CUDA_R_64F : CUDA_R_32F;
  if (failed(MGC_CUBLAS_CHECK(
          cublasLtMatmulDescCreate(&p->desc_, compute, scale), diag, &op)))
    return nullptr;
  // Column-major views: Lt's A is b (N x K, ld N), Lt's B is a (K x M,
  // ld K), the result N x M (ld N).
  auto layout = [&](cublasLtMatrixLayout_t &l, uint64_t rows, uint64_t cols,
                    int64_t ld, int64_t stride) {
    if (failed(MGC_CUBLAS_CHECK(
            cublasLtMatrixLayoutCreate(&l, type, rows, cols, ld), diag, &op)))
      return false;
    if (batches == 1)
      return true;
    int32_t count = static_cast<int32_t>(batches);
    return succeeded(MGC_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
                                          l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                          &count, sizeof(count)),
                                      diag, &op)) &&
           succeeded(MGC_CUBLAS_CHECK(
               cublasLtMatrixLayoutSetAttribute(
                   l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                   sizeof(stride)),
               diag, &op));
  };
  if (!layout(p->layoutA_, n, k, n, k * n) ||
      !layout(p->layoutB_, k, m, k, m * k) ||
      !layout(p->layoutC_, n, m, n, m * n))
    return nullptr;

  cublasLtMatmulPreference_t pref = nullptr;
  if (failed(
          MGC_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref), diag, &op)))
    return nullptr;
  uint32_t alignB = alignmentOf({uint64_t(k * n) * elem * (batches > 1)});
  uint32_t alignA = alignmentOf({uint64_t(m * k) * elem * (batches > 1)});
  uint32_t alignC = alignmentOf({uint64_t(m * n) * elem * (batches > 1)});
  bool ok =
      succeeded(
          MGC_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
                               pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                               &workspaceBytes, sizeof(workspaceBytes)),
                           diag, &op)) &&
      succeeded(
          MGC_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
                               pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                               &alignB, sizeof(alignB)),
                           diag, &op)) &&
      succeeded(
          MGC_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
                               pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                               &alignA, sizeof(alignA)),
                           diag, &op)) &&
      succeeded(
          MGC_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
                               pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                               &alignC, sizeof(alignC)),
                           diag, &op)) &&
      succeeded(
          MGC_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
                               pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                               &alignC, sizeof(alignC)),
                           diag, &op));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (ok)
    ok = succeeded(MGC_CUBLAS_CHECK(
        cublasLtMatmulAlgoGetHeuristic(handle, p->desc_, p->layoutA_,
                                       p->layoutB_, p->layoutC_, p->layoutC_,
                                       pref, 1, &result, &found),
        diag, &op));
  cublasLtMatmulPreferenceDestroy(pref);
  if (!ok)
    return nullptr;
  if (found == 0) {
    diag.error(op.loc(), "cuBLASLt has no algorithm for matmul " + at.str() +
                             " @ " + bt.str());
    return nullptr;
  }
  p->algo_ = result.algo;
  p->workspaceBytes_ = workspaceBytes;
  return p;
}

LogicalResult MatmulPlan::run(const void *a, const void *b, void *c,
                              void *workspace, cudaStream_t stream,
                              DiagnosticEngine &diag) const {
  if (empty_)
    return success();
  if (zeros_)
    return MGC_CUDA_CHECK(cudaMemsetAsync(c, 0, resultBytes_, stream), diag,
                          &op_);
  float alpha = 1, beta = 0;
  double alpha64 = 1, beta64 = 0;
  const void *alphaPtr = doublePrecision_ ? static_cast<const void *>(&alpha64)
                                          : static_cast<const void *>(&alpha);
  const void *betaPtr = doublePrecision_ ? static_cast<const void *>(&beta64)
                                         : static_cast<const void *>(&beta);
  return MGC_CUBLAS_CHECK(cublasLtMatmul(handle_, desc_, alphaPtr, b, layoutA_,
                                         a, layoutB_, betaPtr, c, layoutC_, c,
                                         layoutC_, &algo_, workspace,
                                         workspaceBytes_, stream),
                          diag, &op_);
}

} // namespace mgc::backend::cuda
