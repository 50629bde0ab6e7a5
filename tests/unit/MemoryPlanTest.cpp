// The memory planner: placements never overlap buffers that are live
// together (checked by brute force on random requests and random graphs),
// reuse happens, and the peak lies between the largest live set and the
// sum of all sizes.
#include "backend/MemoryPlan.h"

#include "ir/Builder.h"
#include "support/Random.h"

#include <doctest/doctest.h>

#include <map>
#include <numeric>

namespace mgc::backend {
namespace {

uint64_t aligned(uint64_t n) {
  return (n + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

// Every pair of requests live at a common step must have disjoint bytes.
void checkNoOverlap(llvm::ArrayRef<BufferRequest> requests,
                    llvm::ArrayRef<uint64_t> offsets, uint64_t peak) {
  for (size_t a = 0; a < requests.size(); ++a) {
    CHECK(offsets[a] % kArenaAlignment == 0);
    CHECK(offsets[a] + requests[a].size <= peak);
    for (size_t b = a + 1; b < requests.size(); ++b) {
      bool together = requests[a].first <= requests[b].last &&
                      requests[b].first <= requests[a].last;
      bool disjoint = offsets[a] + requests[a].size <= offsets[b] ||
                      offsets[b] + requests[b].size <= offsets[a] ||
                      requests[a].size == 0 || requests[b].size == 0;
      if (together && !disjoint) {
        INFO("buffers " << a << " and " << b << " overlap");
        CHECK(disjoint);
      }
    }
  }
}

TEST_CASE("MemoryPlan: random requests never overlap while live together") {
  for (uint64_t seed = 0; seed < 50; ++seed) {
    std::vector<BufferRequest> requests;
    uint64_t n = 1 + randomBits(seed, 1, 0) % 60;
    uint64_t total = 0;
    for (uint64_t i = 0; i < n; ++i) {
      uint32_t first = static_cast<uint32_t>(randomBits(seed, 2, i) % 40);
      uint32_t len = static_cast<uint32_t>(randomBits(seed, 3, i) % 10);
      uint64_t size = randomBits(seed, 4, i) % 5000;
      requests.push_back({size, first, first + len});
      total += aligned(size);
    }
    BufferPlacement p = placeBuffers(requests);
    checkNoOverlap(requests, p.offsets, p.peak);
    CHECK(p.peak <= total);
    CHECK(p.peak >= maxLiveBytes(requests));
    CHECK_FALSE(findConflict(requests, p.offsets).has_value());
  }
}

// The best-fit placement as first written: a scan of every live block per
// buffer (quadratic). The planner keeps its gaps in a set instead; both
// must choose the same offsets.
BufferPlacement placeByScanning(llvm::ArrayRef<BufferRequest> requests) {
  BufferPlacement result;
  result.offsets.assign(requests.size(), 0);
  std::vector<size_t> byStart(requests.size());
  std::iota(byStart.begin(), byStart.end(), 0);
  std::stable_sort(byStart.begin(), byStart.end(), [&](size_t a, size_t b) {
    if (requests[a].first != requests[b].first)
      return requests[a].first < requests[b].first;
    return requests[a].size > requests[b].size;
  });
  std::map<uint64_t, std::pair<uint64_t, size_t>> live;
  for (size_t r : byStart) {
    for (auto it = live.begin(); it != live.end();)
      it = requests[it->second.second].last < requests[r].first ? live.erase(it)
                                                                : std::next(it);
    uint64_t size = aligned(requests[r].size);
    if (size == 0)
      continue;
    uint64_t best = UINT64_MAX, bestGap = UINT64_MAX, cursor = 0;
    for (const auto &[offset, block] : live) {
      if (offset >= cursor && offset - cursor >= size &&
          offset - cursor < bestGap) {
        bestGap = offset - cursor;
        best = cursor;
      }
      cursor = std::max(cursor, block.first);
    }
    if (best == UINT64_MAX)
      best = cursor;
    result.offsets[r] = best;
    live[best] = {best + size, r};
    result.peak = std::max(result.peak, best + size);
  }
  return result;
}

TEST_CASE("MemoryPlan: the gap set places every buffer where the scan "
          "did") {
  for (uint64_t seed = 0; seed < 300; ++seed) {
    std::vector<BufferRequest> requests;
    uint64_t n = 1 + randomBits(seed, 11, 0) % 200;
    for (uint64_t i = 0; i < n; ++i) {
      uint32_t first = static_cast<uint32_t>(randomBits(seed, 12, i) % 80);
      uint32_t len = static_cast<uint32_t>(randomBits(seed, 13, i) % 20);
      // Few distinct sizes, so that gaps of equal size compete.
      uint64_t size = (randomBits(seed, 14, i) % 6) * 100;
      requests.push_back({size, first, first + len});
    }
    BufferPlacement fast = placeBuffers(requests);
    BufferPlacement slow = placeByScanning(requests);
    CAPTURE(seed);
    CHECK(fast.offsets == slow.offsets);
    CHECK(fast.peak == slow.peak);
  }
}

TEST_CASE("MemoryPlan: buffers that are never live together share bytes") {
  // A chain: each buffer dies when the next one is made.
  std::vector<BufferRequest> chain;
  for (uint32_t i = 0; i < 10; ++i)
    chain.push_back({1000, i, i + 1});
  BufferPlacement p = placeBuffers(chain);
  CHECK(p.peak == 2 * aligned(1000));
  CHECK(p.offsets[0] == p.offsets[2]);
  // Best fit: a small buffer takes the smaller of two free gaps.
  std::vector<BufferRequest> gaps = {
      {512, 0, 0}, {256, 0, 5}, {128, 0, 0}, {100, 0, 5}, {128, 1, 1}};
  BufferPlacement g = placeBuffers(gaps);
  CHECK(g.offsets[2] == 768);
  CHECK(g.offsets[4] == 768); // the 128-byte gap, not the 512-byte one
  checkNoOverlap(gaps, g.offsets, g.peak);
}

TEST_CASE("MemoryPlan: findConflict spots overlapping live buffers") {
  std::vector<BufferRequest> r = {{100, 0, 3}, {100, 2, 4}, {100, 5, 6}};
  CHECK(findConflict(r, {0, 64, 0}) == std::make_pair(size_t(0), size_t(1)));
  CHECK_FALSE(findConflict(r, {0, 128, 0}).has_value());
}

// Random graphs of elementwise ops: the plan of the graph is checked against
// the liveness recomputed here from the graph itself.
TEST_CASE("MemoryPlan: random graphs") {
  for (uint64_t seed = 0; seed < 20; ++seed) {
    ir::Module m;
    ir::Builder b(m.graph());
    std::vector<ir::Value *> pool;
    for (int i = 0; i < 3; ++i)
      pool.push_back(m.graph().addInput(
          "x" + std::to_string(i), ir::TensorType(ir::DType::F32, {8, 8})));
    uint64_t ops = 5 + randomBits(seed, 5, 0) % 40;
    for (uint64_t i = 0; i < ops; ++i) {
      ir::Value *a = pool[randomBits(seed, 6, i) % pool.size()];
      ir::Value *c = pool[randomBits(seed, 7, i) % pool.size()];
      auto r = randomBits(seed, 8, i) % 2 ? b.create(ir::OpKind::Add, {a, c})
                                          : b.create(ir::OpKind::Exp, {a});
      REQUIRE(r.ok());
      pool.push_back(r.value);
    }
    m.graph().addOutput("out", pool.back());
    std::vector<uint32_t> order(m.graph().numOps());
    for (uint32_t i = 0; i < order.size(); ++i)
      order[i] = i;
    MemoryPlan plan = planMemory(m.graph(), order,
                                 [](const ir::Op &) { return uint64_t(0); });

    // Liveness from scratch: first = index, last = last reading op or end.
    std::vector<const ir::Op *> list;
    for (const auto &op : m.graph().ops())
      list.push_back(op.get());
    std::vector<BufferRequest> requests;
    uint64_t total = 0;
    for (uint32_t i = 0; i < list.size(); ++i) {
      uint32_t last = i;
      for (uint32_t j = i + 1; j < list.size(); ++j)
        for (const ir::Value *v : list[j]->operands())
          if (v == list[i]->result())
            last = j;
      if (m.graph().outputs()[0].value == list[i]->result())
        last = static_cast<uint32_t>(list.size());
      requests.push_back({256, i, last});
      total += 256;
    }
    std::vector<uint64_t> offsets;
    for (const OpSlot &s : plan.slots) {
      CHECK(s.size == 256);
      offsets.push_back(s.offset);
    }
    checkNoOverlap(requests, offsets, plan.peak);
    CHECK(plan.peak <= total);
    CHECK(plan.peak >= maxLiveBytes(requests));
  }
}

} // namespace
} // namespace mgc::backend
