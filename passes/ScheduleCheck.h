// A pipeline schedule (passes/Schedule.h) as the programs its devices run,
// proved free of deadlock before anything runs, and timed.
//
// Each device has two queues, as the executors run them: its computations
// in the schedule's order, and its point-to-point messages in program
// order on the communication queue. A message goes out once the
// computation that makes it is done and the queue reaches it; a
// computation that needs a message waits for it. Messages are unbuffered
// rendezvous (the strictest transport, NCCL's: a send is done only when
// its receive is posted), and the sends and receives between two
// computations form one group that completes together (batched isend and
// irecv, as Megatron-LM posts them).
//
// The check simulates every queue of every device: each send must meet
// the receive of the same message (the k-th send from one device to
// another meets the other's k-th receive from it), and some queue must
// always be able to move. A violation is an error naming the two
// operations: the send and the receive that disagree, or the two that wait
// for each other. Collectives (a group of devices that must issue the same
// sequence) are checked in the same simulation.
#pragma once

#include "passes/Schedule.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mgc::passes {

// What travels between pipeline devices: the activation a virtual stage
// hands the next one, or the gradient it hands back.
struct PipeMessage {
  bool gradient = false;
  int64_t fromStage = 0, toStage = 0; // virtual stages
  int64_t micro = 0;
  friend bool operator==(const PipeMessage &a, const PipeMessage &b) {
    return a.gradient == b.gradient && a.fromStage == b.fromStage &&
           a.toStage == b.toStage && a.micro == b.micro;
  }
};

struct PipePart {
  bool send = false;
  int64_t peer = 0; // the other device
  PipeMessage message;
};

// One operation of a device's program.
struct PipeOp {
  enum class Kind : uint8_t { Compute, Messages, Collective };
  Kind kind = Kind::Compute;
  Slot slot;                   // Compute
  std::vector<PipePart> parts; // Messages: one group
  // Collective: its devices and what it does ("all_reduce of 4 KiB on dp").
  std::vector<int64_t> members;
  std::string what;
};

using PipeProgram = std::vector<PipeOp>;

struct LowerOptions {
  // Group the messages between two computations (false: each message on
  // its own, which deadlocks 1F1B: for tests of the check).
  bool groupMessages = true;
};

// Each device's program for `schedule`.
std::vector<PipeProgram> lowerSchedule(const Schedule &schedule,
                                       const LowerOptions &options = {});

// "F3", "send activation 2->3 of micro-batch 1 to device 1 + receive ...",
// "all_reduce ... on devices 0, 2".
std::string pipeOpText(const PipeOp &op);

// The time each kind of work takes (any unit; messages are free).
struct WorkCosts {
  double forward = 1, backward = 2, inputGrad = 1, weightGrad = 1;
  double of(Work work) const;
};

struct PipeTiming {
  // Per device, the start and end of each of its computations, in program
  // order of the computations.
  std::vector<std::vector<double>> start, end;
  double makespan = 0;
  // 1 - (time computing) / (devices * makespan).
  double bubble = 0;
};

// Runs the check; on success fills `timing` (when given) and returns "",
// else returns the error.
std::string checkPipePrograms(const std::vector<PipeProgram> &programs,
                              const WorkCosts &costs = {},
                              PipeTiming *timing = nullptr);
// The same with each device's own costs (devices that differ, stages of
// different sizes): one WorkCosts per device.
std::string checkPipePrograms(const std::vector<PipeProgram> &programs,
                              const std::vector<WorkCosts> &perDevice,
                              PipeTiming *timing);

// The schedule as a grid of time units (each cell one unit of the costs,
// which must be whole numbers): a row per device, each computation's label
// in its first cell ("F3", "I2", "F0.1" for chunk 1), "-" while it runs on,
// "." when the device waits.
std::string scheduleGrid(const Schedule &schedule,
                         const std::vector<PipeProgram> &programs,
                         const PipeTiming &timing);

} // namespace mgc::passes
