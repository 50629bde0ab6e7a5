// The point-to-point plans of the collectives (backend/PeerPlan.h), read as
// data: every message a device sends is one its peer receives, with the
// same size; every span lies inside its buffer; a device sends exactly the
// bytes the plan report counts for it (callElementsSent); and the parts of
// each reduction are in coordinate order. The MPI communicator's test runs
// the same plans and compares their results with the in-process
// communicator's, bit for bit.
#include "backend/PeerPlan.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>

namespace mgc::backend::testing {
namespace {

struct Shape {
  CallKind kind;
  std::vector<std::vector<int64_t>> counts, recvCounts; // by coordinate
  int64_t count = 0;
};

GroupCall callOf(const Shape &s, size_t me) {
  GroupCall c;
  c.kind = s.kind;
  c.dtype = ir::DType::BF16; // 2 bytes: offsets are not element indices
  c.count = s.count;
  if (!s.counts.empty())
    c.counts = s.counts[me];
  if (!s.recvCounts.empty())
    c.recvCounts = s.recvCounts[me];
  return c;
}

// Bytes of each buffer of the call of coordinate `me`.
int64_t bufferBytes(const GroupCall &c, PeerSpan::Buffer b, size_t me,
                    const PeerPlan &plan) {
  int64_t all = std::accumulate(c.counts.begin(), c.counts.end(), int64_t(0));
  int64_t allRecv =
      std::accumulate(c.recvCounts.begin(), c.recvCounts.end(), int64_t(0));
  if (b == PeerSpan::Scratch)
    return plan.scratchBytes;
  switch (c.kind) {
  case CallKind::AllReduce:
  case CallKind::AllReduceMax:
    return c.count * 2;
  case CallKind::AllGather:
    return (b == PeerSpan::In ? c.counts[me] : all) * 2;
  case CallKind::ReduceScatter:
    return (b == PeerSpan::In ? all : c.counts[me]) * 2;
  case CallKind::AllToAll:
    break;
  }
  return (b == PeerSpan::In ? all : allRecv) * 2;
}

void checkPlans(const Shape &s, size_t n) {
  std::vector<PeerPlan> plans;
  for (size_t me = 0; me < n; ++me)
    plans.push_back(planPeerCall(callOf(s, me), n, me));
  for (size_t me = 0; me < n; ++me) {
    INFO("coordinate " << me << " of " << n << ", " << describe(callOf(s, me)));
    GroupCall c = callOf(s, me);
    const PeerPlan &plan = plans[me];
    REQUIRE(plan.phases.size() == plans[0].phases.size());
    auto inside = [&](const PeerSpan &span) {
      return span.offset >= 0 && span.bytes >= 0 &&
             span.offset + span.bytes <= bufferBytes(c, span.buffer, me, plan);
    };
    int64_t sent = 0;
    for (size_t p = 0; p < plan.phases.size(); ++p) {
      const PeerPhase &phase = plan.phases[p];
      // One message each way with every other coordinate.
      CHECK(phase.sends.size() == phase.recvs.size());
      for (const PeerMessage &m : phase.sends) {
        CHECK(m.peer != me);
        CHECK(inside(m.span));
        sent += m.span.bytes;
        // The peer's receive from `me` in the same phase, same size.
        const PeerPhase &theirs = plans[m.peer].phases[p];
        auto it =
            std::find_if(theirs.recvs.begin(), theirs.recvs.end(),
                         [&](const PeerMessage &r) { return r.peer == me; });
        REQUIRE(it != theirs.recvs.end());
        CHECK(it->span.bytes == m.span.bytes);
      }
      for (const PeerMessage &m : phase.recvs)
        CHECK(inside(m.span));
      for (const auto &[to, from] : phase.copies) {
        CHECK(inside(to));
        CHECK(inside(from));
        CHECK(to.bytes == from.bytes);
      }
      if (phase.elements > 0) {
        CHECK(phase.parts.size() == n);
        CHECK(inside(phase.reduced));
        for (size_t j = 0; j < phase.parts.size(); ++j) {
          CHECK(inside(phase.parts[j]));
          CHECK(phase.parts[j].bytes == phase.elements * 2);
          // Its own part is read from its input, the others' from where
          // their messages landed.
          CHECK((phase.parts[j].buffer == PeerSpan::In) == (j == me));
        }
      }
    }
    CHECK(sent == callElementsSent(c, n, me) * 2);
  }
}

TEST_CASE("peer plan: every collective's messages meet, fit and move what "
          "the plan report counts") {
  for (size_t n : {1, 2, 3, 5}) {
    // Reductions whose count does not split evenly, and one smaller than
    // the group.
    for (int64_t count : {int64_t(1001), int64_t(2), int64_t(0)}) {
      checkPlans({CallKind::AllReduce, {}, {}, count}, n);
      checkPlans({CallKind::AllReduceMax, {}, {}, count}, n);
    }
    std::vector<int64_t> counts;
    for (size_t j = 0; j < n; ++j)
      counts.push_back(j % 2 ? 0 : static_cast<int64_t>(3 * j + 1));
    std::vector<std::vector<int64_t>> same(n, counts);
    checkPlans({CallKind::AllGather, same, {}}, n);
    checkPlans({CallKind::ReduceScatter, same, {}}, n);
    // All-to-all: coordinate i sends i + j + 1 elements to j, so j
    // receives i + j + 1 from each i.
    std::vector<std::vector<int64_t>> send(n), recv(n);
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j < n; ++j) {
        send[i].push_back(static_cast<int64_t>(i + j + 1));
        recv[i].push_back(static_cast<int64_t>(j + i + 1));
      }
    checkPlans({CallKind::AllToAll, send, recv}, n);
  }
}

} // namespace
} // namespace mgc::backend::testing
