// Copies between a tensor's bytes and a slab of it: the elements [off,
// off + len) of one dimension, held contiguously as [outer, len, inner]
// (outer: the elements before the dimension, inner: those after it). Used
// to cut tensors into device parts and to pack the parts a communicator
// exchanges.
#pragma once

#include "ir/Types.h"

#include "llvm/ADT/ArrayRef.h"

#include <cstddef>
#include <cstring>

namespace mgc::runtime {

// Copies elements [off, off + len) of dimension `dim` of a tensor of shape
// `shape` (elements of `bytes` bytes) to the contiguous box at `box`.
inline void packSlab(const std::byte *tensor, llvm::ArrayRef<int64_t> shape,
                     int64_t dim, int64_t off, int64_t len, std::byte *box,
                     size_t bytes) {
  int64_t outer = ir::numElements(shape.take_front(dim)).value_or(0);
  int64_t inner = ir::numElements(shape.drop_front(dim + 1)).value_or(0);
  size_t row = static_cast<size_t>(len * inner) * bytes;
  if (row == 0)
    return;
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(box + o * row, tensor + (o * shape[dim] + off) * inner * bytes,
                row);
}

// The reverse of packSlab: the box goes to elements [off, off + len) of
// dimension `dim`.
inline void unpackSlab(const std::byte *box, llvm::ArrayRef<int64_t> shape,
                       int64_t dim, int64_t off, int64_t len, std::byte *tensor,
                       size_t bytes) {
  int64_t outer = ir::numElements(shape.take_front(dim)).value_or(0);
  int64_t inner = ir::numElements(shape.drop_front(dim + 1)).value_or(0);
  size_t row = static_cast<size_t>(len * inner) * bytes;
  if (row == 0)
    return;
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(tensor + (o * shape[dim] + off) * inner * bytes, box + o * row,
                row);
}

} // namespace mgc::runtime
