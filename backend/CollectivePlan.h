// What a communication op of a device program asks of its device, whatever
// memory its data is in: this device's coordinate on the op's axis, the
// call it makes on the communicator (element counts per device, in
// coordinate order), and the rearrangement around the call. A tensor
// [outer, n, inner] around the dimension that is split is cut into parts
// [outer, sizes[j], inner]; the communicator exchanges contiguous parts in
// coordinate order, so when outer is more than 1 the operand is packed
// into parts before the call (reduce_scatter, all_to_all) and the received
// parts are unpacked into the result after it (all_gather, all_to_all),
// through the op's scratch space. The CPU and CUDA kernels of these ops
// plan with this and only move the bytes.
#pragma once

#include "backend/Communicator.h"
#include "ir/Graph.h"
#include "support/Result.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mgc::backend {

// The parts of dimension `dim` of a tensor, cut into `sizes`: part j is
// `outer` rows of sizes[j] * inner elements, at element offset(j) * inner
// of each row of total * inner elements; packed, the parts lie one after
// another, part j from element packedStart(j).
struct PartBoxes {
  int64_t outer = 1, inner = 1, total = 0;
  std::vector<int64_t> sizes;

  int64_t offset(size_t j) const;
  int64_t packedStart(size_t j) const { return outer * offset(j) * inner; }
};
PartBoxes partBoxes(llvm::ArrayRef<int64_t> shape, int64_t dim,
                    llvm::ArrayRef<int64_t> sizes);

struct CollectivePlan {
  int64_t coord = 0;
  // all_reduce, all_reduce_max: elements of the call.
  int64_t count = 0;
  // all_gather, reduce_scatter: elements per device; all_to_all: elements
  // sent to each device (counts) and received from each (recvCounts).
  std::vector<int64_t> counts, recvCounts;
  // The operand packed into scratch bytes [0, sendBytes) before the call;
  // the call's result received into scratch bytes [sendBytes, sendBytes +
  // recvBytes) and unpacked into the result after it.
  std::optional<PartBoxes> pack, unpack;
  uint64_t sendBytes = 0, recvBytes = 0;
  // local_split: this device's part (part `coord` of `split`).
  std::optional<PartBoxes> split;
};

// Scratch bytes a communication op needs (0 for other ops).
uint64_t collectiveScratchBytes(const ir::Op &op);

// Plans `op` (a communication op, or local_split) with operand type `in`
// and result type `out` on the device of `comm` (null outside a mesh:
// only local_split with attribute `part` can run). On failure, says why in
// `error`, starting with the op and its axis.
std::optional<CollectivePlan>
planCollective(const ir::Op &op, const Communicator *comm, std::string &error);

// The part of an indexed dimension (classes of logits, rows of an
// embedding table) that a vocabulary-parallel op of a device holds:
// [begin, begin + size) of `whole`. An op with `sizes` holds part c of
// them, c being attribute `part` or the device's coordinate on `axis`; an
// op without (the logical op) holds all `whole` of its own dimension.
struct IndexPart {
  int64_t begin = 0, size = 0, whole = 0;
  bool holds(int64_t id) const { return id >= begin && id < begin + size; }
};
// `dimension`: the size of the op's own dimension (the part's, or the whole
// one without `sizes`). An op whose `axis` is empty holds part `part`
// whatever the device. nullopt with `error` set when the device cannot
// tell which part it holds.
std::optional<IndexPart> planIndexPart(const ir::Op &op,
                                       const Communicator *comm,
                                       int64_t dimension, std::string &error);

} // namespace mgc::backend
