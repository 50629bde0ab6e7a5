// The CUDA backend's op dispatch: for each op kind of ir/OpKinds.def, a
// function that reads the op's attributes and shapes and enqueues its
// kernels (Launch.h) or cuBLASLt GEMM (CudaMatmul.h) on the executor's
// stream. Which ops the backend runs, the scratch space each needs, and the
// words for a run-time error found on the device. Internal to the backend.
#pragma once

#include "backend/Communicator.h"
#include "backend/cuda/CudaMatmul.h"
#include "backend/cuda/Launch.h"
#include "ir/Graph.h"
#include "support/Diagnostics.h"
#include "support/Result.h"

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <string>

namespace mgc::backend::cuda {

// A tensor in device memory.
struct DeviceTensor {
  void *data = nullptr;
  const ir::TensorType *type = nullptr;

  int64_t size() const { return type->size(); }
  ir::DType dtype() const { return type->dtype; }
  llvm::ArrayRef<int64_t> shape() const { return type->shape; }
};

struct CudaKernelArgs {
  const ir::Op &op;
  llvm::ArrayRef<DeviceTensor> in; // the operands
  DeviceTensor out;                // never aliases an operand
  void *scratch = nullptr;         // cudaScratchBytes(op) bytes
  Launch launch;
  const MatmulPlan *matmul = nullptr; // for matmul
  void *workspace = nullptr;          // cuBLASLt's
  DiagnosticEngine &diag;
  // The device's communicator in a multi-device run (a stream communicator:
  // Communicator::onStream), null otherwise; a communication op's launch
  // stream is the device's communication stream.
  Communicator *comm = nullptr;
};

using CudaKernelFn = LogicalResult (*)(const CudaKernelArgs &args);

// Why the CUDA backend cannot run `op` ("" when it can): an op without a
// kernel, integer matmul, or anything beyond ir::kCudaTarget's limits
// (ir::exceedsTarget). Needs no GPU: `mgc compile --backend cuda` runs it.
std::string cudaUnsupported(const ir::Op &op);
// The dispatch function of a supported op.
CudaKernelFn cudaKernelFor(ir::OpKind kind);
// The dispatch functions of the communication ops and local_split
// (CudaCollective.cpp), or null.
CudaKernelFn cudaCollectiveKernelFor(ir::OpKind kind);
// The dispatch functions of the neural-network ops: softmax, norms, rope,
// embedding, losses, causal mask, attention (CudaNN.cpp), or null.
CudaKernelFn cudaNNKernelFor(ir::OpKind kind);
// The dispatch functions of the vocabulary-parallel ops (CudaVocab.cpp), or
// null.
CudaKernelFn cudaVocabKernelFor(ir::OpKind kind);
// Device scratch bytes the op's kernels need (0 for most ops). The executor
// holds one area of the largest size for the compute stream's ops and one
// for the communication ops, which run beside them.
uint64_t cudaScratchBytes(const ir::Op &op);

Dt toDt(ir::DType dtype);

// The words the CPU backend uses for a run-time error of `op`, from a
// DeviceError's code, element and value.
std::string describeDeviceError(const ir::Op &op, uint32_t code,
                                int64_t element, int64_t intValue,
                                double realValue);

} // namespace mgc::backend::cuda
