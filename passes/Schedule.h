// Pipeline schedules as data. A schedule says, for each pipeline device,
// the order in which it runs the work of every micro-batch: forwards (F),
// backwards (B), or, for the zero-bubble schedule, backwards split into
// their input-gradient (I) and weight-gradient (W) halves. One function
// per schedule makes the order; everything else (the check that no
// schedule can deadlock, its time table and bubble, the device programs)
// reads only this table, so a schedule is one function.
//
// A device may hold several model chunks (the interleaved schedule): chunk
// c of device d is the virtual stage c * stages + d, so consecutive
// virtual stages sit on consecutive devices and the last device's chunk c
// feeds device 0's chunk c + 1 (Megatron-LM's interleaving).
#pragma once

#include "support/Result.h"

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mgc::passes {

enum class Work : uint8_t { Forward, Backward, BackwardInput, BackwardWeight };

// 'F', 'B', 'I' or 'W'.
char workLetter(Work work);

// One piece of work of a device.
struct Slot {
  Work work = Work::Forward;
  int64_t micro = 0; // micro-batch
  int64_t chunk = 0; // model chunk of the device (0 but when interleaved)
  // It runs right after the slot before it, with no communication between
  // them: their messages travel in the groups before and after the pair
  // (the interleaved schedule's steady state, as Megatron-LM runs it).
  bool joinsPrevious = false;
  friend bool operator==(const Slot &a, const Slot &b) {
    return a.work == b.work && a.micro == b.micro && a.chunk == b.chunk &&
           a.joinsPrevious == b.joinsPrevious;
  }
};

enum class ScheduleKind : uint8_t {
  GPipe,
  OneFOneB,
  Interleaved,
  ZeroBubbleH1
};

// The names of --pipeline-schedule: "gpipe", "1f1b", "interleaved", "zb-h1".
const char *scheduleName(ScheduleKind kind);
std::optional<ScheduleKind> parseScheduleKind(llvm::StringRef name);
// "gpipe, 1f1b, interleaved, zb-h1", for messages.
std::string scheduleNames();

struct Schedule {
  ScheduleKind kind = ScheduleKind::OneFOneB;
  int64_t stages = 1; // pipeline devices
  int64_t micro = 1;  // micro-batches per step
  int64_t chunks = 1; // model chunks per device
  // Per device, its work in the order it runs it.
  std::vector<std::vector<Slot>> order;

  int64_t virtualStages() const { return stages * chunks; }
  int64_t virtualStage(int64_t device, int64_t chunk) const {
    return chunk * stages + device;
  }
  int64_t deviceOf(int64_t virtualStage) const { return virtualStage % stages; }
  int64_t chunkOf(int64_t virtualStage) const { return virtualStage / stages; }
  // Whether the backward is split into I and W.
  bool splitsBackward() const { return kind == ScheduleKind::ZeroBubbleH1; }
};

// The schedule `kind` for `stages` devices, `micro` micro-batches and
// `chunks` model chunks per device (more than 1 for the interleaved
// schedule only); fails with a message in `error` naming what does not fit
// (the interleaved schedule needs micro-batches a multiple of the stages,
// as Megatron-LM's does).
FailureOr<Schedule> makeSchedule(ScheduleKind kind, int64_t stages,
                                 int64_t micro, int64_t chunks,
                                 std::string &error);

// Per virtual stage, the most micro-batches whose activations it holds at
// once: from the start of a micro-batch's forward to the end of its last
// backward work (B, or W when the backward is split). 1F1B holds stages - s
// on stage s, GPipe every micro-batch.
std::vector<int64_t> peakInFlight(const Schedule &schedule);

// The schedule in one line per device, its slots in order:
// "device 0: F0 F1 B0 F2 B1 B2" (interleaved: F0.1 is micro-batch 0 of
// chunk 1).
std::string scheduleOrderText(const Schedule &schedule);

} // namespace mgc::passes
