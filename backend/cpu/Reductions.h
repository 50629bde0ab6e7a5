// The element-wise reductions of the communicators: the sum and the maximum
// of the parts of a collective, taken in coordinate order. Every
// communicator (in-process, MPI) reduces through these, so that a run on N
// processes is bit-identical to the same mesh simulated in one process.
#pragma once

#include "ir/Types.h"

#include "llvm/ADT/ArrayRef.h"

#include <cstddef>
#include <cstdint>

namespace mgc::backend::cpu {

// dst[i] = srcs[0][i] + srcs[1][i] + ... in that order, for i in [0, n):
// f32 and f64 in their own type, bf16 and f16 in f32 (rounded once at the
// end), integers wrapping. `dst` may be one of the sources.
void sumParts(ir::DType dtype, llvm::ArrayRef<const std::byte *> srcs,
              std::byte *dst, int64_t n);

// dst[i] = the maximum over j (in order) of srcs[j][i]: the first NaN, else
// the first of the largest values, copied bit for bit.
void maxParts(ir::DType dtype, llvm::ArrayRef<const std::byte *> srcs,
              std::byte *dst, int64_t n);

} // namespace mgc::backend::cpu
