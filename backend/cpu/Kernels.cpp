// The kernel table: one entry per row of ir/OpKinds.def, in table order, so
// that adding an op there without a CPU kernel fails to build.
#include "backend/cpu/Kernels.h"

namespace mgc::backend::cpu {

namespace {

constexpr KernelFn kKernels[] = {
#define MGC_OP(Id, Name, Arity, Attrs, Rule, Traits, Summary) &kernel##Id,
#include "ir/OpKinds.def"
};
constexpr size_t kNumKernels = sizeof(kKernels) / sizeof(kKernels[0]);

} // namespace

KernelFn kernelFor(ir::OpKind kind) {
  size_t i = static_cast<size_t>(kind);
  return i < kNumKernels ? kKernels[i] : nullptr;
}

} // namespace mgc::backend::cpu
