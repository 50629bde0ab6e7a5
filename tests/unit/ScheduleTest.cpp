// Pipeline schedules (passes/Schedule.h, passes/ScheduleCheck.h): the order
// each schedule function makes, read as golden text; the time table and
// bubble of each against the closed forms of the literature on unit costs;
// every schedule proved free of deadlock over a range of shapes; and
// schedules that are broken on purpose (messages not grouped, two slots
// swapped, collectives that differ) refused with both operations named.
#include "passes/ScheduleCheck.h"

#include <doctest/doctest.h>

#include <cmath>

using namespace mgc;
using namespace mgc::passes;

namespace {

Schedule make(ScheduleKind kind, int64_t stages, int64_t micro,
              int64_t chunks = 1) {
  std::string error;
  FailureOr<Schedule> s = makeSchedule(kind, stages, micro, chunks, error);
  INFO(error);
  REQUIRE(s.succeeded());
  return *s;
}

// The timing of a schedule that must pass the check.
PipeTiming timed(const Schedule &s, const WorkCosts &costs = {}) {
  PipeTiming t;
  std::string error = checkPipePrograms(lowerSchedule(s), costs, &t);
  INFO(scheduleName(s.kind) << " stages " << s.stages << " micro " << s.micro
                            << " chunks " << s.chunks << ": " << error);
  REQUIRE(error.empty());
  return t;
}

} // namespace

TEST_CASE("schedule: each schedule's order") {
  CHECK(scheduleOrderText(make(ScheduleKind::GPipe, 2, 3)) ==
        "device 0: F0 F1 F2 B0 B1 B2\n"
        "device 1: F0 F1 F2 B0 B1 B2\n");
  // 1F1B: stages - d - 1 forwards ahead, then one forward, one backward.
  CHECK(scheduleOrderText(make(ScheduleKind::OneFOneB, 4, 8)) ==
        "device 0: F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7\n"
        "device 1: F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7\n"
        "device 2: F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7\n"
        "device 3: F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7\n");
  // Fewer micro-batches than stages: the warm-up is cut short.
  CHECK(scheduleOrderText(make(ScheduleKind::OneFOneB, 3, 1)) ==
        "device 0: F0 B0\ndevice 1: F0 B0\ndevice 2: F0 B0\n");
  // ZB-H1: device d runs F(x), I(x - (p - 1 - d)), W(x - (p - 1)).
  CHECK(scheduleOrderText(make(ScheduleKind::ZeroBubbleH1, 4, 8)) ==
        "device 0: F0 F1 F2 F3 I0 W0 F4 I1 W1 F5 I2 W2 F6 I3 W3 F7 I4 W4 I5 "
        "W5 I6 W6 I7 W7\n"
        "device 1: F0 F1 F2 I0 F3 I1 W0 F4 I2 W1 F5 I3 W2 F6 I4 W3 F7 I5 W4 I6 "
        "W5 I7 W6 W7\n"
        "device 2: F0 F1 I0 F2 I1 F3 I2 W0 F4 I3 W1 F5 I4 W2 F6 I5 W3 F7 I6 W4 "
        "I7 W5 W6 W7\n"
        "device 3: F0 I0 F1 I1 F2 I2 F3 I3 W0 F4 I4 W1 F5 I5 W2 F6 I6 W3 F7 I7 "
        "W4 W5 W6 W7\n");
  // Interleaved (Megatron-LM's order): F2.1 is micro-batch 2 of chunk 1.
  CHECK(scheduleOrderText(make(ScheduleKind::Interleaved, 2, 4, 2)) ==
        "device 0: F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 "
        "B1.0 B2.1 B3.1 B2.0 B3.0\n"
        "device 1: F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 "
        "B2.1 F3.1 B3.1 B2.0 B3.0\n");
}

