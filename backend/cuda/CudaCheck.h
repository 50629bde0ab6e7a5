// Checks of CUDA runtime and cuBLAS calls: a failed call is reported to the
// DiagnosticEngine with the call's text, the error's name and description,
// the file and line of the check and, inside a step, the op being run (at
// its source location), and becomes a failure value; nothing aborts.
#pragma once

#include "ir/Graph.h"
#include "support/Diagnostics.h"
#include "support/Result.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

namespace mgc::backend::cuda {

LogicalResult checkCuda(cudaError_t status, const char *call, const char *file,
                        int line, DiagnosticEngine &diag, const ir::Op *op);
LogicalResult checkCublas(cublasStatus_t status, const char *call,
                          const char *file, int line, DiagnosticEngine &diag,
                          const ir::Op *op);

// The text of a failed check (without the op): "cudaMalloc(...) failed at
// backend/cuda/CudaExecutor.cpp:42: cudaErrorMemoryAllocation: out of
// memory". Exposed for tests.
std::string describeCudaFailure(const char *call, const char *file, int line,
                                const char *name, const char *what);

// "<call> failed: <name>: <text>", for code that reports in an error
// string (the communicators).
std::string cudaFailure(const char *call, cudaError_t status);
// False, with `error` set to cudaFailure unless it already holds an
// earlier failure, when `status` is not cudaSuccess.
bool noteCudaFailure(const char *call, cudaError_t status, std::string &error);

} // namespace mgc::backend::cuda

// MGC_CUDA_CHECK(cudaMemcpyAsync(...), diag, op) -> LogicalResult; `op` may
// be null outside a step.
#define MGC_CUDA_CHECK(call, diag, op)                                         \
  ::mgc::backend::cuda::checkCuda((call), #call, __FILE__, __LINE__, (diag),   \
                                  (op))
#define MGC_CUBLAS_CHECK(call, diag, op)                                       \
  ::mgc::backend::cuda::checkCublas((call), #call, __FILE__, __LINE__, (diag), \
                                    (op))
