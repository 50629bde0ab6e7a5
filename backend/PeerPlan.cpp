#include "backend/PeerPlan.h"

#include "backend/PlanReport.h"

#include "llvm/ADT/SmallVector.h"

#include <algorithm>

namespace mgc::backend {

namespace {

PeerSpan span(PeerSpan::Buffer buffer, int64_t offset, int64_t bytes) {
  return {buffer, offset, bytes};
}

// Chunk j of each device goes to coordinate j, which adds the parts in
// coordinate order into `reduced`: chunk j is elements [at(j), at(j + 1)).
void addReduceScatter(PeerPlan &plan, size_t n, size_t me, int64_t bytes,
                      llvm::function_ref<int64_t(size_t)> at,
                      PeerSpan reduced) {
  int64_t mine = at(me + 1) - at(me);
  PeerPhase phase;
  for (size_t j = 0; j < n; ++j) {
    if (j != me) {
      phase.recvs.push_back(
          {j, span(PeerSpan::Scratch, j * mine * bytes, mine * bytes)});
      phase.sends.push_back(
          {j, span(PeerSpan::In, at(j) * bytes, (at(j + 1) - at(j)) * bytes)});
    }
    phase.parts.push_back(
        j == me ? span(PeerSpan::In, at(me) * bytes, mine * bytes)
                : span(PeerSpan::Scratch, j * mine * bytes, mine * bytes));
  }
  phase.reduced = reduced;
  phase.elements = mine;
  plan.scratchBytes = static_cast<int64_t>(n) * mine * bytes;
  plan.phases.push_back(std::move(phase));
}

} // namespace

PeerPlan planPeerCall(const GroupCall &call, size_t n, size_t me) {
  int64_t bytes = static_cast<int64_t>(ir::dtypeBytes(call.dtype));
  PeerPlan plan;
  switch (call.kind) {
  case CallKind::AllReduce:
  case CallKind::AllReduceMax: {
    int64_t count = call.count;
    if (n == 1) {
      PeerPhase only;
      only.copies.push_back({span(PeerSpan::Out, 0, count * bytes),
                             span(PeerSpan::In, 0, count * bytes)});
      plan.phases.push_back(std::move(only));
      return plan;
    }
    auto at = [&](size_t j) {
      return count * static_cast<int64_t>(j) / static_cast<int64_t>(n);
    };
    int64_t mine = at(me + 1) - at(me);
    addReduceScatter(plan, n, me, bytes, at,
                     span(PeerSpan::Out, at(me) * bytes, mine * bytes));
    // All-gather of the reduced chunks.
    PeerPhase gather;
    for (size_t j = 0; j < n; ++j)
      if (j != me) {
        gather.recvs.push_back({j, span(PeerSpan::Out, at(j) * bytes,
                                        (at(j + 1) - at(j)) * bytes)});
        gather.sends.push_back(
            {j, span(PeerSpan::Out, at(me) * bytes, mine * bytes)});
      }
    plan.phases.push_back(std::move(gather));
    return plan;
  }
  case CallKind::AllGather: {
    PeerPhase phase;
    int64_t mine = call.counts[me] * bytes;
    for (size_t j = 0; j < n; ++j)
      if (j != me) {
        phase.recvs.push_back(
            {j, span(PeerSpan::Out, partOffset(call.counts, j) * bytes,
                     call.counts[j] * bytes)});
        phase.sends.push_back({j, span(PeerSpan::In, 0, mine)});
      }
    phase.copies.push_back(
        {span(PeerSpan::Out, partOffset(call.counts, me) * bytes, mine),
         span(PeerSpan::In, 0, mine)});
    plan.phases.push_back(std::move(phase));
    return plan;
  }
  case CallKind::ReduceScatter: {
    llvm::ArrayRef<int64_t> counts = call.counts;
    addReduceScatter(
        plan, n, me, bytes, [&](size_t j) { return partOffset(counts, j); },
        span(PeerSpan::Out, 0, counts[me] * bytes));
    return plan;
  }
  case CallKind::AllToAll:
    break;
  }
  llvm::ArrayRef<int64_t> sendCounts = call.counts,
                          recvCounts = call.recvCounts;
  PeerPhase phase;
  for (size_t j = 0; j < n; ++j)
    if (j != me) {
      phase.recvs.push_back(
          {j, span(PeerSpan::Out, partOffset(recvCounts, j) * bytes,
                   recvCounts[j] * bytes)});
      phase.sends.push_back(
          {j, span(PeerSpan::In, partOffset(sendCounts, j) * bytes,
                   sendCounts[j] * bytes)});
    }
  phase.copies.push_back(
      {span(PeerSpan::Out, partOffset(recvCounts, me) * bytes,
            recvCounts[me] * bytes),
       span(PeerSpan::In, partOffset(sendCounts, me) * bytes,
            sendCounts[me] * bytes)});
  plan.phases.push_back(std::move(phase));
  return plan;
}

FailureOr<DeviceCall> planDeviceCall(const ir::Mesh &mesh, int64_t device,
                                     llvm::StringRef axis, const GroupCall &c,
                                     std::string &error) {
  DeviceCall out;
  out.what = std::string(callName(c.kind)) + " on axis '" + axis.str() + "' (" +
             formatBytes(std::max<int64_t>(callElements(c), 0) *
                         ir::dtypeBytes(c.dtype)) +
             ")";
  int a = mesh.axisIndex(axis);
  if (a < 0) {
    error = out.what + ": the mesh " + mesh.str() + " has no such axis";
    return failure();
  }
  out.n = static_cast<size_t>(mesh.axes()[a].size);
  out.me = static_cast<size_t>(mesh.coords(device)[a]);
  std::string bad = badCall(c, out.n);
  if (bad.empty() && c.kind == CallKind::AllToAll &&
      c.counts[out.me] != c.recvCounts[out.me])
    bad = "this device sends itself " + std::to_string(c.counts[out.me]) +
          " elements but expects " + std::to_string(c.recvCounts[out.me]);
  if (!bad.empty()) {
    error = out.what + " of " + std::to_string(out.n) + " devices: " + bad;
    return failure();
  }
  out.plan = planPeerCall(c, out.n, out.me);
  return out;
}

LogicalResult runPeerPlan(const PeerPlan &plan, const GroupCall &call,
                          std::byte *scratch, PeerTransport &transport,
                          DataMover &mover, std::string &error) {
  auto base = [&](PeerSpan::Buffer b) -> std::byte * {
    switch (b) {
    case PeerSpan::In:
      return const_cast<std::byte *>(call.in); // only read
    case PeerSpan::Out:
      return call.out;
    case PeerSpan::Scratch:
      break;
    }
    return scratch;
  };
  auto at = [&](const PeerSpan &s) { return base(s.buffer) + s.offset; };
  for (const PeerPhase &phase : plan.phases) {
    if (!phase.sends.empty() || !phase.recvs.empty()) {
      for (const PeerMessage &m : phase.recvs)
        transport.recv(m.peer, at(m.span), m.span.bytes);
      for (const PeerMessage &m : phase.sends)
        transport.send(m.peer, at(m.span), m.span.bytes);
      if (failed(transport.finish(error)))
        return failure();
    }
    for (const auto &[to, from] : phase.copies)
      mover.copy(at(to), at(from), static_cast<size_t>(from.bytes));
    if (phase.elements > 0) {
      llvm::SmallVector<const std::byte *, 8> parts;
      for (const PeerSpan &p : phase.parts)
        parts.push_back(at(p));
      if (call.kind == CallKind::AllReduceMax)
        mover.max(call.dtype, parts, at(phase.reduced), phase.elements);
      else
        mover.sum(call.dtype, parts, at(phase.reduced), phase.elements);
    }
  }
  return success();
}

} // namespace mgc::backend
