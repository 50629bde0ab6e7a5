// The CPU kernels: one function per row of ir/OpKinds.def, each working on
// raw pointers into the arena (or into bound argument tensors) with the
// shapes of the op's operand and result types. Kernels never allocate: any
// scratch space they need is declared by scratchBytes and planned with the
// rest of the arena. Internal to the CPU backend.
#pragma once

#include "backend/Communicator.h"
#include "backend/cpu/ThreadPool.h"
#include "ir/Graph.h"
#include "support/Result.h"

#include "llvm/ADT/ArrayRef.h"

#include <cstddef>
#include <string>

namespace mgc::backend::cpu {

// A tensor as a kernel sees it: storage in the element type's own format.
struct TensorRef {
  std::byte *data = nullptr;
  const ir::TensorType *type = nullptr;

  template <typename T> T *as() const { return reinterpret_cast<T *>(data); }
  int64_t size() const { return type->size(); }
  ir::DType dtype() const { return type->dtype; }
  llvm::ArrayRef<int64_t> shape() const { return type->shape; }
};

struct KernelArgs {
  const ir::Op &op;
  llvm::ArrayRef<TensorRef> in; // the operands
  TensorRef out;                // the result (never aliases an operand)
  std::byte *scratch = nullptr;
  uint64_t scratchBytes = 0;
  ThreadPool &pool;
  // Why a kernel failed (an id out of range, an integer division by zero);
  // the executor reports it at the op's location.
  std::string *error = nullptr;
  // The device's communicator in a multi-device run (null otherwise): the
  // communication ops exchange data through it, and local_split asks it
  // for the device's coordinate.
  Communicator *comm = nullptr;
  // matmul and matmul_epilogue: operand 0 or 1 is given as the matrix it is
  // the transpose of (the executor skipped that transpose op), to be read
  // through GEMM's transpose flag instead of a copy.
  bool transposed[2] = {false, false};

  LogicalResult fail(std::string message) const {
    if (error)
      *error = std::move(message);
    return failure();
  }
};

using KernelFn = LogicalResult (*)(const KernelArgs &args);

#define MGC_OP(Id, Name, Arity, Attrs, Rule, Traits, Summary)                  \
  LogicalResult kernel##Id(const KernelArgs &args);
#include "ir/OpKinds.def"

// The kernel of an op kind (from a table built from OpKinds.def).
KernelFn kernelFor(ir::OpKind kind);

// Scratch bytes the kernel of `op` needs (0 for most ops).
uint64_t scratchBytes(const ir::Op &op);
// The part of it for attention_grad (backend/cpu/KernelsAttention.cpp).
uint64_t attentionGradScratchBytes(const ir::Op &op);
// The part of it for cross_entropy (KernelsNN.cpp).
uint64_t crossEntropyScratchBytes(const ir::Op &op);
// The part of it for conv2d and its backward ops (KernelsConv.cpp).
uint64_t convScratchBytes(const ir::Op &op);

// Makes OpenBLAS single-threaded (once): the kernels split GEMMs into
// blocks of a fixed size themselves, so that results do not depend on the
// number of threads.
void singleThreadedBlas();

// Chunk sizes of parallel loops, in elements or rows: fixed, so that results
// do not depend on the number of threads.
constexpr int64_t kElementGrain = 1 << 14;
constexpr int64_t kRowGrain = 16;

} // namespace mgc::backend::cpu
