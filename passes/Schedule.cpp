#include "passes/Schedule.h"

#include <algorithm>

namespace mgc::passes {

char workLetter(Work work) {
  switch (work) {
  case Work::Forward:
    return 'F';
  case Work::Backward:
    return 'B';
  case Work::BackwardInput:
    return 'I';
  case Work::BackwardWeight:
    break;
  }
  return 'W';
}

namespace {

constexpr ScheduleKind kKinds[] = {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                                   ScheduleKind::Interleaved,
                                   ScheduleKind::ZeroBubbleH1};

Slot forward(int64_t micro, int64_t chunk = 0) {
  return {Work::Forward, micro, chunk};
}
Slot backward(int64_t micro, int64_t chunk = 0) {
  return {Work::Backward, micro, chunk};
}

// GPipe: every forward, then every backward.
void gpipe(Schedule &s) {
  for (auto &order : s.order) {
    for (int64_t m = 0; m < s.micro; ++m)
      order.push_back(forward(m));
    for (int64_t m = 0; m < s.micro; ++m)
      order.push_back(backward(m));
  }
}

// 1F1B and ZB-H1 are one diagonal: device d runs, for x = 0, 1, ..., the
// forward of micro-batch x, the backward of x - (stages - 1 - d) and, when
// the backward is split, the weight gradient of x - (stages - 1), each
// where it exists.
//
// 1F1B (PipeDream-Flush): device d runs stages - d - 1 forwards ahead, then
// alternates one forward and one backward, then drains the backwards; at
// most stages - d micro-batches are in flight on it.
//
// ZB-H1 ("Zero Bubble Pipeline Parallelism", Qi et al., 2024): each
// backward split into its input-gradient half (I, which the previous stage
// waits for) and its weight-gradient half (W, which nothing waits for):
// 1F1B's order of forwards and I's (so at most stages - d forwards wait
// for their I, and the first device holds 1F1B's peak), with the W's of
// later devices put off by up to stages - 1 micro-batches to fill the time
// they would wait at the end. On F = I = W its bubble is a third of
// 1F1B's.
void diagonal(Schedule &s, bool splitBackward) {
  int64_t p = s.stages, m = s.micro;
  for (int64_t d = 0; d < p; ++d)
    for (int64_t x = 0; x < m + p - 1; ++x) {
      int64_t f = x, b = x - (p - 1 - d), w = x - (p - 1);
      if (f < m)
        s.order[d].push_back(forward(f));
      if (b >= 0 && b < m)
        s.order[d].push_back(
            {splitBackward ? Work::BackwardInput : Work::Backward, b, 0});
      if (splitBackward && w >= 0 && w < m)
        s.order[d].push_back({Work::BackwardWeight, w, 0});
    }
}

// Megatron-LM's interleaved 1F1B: the k-th forward of a device is chunk
// (k / stages) % chunks of micro-batch (k / (stages * chunks)) * stages +
// k % stages; backwards go through the chunks in reverse. The warm-up is
// (stages - d - 1) * 2 + (chunks - 1) * stages forwards (everything when
// the micro-batches are as many as the stages). In the steady state each
// forward and the backward after it run as one pair, the messages of both
// in one group after them (Megatron-LM's send_forward_backward_recv_
// forward_backward), which no other grouping of this order keeps free of
// deadlock.
void interleaved(Schedule &s) {
  int64_t p = s.stages, v = s.chunks, total = s.micro * v;
  auto microOf = [&](int64_t k) { return (k / (p * v)) * p + k % p; };
  auto forwardAt = [&](int64_t k) { return forward(microOf(k), (k / p) % v); };
  auto backwardAt = [&](int64_t k) {
    return backward(microOf(k), v - 1 - (k / p) % v);
  };
  for (int64_t d = 0; d < p; ++d) {
    auto &order = s.order[d];
    int64_t warm =
        s.micro == p ? total : std::min((p - d - 1) * 2 + (v - 1) * p, total);
    for (int64_t k = 0; k < warm; ++k)
      order.push_back(forwardAt(k));
    for (int64_t i = 0; i + warm < total; ++i) {
      order.push_back(forwardAt(warm + i));
      Slot b = backwardAt(i);
      b.joinsPrevious = true;
      order.push_back(b);
    }
    for (int64_t k = total - warm; k < total; ++k)
      order.push_back(backwardAt(k));
  }
}

} // namespace

const char *scheduleName(ScheduleKind kind) {
  switch (kind) {
  case ScheduleKind::GPipe:
    return "gpipe";
  case ScheduleKind::OneFOneB:
    return "1f1b";
  case ScheduleKind::Interleaved:
    return "interleaved";
  case ScheduleKind::ZeroBubbleH1:
    break;
  }
  return "zb-h1";
}

std::optional<ScheduleKind> parseScheduleKind(llvm::StringRef name) {
  for (ScheduleKind k : kKinds)
    if (name == scheduleName(k))
      return k;
  return std::nullopt;
}

std::string scheduleNames() {
  std::string s;
  for (ScheduleKind k : kKinds)
    s += (s.empty() ? "" : ", ") + std::string(scheduleName(k));
  return s;
}

FailureOr<Schedule> makeSchedule(ScheduleKind kind, int64_t stages,
                                 int64_t micro, int64_t chunks,
                                 std::string &error) {
  std::string name = scheduleName(kind);
  if (stages < 1 || micro < 1 || chunks < 1) {
    error = "the " + name +
            " schedule needs at least one stage, micro-batch "
            "and chunk, got " +
            std::to_string(stages) + " stages, " + std::to_string(micro) +
            " micro-batches and " + std::to_string(chunks) + " chunks";
    return failure();
  }
  if (kind == ScheduleKind::Interleaved) {
    if (chunks < 2) {
      error = "the interleaved schedule needs 2 or more model chunks per "
              "device (--virtual-stages), got " +
              std::to_string(chunks);
      return failure();
    }
    if (micro % stages != 0) {
      error = "the interleaved schedule needs the micro-batches to be a "
              "multiple of the " +
              std::to_string(stages) + " stages, got " + std::to_string(micro);
      return failure();
    }
  } else if (chunks != 1) {
    error = "the " + name + " schedule runs one model chunk per device; " +
            std::to_string(chunks) +
            " chunks (--virtual-stages) need --pipeline-schedule interleaved";
    return failure();
  }
  Schedule s;
  s.kind = kind;
  s.stages = stages;
  s.micro = micro;
  s.chunks = chunks;
  s.order.resize(stages);
  switch (kind) {
  case ScheduleKind::GPipe:
    gpipe(s);
    break;
  case ScheduleKind::OneFOneB:
    diagonal(s, /*splitBackward=*/false);
    break;
  case ScheduleKind::Interleaved:
    interleaved(s);
    break;
  case ScheduleKind::ZeroBubbleH1:
    diagonal(s, /*splitBackward=*/true);
    break;
  }
  return s;
}

std::vector<int64_t> peakInFlight(const Schedule &schedule) {
  std::vector<int64_t> now(static_cast<size_t>(schedule.virtualStages()), 0);
  std::vector<int64_t> peak = now;
  Work last = schedule.splitsBackward() ? Work::BackwardWeight : Work::Backward;
  for (int64_t d = 0; d < schedule.stages; ++d)
    for (const Slot &slot : schedule.order[static_cast<size_t>(d)]) {
      size_t v = static_cast<size_t>(schedule.virtualStage(d, slot.chunk));
      if (slot.work == Work::Forward)
        peak[v] = std::max(peak[v], ++now[v]);
      else if (slot.work == last)
        --now[v];
    }
  return peak;
}

std::string scheduleOrderText(const Schedule &schedule) {
  std::string out;
  for (size_t d = 0; d < schedule.order.size(); ++d) {
    out += "device " + std::to_string(d) + ":";
    for (const Slot &slot : schedule.order[d]) {
      out += ' ';
      out += workLetter(slot.work);
      out += std::to_string(slot.micro);
      if (schedule.chunks > 1)
        out += "." + std::to_string(slot.chunk);
    }
    out += '\n';
  }
  return out;
}

} // namespace mgc::passes
