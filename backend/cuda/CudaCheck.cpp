// Reporting of failed CUDA and cuBLAS calls.
#include "backend/cuda/CudaCheck.h"

#include "llvm/ADT/StringRef.h"

#include <string>

namespace mgc::backend::cuda {

namespace {

// The path from the repository root (backend/cuda/...), not the build
// machine's absolute path.
llvm::StringRef shortFile(const char *file) {
  llvm::StringRef f(file);
  size_t at = f.rfind("backend/");
  return at == llvm::StringRef::npos ? f : f.substr(at);
}

LogicalResult report(std::string message, DiagnosticEngine &diag,
                     const ir::Op *op) {
  if (op)
    diag.error(op->loc(),
               "op '" + op->name().str() + "' on the CUDA device: " + message);
  else
    diag.error(message);
  return failure();
}

} // namespace

std::string describeCudaFailure(const char *call, const char *file, int line,
                                const char *name, const char *what) {
  return std::string(call) + " failed at " + shortFile(file).str() + ":" +
         std::to_string(line) + ": " + name + ": " + what;
}

std::string cudaFailure(const char *call, cudaError_t status) {
  return std::string(call) + " failed: " + cudaGetErrorName(status) + ": " +
         cudaGetErrorString(status);
}

bool noteCudaFailure(const char *call, cudaError_t status, std::string &error) {
  if (status == cudaSuccess)
    return true;
  if (error.empty())
    error = cudaFailure(call, status);
  return false;
}

LogicalResult checkCuda(cudaError_t status, const char *call, const char *file,
                        int line, DiagnosticEngine &diag, const ir::Op *op) {
  if (status == cudaSuccess)
    return success();
  (void)cudaGetLastError(); // clear a sticky launch error where possible
  return report(describeCudaFailure(call, file, line, cudaGetErrorName(status),
                                    cudaGetErrorString(status)),
                diag, op);
}

LogicalResult checkCublas(cublasStatus_t status, const char *call,
                          const char *file, int line, DiagnosticEngine &diag,
                          const ir::Op *op) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return success();
  return report(describeCudaFailure(call, file, line,
                                    cublasLtGetStatusName(status),
                                    cublasLtGetStatusString(status)),
                diag, op);
}

} // namespace mgc::backend::cuda