TEST_CASE("schedule: the time table of 1F1B and ZB-H1") {
  Schedule one = make(ScheduleKind::OneFOneB, 4, 8);
  PipeTiming t = timed(one);
  CHECK(scheduleGrid(one, lowerSchedule(one), t) ==
        "device 0 |F0 F1 F2 F3 .  .  .  .  .  .  B0 -  F4 B1 -  F5 B2 -  F6 "
        "B3 -  F7 B4 -  .  B5 -  .  B6 -  .  B7 -\n"
        "device 1 |.  F0 F1 F2 .  .  .  .  B0 -  F3 B1 -  F4 B2 -  F5 B3 -  "
        "F6 B4 -  F7 B5 -  .  B6 -  .  B7 -  .  .\n"
        "device 2 |.  .  F0 F1 .  .  B0 -  F2 B1 -  F3 B2 -  F4 B3 -  F5 B4 -  "
        "F6 B5 -  F7 B6 -  .  B7 -  .  .  .  .\n"
        "device 3 |.  .  .  F0 B0 -  F1 B1 -  F2 B2 -  F3 B3 -  F4 B4 -  F5 "
        "B5 -  F6 B6 -  F7 B7 -  .  .  .  .  .  .\n");
  Schedule zb = make(ScheduleKind::ZeroBubbleH1, 4, 8);
  PipeTiming z = timed(zb);
  CHECK(scheduleGrid(zb, lowerSchedule(zb), z) ==
        "device 0 |F0 F1 F2 F3 .  .  .  I0 W0 F4 I1 W1 F5 I2 W2 F6 I3 W3 F7 I4 "
        "W4 I5 W5 I6 W6 I7 W7\n"
        "device 1 |.  F0 F1 F2 .  .  I0 F3 I1 W0 F4 I2 W1 F5 I3 W2 F6 I4 W3 F7 "
        "I5 W4 I6 W5 I7 W6 W7\n"
        "device 2 |.  .  F0 F1 .  I0 F2 I1 F3 I2 W0 F4 I3 W1 F5 I4 W2 F6 I5 W3 "
        "F7 I6 W4 I7 W5 W6 W7\n"
        "device 3 |.  .  .  F0 I0 F1 I1 F2 I2 F3 I3 W0 F4 I4 W1 F5 I5 W2 F6 I6 "
        "W3 F7 I7 W4 W5 W6 W7\n");
}

TEST_CASE("schedule: bubbles as the literature gives them, on unit costs") {
  for (int64_t p : {2, 3, 4, 8})
    for (int64_t m : {p, 2 * p, 4 * p}) {
      INFO("stages " << p << " micro " << m);
      double pp = static_cast<double>(p), mm = static_cast<double>(m);
      // GPipe and 1F1B (F = 1, B = 2): (p - 1) / (m + p - 1).
      for (ScheduleKind k : {ScheduleKind::GPipe, ScheduleKind::OneFOneB}) {
        PipeTiming t = timed(make(k, p, m));
        CHECK(t.makespan == doctest::Approx(3 * (mm + pp - 1)));
        CHECK(t.bubble == doctest::Approx((pp - 1) / (mm + pp - 1)));
      }
      // ZB-H1 (F = I = W = 1): each device waits (p - 1)(F + I - W), a
      // third of 1F1B's (p - 1)(F + I + W).
      PipeTiming z = timed(make(ScheduleKind::ZeroBubbleH1, p, m));
      CHECK(z.makespan == doctest::Approx(3 * mm + (pp - 1)));
      // Interleaved with v chunks (each chunk F = 1, B = 2): the bubble of
      // 1F1B on the chunks' costs, (p - 1)(F + B), against v times the
      // work: 1F1B's bubble divided by about v.
      if (m >= 2 * p)
        for (int64_t v : {2, 4}) {
          INFO("chunks " << v);
          PipeTiming t = timed(make(ScheduleKind::Interleaved, p, m, v));
          CHECK(t.makespan == doctest::Approx(3 * mm * static_cast<double>(v) +
                                              3 * (pp - 1)));
        }
    }
}

TEST_CASE("schedule: every schedule passes the check, on any costs") {
  WorkCosts uneven{1.5, 2.25, 1.25, 1};
  for (int64_t p : {1, 2, 3, 5})
    for (int64_t m : {1, 2, 3, 5, 8, 10})
      for (ScheduleKind k : {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                             ScheduleKind::ZeroBubbleH1}) {
        PipeTiming t = timed(make(k, p, m), uneven);
        CHECK(t.bubble >= 0);
        CHECK(t.bubble < 1);
      }
  for (int64_t p : {1, 2, 3, 4})
    for (int64_t v : {2, 3})
      for (int64_t m : {p, 2 * p, 3 * p})
        timed(make(ScheduleKind::Interleaved, p, m, v), uneven);
}

