// Static memory planning: every intermediate buffer of a scheduled program
// gets an offset in one arena, so that buffers live at the same time never
// overlap and buffers that are never live together share bytes. Backend
// independent: the CPU and CUDA backends both place their arena this way.
#pragma once

#include "ir/Graph.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace mgc::backend {

// One buffer to place: `size` bytes, live from step `first` to step `last`
// inclusive (steps are positions in the schedule).
struct BufferRequest {
  uint64_t size = 0;
  uint32_t first = 0;
  uint32_t last = 0;
};

struct BufferPlacement {
  std::vector<uint64_t> offsets; // one per request, multiples of alignment
  uint64_t peak = 0;             // arena bytes needed
};

constexpr uint64_t kArenaAlignment = 64;

// Greedy best-fit by liveness: requests are placed in order of their first
// step (ties: larger first); when a buffer starts, the buffers whose last
// step has passed are free again and the smallest free gap that fits is
// taken (or the arena grows at its top). Sizes are rounded up to
// `alignment`; a zero-size request gets an offset but takes no space.
BufferPlacement placeBuffers(llvm::ArrayRef<BufferRequest> requests,
                             uint64_t alignment = kArenaAlignment);

// The largest total (aligned) size of the buffers live at any one step: a
// lower bound of every valid placement's peak.
uint64_t maxLiveBytes(llvm::ArrayRef<BufferRequest> requests,
                      uint64_t alignment = kArenaAlignment);

// Where the value of one op and its scratch space live in the arena.
struct OpSlot {
  uint64_t offset = 0;
  uint64_t size = 0; // bytes of the op's result
  uint64_t scratchOffset = 0;
  uint64_t scratchSize = 0; // bytes of scratch space the kernel may use
};

// The memory plan of a graph run in a given op order: one slot per op
// (indexed by the op's position in the graph, not in the order).
struct MemoryPlan {
  std::vector<OpSlot> slots;
  uint64_t peak = 0;
};

// Scratch bytes a backend's kernel needs for an op (0 for most ops).
using ScratchFn = llvm::function_ref<uint64_t(const ir::Op &op)>;

// Plans the arena of `graph` run in `order` (indices of graph ops, a valid
// schedule: every operand defined before its use). A result is live from
// its op to its last use; outputs and update values live to the end;
// arguments (inputs, parameters, state) are bound separately and take no
// arena space. Scratch space is live during its op only. A communication
// op (trait kCollective) runs on the communication queue while the compute
// queue goes on until its wait point (waitSteps): its operands, its result
// and its scratch space stay live from its step to its wait point.
MemoryPlan planMemory(const ir::Graph &graph, llvm::ArrayRef<uint32_t> order,
                      ScratchFn scratch);

// For each op of the graph (by graph position), the step by which its work
// is complete from the compute queue's point of view. For an op run by the
// compute queue, its own step. For a communication op, its wait point: the
// step of the first op in `order` that uses its result (the compute queue
// waits for the communication op before running that op), or
// order.size() (the end of the step) when no op uses it.
std::vector<uint32_t> waitSteps(const ir::Graph &graph,
                                llvm::ArrayRef<uint32_t> order);

// One request per op of the graph (indexed by graph position): its result's
// bytes and live range in `order`, as planMemory sees them (extended to the
// wait points of the communication ops that use or define it).
std::vector<BufferRequest> resultBuffers(const ir::Graph &graph,
                                         llvm::ArrayRef<uint32_t> order);

// The scratch request of an op of `scratchBytes` bytes at graph position
// `op`: live from its step to its wait point.
BufferRequest scratchBuffer(uint64_t scratchBytes, uint32_t op,
                            llvm::ArrayRef<BufferRequest> results,
                            llvm::ArrayRef<uint32_t> waits);

// Two requests live at a common step whose byte ranges overlap, if any.
std::optional<std::pair<size_t, size_t>>
findConflict(llvm::ArrayRef<BufferRequest> requests,
             llvm::ArrayRef<uint64_t> offsets);

// Bytes of a value of this type.
uint64_t typeBytes(const ir::TensorType &type);

} // namespace mgc::backend
