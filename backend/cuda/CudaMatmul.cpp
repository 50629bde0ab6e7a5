// cuBLASLt GEMM plans for matmul and matmul_epilogue.
#include "backend/cuda/CudaMatmul.h"

#include "backend/cuda/CudaCheck.h"
#include "ir/MatmulEpilogue.h"

#include <cstdint>
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

// The alignment the plan assumes of the bias and h pointers (cuBLASLt reads
// it from the pointer values given when the algorithm is chosen; the real
// pointers are set at each run and checked against it). Every tensor of the
// executor starts at a multiple of 64 bytes.
constexpr uintptr_t kExtraAlignment = 16;
const void *const kAlignedPlaceholder =
    reinterpret_cast<const void *>(kExtraAlignment);

// The whole epilogue as work after the GEMM.
EpilogueAfter allAfter(ir::MatmulEpilogue e) {
  switch (e) {
  case ir::MatmulEpilogue::Bias:
    return EpilogueAfter::Bias;
  case ir::MatmulEpilogue::BiasGelu:
    return EpilogueAfter::BiasGelu;
  case ir::MatmulEpilogue::GeluGrad:
    break;
  }
  return EpilogueAfter::GeluGrad;
}

// cuBLASLt's part of epilogue `e` on a result of `dt` with rows of n
// elements (m rows per batch), and what is left after it. f64 keeps the
// plain GEMM (our kernel adds the epilogue); f32 takes the bias only: the
// GELU epilogues round differently from our f32 formula (ir/ScalarMath.h),
// so f32 keeps to ours. DGELU reads h with a leading dimension of n, which
// cuBLASLt requires to be a multiple of 8 (and so the batch stride m * n).
std::pair<cublasLtEpilogue_t, EpilogueAfter>
chooseEpilogue(ir::MatmulEpilogue e, ir::DType dt, int64_t n) {
  bool half = dt == ir::DType::BF16 || dt == ir::DType::F16;
  if (dt == ir::DType::F64)
    return {CUBLASLT_EPILOGUE_DEFAULT, allAfter(e)};
  switch (e) {
  case ir::MatmulEpilogue::Bias:
    return {CUBLASLT_EPILOGUE_BIAS, EpilogueAfter::None};
  case ir::MatmulEpilogue::BiasGelu:
    if (half)
      return {CUBLASLT_EPILOGUE_GELU_BIAS, EpilogueAfter::None};
    return {CUBLASLT_EPILOGUE_BIAS, EpilogueAfter::Gelu};
  case ir::MatmulEpilogue::GeluGrad:
    break;
  }
  if (half && n % 8 == 0)
    return {CUBLASLT_EPILOGUE_DGELU, EpilogueAfter::None};
  return {CUBLASLT_EPILOGUE_DEFAULT, EpilogueAfter::GeluGrad};
}

bool hasBias(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_BIAS;
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
  std::optional<ir::MatmulEpilogue> epilogue;
  if (op.kind() == ir::OpKind::MatmulEpilogue) {
    epilogue = ir::parseMatmulEpilogue(op.attrs().getString("epilogue"));
    if (!epilogue) {
      diag.error(op.loc(), "matmul_epilogue: unknown epilogue '" +
                               op.attrs().getString("epilogue") + "'");
      return nullptr;
    }
    // Until cuBLASLt takes a part: all of it after the GEMM (also for an
    // empty contraction, whose zeros still get the epilogue).
    p->after_ = allAfter(*epilogue);
  }
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
  // cuBLASLt's part of the epilogue first; where it has no algorithm for
  // it, the plain GEMM with all of the epilogue after it.
  if (ok && epilogue) {
    auto [lt, rest] = chooseEpilogue(*epilogue, dt, n);
    if (lt != CUBLASLT_EPILOGUE_DEFAULT &&
        succeeded(p->setEpilogue(lt, n, m, batches, diag))) {
      cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
          handle, p->desc_, p->layoutA_, p->layoutB_, p->layoutC_, p->layoutC_,
          pref, 1, &result, &found);
      if (status == CUBLAS_STATUS_SUCCESS && found > 0) {
        p->ltEpilogue_ = lt;
        p->after_ = rest;
      } else {
        found = 0;
        ok = succeeded(
            p->setEpilogue(CUBLASLT_EPILOGUE_DEFAULT, n, m, batches, diag));
      }
    }
  }
  if (ok && found == 0)
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

// The descriptor's epilogue and, for the algorithm search, placeholders of
// the bias and h pointers with the alignment the runs check.
LogicalResult MatmulPlan::setEpilogue(cublasLtEpilogue_t lt, int64_t n,
                                      int64_t m, int64_t batches,
                                      DiagnosticEngine &diag) {
  auto set = [&](cublasLtMatmulDescAttributes_t attr, const void *value,
                 size_t size) {
    return MGC_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(desc_, attr, value, size), diag, &op_);
  };
  if (failed(set(CUBLASLT_MATMUL_DESC_EPILOGUE, &lt, sizeof(lt))))
    return failure();
  if (hasBias(lt) &&
      failed(set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, &kAlignedPlaceholder,
                 sizeof(kAlignedPlaceholder))))
    return failure();
  if (lt == CUBLASLT_EPILOGUE_DGELU) {
    // h has the result's layout: column-major N x M, leading dimension N.
    int64_t ld = n, stride = batches > 1 ? m * n : 0;
    if (failed(set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                   &kAlignedPlaceholder, sizeof(kAlignedPlaceholder))) ||
        failed(set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof(ld))) ||
        failed(set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, &stride,
                   sizeof(stride))))
      return failure();
  }
  return success();
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

LogicalResult MatmulPlan::run(const void *a, const void *b, const void *extra,
                              void *c, void *workspace, cudaStream_t stream,
                              DiagnosticEngine &diag) const {
  if (ltEpilogue_ != CUBLASLT_EPILOGUE_DEFAULT && !empty_ && !zeros_) {
    if (reinterpret_cast<uintptr_t>(extra) % kExtraAlignment != 0) {
      diag.error(op_.loc(), "matmul_epilogue: operand 2 is not aligned to " +
                                std::to_string(kExtraAlignment) +
                                " bytes (internal error)");
      return failure();
    }
    cublasLtMatmulDescAttributes_t attr =
        hasBias(ltEpilogue_) ? CUBLASLT_MATMUL_DESC_BIAS_POINTER
                             : CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER;
    if (failed(MGC_CUBLAS_CHECK(
            cublasLtMatmulDescSetAttribute(desc_, attr, &extra, sizeof(extra)),
            diag, &op_)))
      return failure();
  }
  return run(a, b, c, workspace, stream, diag);
}

} // namespace mgc::backend::cuda