TEST_CASE("schedule: a broken schedule is refused, naming the two "
          "operations") {
  // Messages not grouped: 1F1B's steady state sends forward on one side
  // while the other sends backward, and neither receives.
  Schedule one = make(ScheduleKind::OneFOneB, 2, 3);
  LowerOptions apart;
  apart.groupMessages = false;
  CHECK(checkPipePrograms(lowerSchedule(one, apart)) ==
        "the schedule deadlocks: device 0 waits in send activation 0->1 of "
        "micro-batch 1 to device 1 for device 1, which waits in send "
        "gradient 1->0 of micro-batch 0 to device 0");
  // Device 0 takes the backwards in another order than device 1 sends
  // them.
  Schedule swapped = make(ScheduleKind::GPipe, 2, 2);
  std::swap(swapped.order[0][2], swapped.order[0][3]);
  CHECK(checkPipePrograms(lowerSchedule(swapped)) ==
        "the schedule's messages do not meet: device 1 sends gradient 1->0 "
        "of micro-batch 0 (send gradient 1->0 of micro-batch 0 to device 0) "
        "where device 0 receives gradient 1->0 of micro-batch 1 (send "
        "activation 0->1 of micro-batch 1 to device 1 + receive gradient "
        "1->0 of micro-batch 1 from device 1)");
  // Two devices of a collective group issue different collectives.
  std::vector<PipeProgram> programs(2);
  programs[0].push_back({PipeOp::Kind::Collective, {}, {}, {0, 1}, "a"});
  programs[1].push_back({PipeOp::Kind::Collective, {}, {}, {0, 1}, "b"});
  CHECK(checkPipePrograms(programs) ==
        "the devices of a collective disagree: device 0 runs a on devices "
        "0, 1 where device 1 runs b on devices 0, 1");
  // The same collective meets; one missing leaves its peer waiting.
  programs[1] = {programs[0][0]};
  CHECK(checkPipePrograms(programs).empty());
  programs[1].clear();
  CHECK(checkPipePrograms(programs) ==
        "the schedule deadlocks: device 0 waits in a on devices 0, 1 for "
        "device 1, which has no communication left");
}

TEST_CASE("schedule: shapes a schedule cannot take are refused") {
  std::string error;
  CHECK(makeSchedule(ScheduleKind::Interleaved, 4, 6, 2, error).failed());
  CHECK(error == "the interleaved schedule needs the micro-batches to be a "
                 "multiple of the 4 stages, got 6");
  CHECK(makeSchedule(ScheduleKind::Interleaved, 4, 8, 1, error).failed());
  CHECK(error == "the interleaved schedule needs 2 or more model chunks per "
                 "device (--virtual-stages), got 1");
  CHECK(makeSchedule(ScheduleKind::OneFOneB, 4, 8, 2, error).failed());
  CHECK(error == "the 1f1b schedule runs one model chunk per device; 2 chunks "
                 "(--virtual-stages) need --pipeline-schedule interleaved");
  CHECK(makeSchedule(ScheduleKind::GPipe, 0, 8, 1, error).failed());
  CHECK(error.find("at least one stage") != std::string::npos);
  CHECK(parseScheduleKind("zb-h1") == ScheduleKind::ZeroBubbleH1);
  CHECK(!parseScheduleKind("zbh1"));
  CHECK(scheduleNames() == "gpipe, 1f1b, interleaved, zb-h1");
}

// The micro-batches a stage holds at once (its activations' memory):
// GPipe holds every micro-batch, 1F1B stages - s on stage s (Narayanan et
// al., 2021). ZB-H1 as scheduled here defers each W until a bubble, and a
// stage keeps a micro-batch until its W: up to `stages` on every stage
// (the paper keeps 1F1B's peak by freeing after I what W does not read).
TEST_CASE("schedule: the micro-batches in flight on each stage") {
  CHECK(peakInFlight(make(ScheduleKind::GPipe, 4, 8)) ==
        std::vector<int64_t>{8, 8, 8, 8});
  CHECK(peakInFlight(make(ScheduleKind::OneFOneB, 4, 8)) ==
        std::vector<int64_t>{4, 3, 2, 1});
  CHECK(peakInFlight(make(ScheduleKind::ZeroBubbleH1, 4, 8)) ==
        std::vector<int64_t>{4, 4, 4, 4});
  // Fewer micro-batches than stages: at most all of them.
  CHECK(peakInFlight(make(ScheduleKind::OneFOneB, 4, 2)) ==
        std::vector<int64_t>{2, 2, 2, 1});
  // Interleaved: one count per virtual stage, never more than the
  // micro-batches.
  std::vector<int64_t> v =
      peakInFlight(make(ScheduleKind::Interleaved, 2, 4, 2));
  REQUIRE(v.size() == 4);
  for (int64_t n : v) {
    CHECK(n >= 1);
    CHECK(n <= 4);
  }
}
