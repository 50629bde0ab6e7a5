// Greedy best-fit placement by liveness, and the requests of a graph.
#include "backend/MemoryPlan.h"

#include "llvm/ADT/DenseMap.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <queue>
#include <set>

namespace mgc::backend {

namespace {

uint64_t alignUp(uint64_t n, uint64_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

// The ops of a graph in graph order, and the index there of the op that
// makes each value.
struct OpIndex {
  std::vector<const ir::Op *> ops;
  llvm::DenseMap<const ir::Value *, uint32_t> of;
};

OpIndex indexOps(const ir::Graph &graph) {
  OpIndex index;
  for (const auto &op : graph.ops()) {
    index.of[op->result()] = static_cast<uint32_t>(index.ops.size());
    index.ops.push_back(op.get());
  }
  return index;
}

} // namespace

uint64_t typeBytes(const ir::TensorType &type) {
  return static_cast<uint64_t>(type.size()) * ir::dtypeBytes(type.dtype);
}

BufferPlacement placeBuffers(llvm::ArrayRef<BufferRequest> requests,
                             uint64_t alignment) {
  BufferPlacement result;
  result.offsets.assign(requests.size(), 0);
  std::vector<size_t> byStart(requests.size());
  std::iota(byStart.begin(), byStart.end(), 0);
  std::stable_sort(byStart.begin(), byStart.end(), [&](size_t a, size_t b) {
    if (requests[a].first != requests[b].first)
      return requests[a].first < requests[b].first;
    return requests[a].size > requests[b].size;
  });

  // Live blocks: offset -> (end, request index), kept sorted by offset;
  // when each ends (last step, offset), soonest first; and the gaps between
  // consecutive live blocks (from 0 to the first, too) as (size, offset).
  // The best fit is then the first gap of at least the size, the lowest
  // offset among equal sizes: each buffer costs O(log n), not a scan of
  // every live block (which made plans of 10^4 ops take seconds).
  std::map<uint64_t, std::pair<uint64_t, size_t>> live;
  using Expiry = std::pair<uint64_t, uint64_t>;
  std::priority_queue<Expiry, std::vector<Expiry>, std::greater<Expiry>> expiry;
  std::set<std::pair<uint64_t, uint64_t>> gaps;
  uint64_t top = 0; // the end of the highest live block
  auto addGap = [&](uint64_t from, uint64_t to) {
    if (to > from)
      gaps.insert({to - from, from});
  };
  auto removeGap = [&](uint64_t from, uint64_t to) {
    if (to > from)
      gaps.erase({to - from, from});
  };
  auto release =
      [&](std::map<uint64_t, std::pair<uint64_t, size_t>>::iterator block) {
        uint64_t begin = block->first, end = block->second.first;
        uint64_t below =
            block == live.begin() ? 0 : std::prev(block)->second.first;
        auto next = std::next(block);
        removeGap(below, begin);
        if (next != live.end()) {
          removeGap(end, next->first);
          addGap(below, next->first);
        } else {
          top = below;
        }
        live.erase(block);
      };
  for (size_t r : byStart) {
    const BufferRequest &req = requests[r];
    // Free every block whose last step is before this buffer's first.
    while (!expiry.empty() && expiry.top().first < req.first) {
      release(live.find(expiry.top().second));
      expiry.pop();
    }
    uint64_t size = alignUp(req.size, alignment);
    if (size == 0) {
      result.offsets[r] = 0;
      continue;
    }
    uint64_t best;
    auto gap = gaps.lower_bound({size, 0});
    if (gap != gaps.end()) {
      auto [gapSize, gapBegin] = *gap;
      gaps.erase(gap);
      best = gapBegin;
      addGap(best + size, gapBegin + gapSize);
    } else {
      best = top;
      top = best + size;
    }
    result.offsets[r] = best;
    live[best] = {best + size, r};
    expiry.push({req.last, best});
    result.peak = std::max(result.peak, best + size);
  }
  return result;
}

uint64_t maxLiveBytes(llvm::ArrayRef<BufferRequest> requests,
                      uint64_t alignment) {
  // Sweep the steps: +size at first, -size after last.
  std::map<uint64_t, int64_t> delta;
  for (const BufferRequest &r : requests) {
    int64_t s = static_cast<int64_t>(alignUp(r.size, alignment));
    delta[r.first] += s;
    delta[uint64_t(r.last) + 1] -= s;
  }
  int64_t current = 0, best = 0;
  for (const auto &[step, d] : delta) {
    current += d;
    best = std::max(best, current);
  }
  return static_cast<uint64_t>(best);
}

std::vector<uint32_t> waitSteps(const ir::Graph &graph,
                                llvm::ArrayRef<uint32_t> order) {
  OpIndex index = indexOps(graph);
  uint32_t steps = static_cast<uint32_t>(order.size());
  std::vector<uint32_t> waits(index.ops.size(), 0);
  // Ops missing from the order (never in a valid schedule) count as the end.
  std::vector<bool> waited(index.ops.size(), false);
  for (uint32_t i = 0; i < index.ops.size(); ++i)
    waits[i] = steps;
  for (uint32_t s = 0; s < steps; ++s)
    if (!index.ops[order[s]]->info().has(ir::kCollective)) {
      waits[order[s]] = s;
      waited[order[s]] = true;
    }
  // A communication op's first user in the order is where it is waited for.
  for (uint32_t s = 0; s < steps; ++s)
    for (const ir::Value *v : index.ops[order[s]]->operands()) {
      auto it = index.of.find(v);
      if (it != index.of.end() && !waited[it->second]) {
        waits[it->second] = s;
        waited[it->second] = true;
      }
    }
  return waits;
}

std::vector<BufferRequest> resultBuffers(const ir::Graph &graph,
                                         llvm::ArrayRef<uint32_t> order) {
  OpIndex index = indexOps(graph);
  uint32_t steps = static_cast<uint32_t>(order.size());
  // Step of each op in the order, and the last step reading each result.
  std::vector<BufferRequest> requests(index.ops.size());
  for (uint32_t s = 0; s < steps; ++s) {
    requests[order[s]].first = s;
    requests[order[s]].last = s;
  }
  for (uint32_t s = 0; s < steps; ++s)
    for (const ir::Value *v : index.ops[order[s]]->operands()) {
      auto it = index.of.find(v);
      if (it != index.of.end())
        requests[it->second].last = std::max(requests[it->second].last, s);
    }
  auto keepToEnd = [&](const ir::Value *v) {
    auto it = index.of.find(v);
    if (it != index.of.end())
      requests[it->second].last = steps;
  };
  for (const ir::Output &o : graph.outputs())
    keepToEnd(o.value);
  for (const ir::Update &u : graph.updates())
    keepToEnd(u.value);
  // The communication queue reads a communication op's operands and writes
  // its result while the compute queue runs the ops up to the wait point:
  // none of those ops may be given their bytes.
  std::vector<uint32_t> waits = waitSteps(graph, order);
  for (uint32_t s = 0; s < steps; ++s) {
    const ir::Op *op = index.ops[order[s]];
    if (!op->info().has(ir::kCollective))
      continue;
    uint32_t wait = waits[order[s]];
    requests[order[s]].last = std::max(requests[order[s]].last, wait);
    for (const ir::Value *v : op->operands()) {
      auto it = index.of.find(v);
      if (it != index.of.end())
        requests[it->second].last = std::max(requests[it->second].last, wait);
    }
  }
  // A backend may skip a matrix transpose that only matmuls read, the
  // matmuls reading the matrix through GEMM's transpose flag
  // (CpuExecutor::foldTransposes): its operand stays live as long as its
  // result does.
  for (uint32_t s = 0; s < steps; ++s) {
    const ir::Op *op = index.ops[order[s]];
    if (op->kind() != ir::OpKind::Transpose ||
        op->operand(0)->type().rank() != 2)
      continue;
    auto it = index.of.find(op->operand(0));
    if (it != index.of.end())
      requests[it->second].last =
          std::max(requests[it->second].last, requests[order[s]].last);
  }
  for (size_t i = 0; i < index.ops.size(); ++i)
    requests[i].size = typeBytes(index.ops[i]->type());
  return requests;
}

BufferRequest scratchBuffer(uint64_t scratchBytes, uint32_t op,
                            llvm::ArrayRef<BufferRequest> results,
                            llvm::ArrayRef<uint32_t> waits) {
  return {scratchBytes, results[op].first,
          std::max(results[op].first, waits[op])};
}

std::optional<std::pair<size_t, size_t>>
findConflict(llvm::ArrayRef<BufferRequest> requests,
             llvm::ArrayRef<uint64_t> offsets) {
  // Sorted by offset, a buffer can only collide with the ones after it that
  // start before it ends.
  std::vector<size_t> byOffset;
  for (size_t i = 0; i < requests.size(); ++i)
    if (requests[i].size > 0)
      byOffset.push_back(i);
  std::sort(byOffset.begin(), byOffset.end(),
            [&](size_t a, size_t b) { return offsets[a] < offsets[b]; });
  for (size_t x = 0; x < byOffset.size(); ++x) {
    size_t a = byOffset[x];
    uint64_t end = offsets[a] + requests[a].size;
    for (size_t y = x + 1; y < byOffset.size() && offsets[byOffset[y]] < end;
         ++y) {
      size_t b = byOffset[y];
      if (requests[a].first <= requests[b].last &&
          requests[b].first <= requests[a].last)
        return std::make_pair(std::min(a, b), std::max(a, b));
    }
  }
  return std::nullopt;
}

MemoryPlan planMemory(const ir::Graph &graph, llvm::ArrayRef<uint32_t> order,
                      ScratchFn scratch) {
  std::vector<const ir::Op *> ops;
  for (const auto &op : graph.ops())
    ops.push_back(op.get());
  std::vector<BufferRequest> requests = resultBuffers(graph, order);
  std::vector<uint32_t> waits = waitSteps(graph, order);
  // Scratch requests follow the results, live during their op only (to its
  // wait point for a communication op).
  std::vector<std::pair<uint32_t, size_t>> scratchRequests;
  for (uint32_t i = 0; i < ops.size(); ++i)
    if (uint64_t bytes = scratch(*ops[i])) {
      scratchRequests.push_back({i, requests.size()});
      requests.push_back(scratchBuffer(bytes, i, requests, waits));
    }
  BufferPlacement placed = placeBuffers(requests);

  MemoryPlan plan;
  plan.peak = placed.peak;
  plan.slots.resize(ops.size());
  for (uint32_t i = 0; i < ops.size(); ++i) {
    plan.slots[i].offset = placed.offsets[i];
    plan.slots[i].size = requests[i].size;
  }
  for (auto [op, r] : scratchRequests) {
    plan.slots[op].scratchOffset = placed.offsets[r];
    plan.slots[op].scratchSize = requests[r].size;
  }
  return plan;
}

} // namespace mgc::backend
