// Which layers each pipeline stage runs. By default the stages are
// balanced: each layer's forward work (passes/CostModel.h) becomes time on
// the device that would run it (the larger of compute and memory time; a
// backward costs twice its forward), and dynamic programming over the
// layer sequence picks the contiguous split whose slowest stage is
// fastest, under each device's memory (parameters, gradients and AdamW's
// two moments: 16 bytes per f32 parameter, plus the activations of the
// micro-batches in flight on the stage under 1F1B: stages - s on stage s).
// The embedding goes with the first stage, the head and loss with the
// last. Devices may differ (a cluster description, passes/Cluster.h).
#pragma once

#include "passes/Cluster.h"
#include "passes/CostModel.h"
#include "support/Result.h"

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace mgc::passes {

struct StagePlan {
  // Per stage: the index of its device among those given.
  std::vector<size_t> device;
  // Per stage: its first layer (an index into ModelLayers::layers); stage
  // s runs layers [first[s], first[s + 1]).
  std::vector<int64_t> first;
  // Per stage: a forward and a backward of one micro-batch, in seconds,
  // each with the sending of its message to the next (previous) stage; and
  // that sending's part of them (the link time).
  std::vector<double> forwardSeconds, backwardSeconds;
  std::vector<double> forwardLinkSeconds, backwardLinkSeconds;
  // Per stage: the memory it needs and the device's.
  std::vector<double> memoryBytes, deviceBytes;
  // The step under 1F1B with the plan's micro-batches, from the schedule's
  // simulation (passes/ScheduleCheck.h) on these stage times.
  double stepSeconds = 0;
};

// The layers' work per micro-batch: the module's batch divided by `micro`.
//
// balanceStages also chooses the order of the devices along the pipeline
// (every distinct order of devices that differ, the one whose slowest
// stage is fastest; on a tie the order given): a device with less to do
// per layer can take the head, which may cost as much as several layers.
// It fails, with `error`, when there are more stages than layers or no
// split fits the devices' memory (naming the device that is short, and by
// how much, in the split that comes closest).
// Messages between stages take link(a, b) from device a to device b
// (indices into `devices`; none given: messages are free), sent after the
// sender's forward or backward: a stage's forward includes sending its
// activation on, its backward sending the gradient back.
using LinkOf = std::function<ClusterLink(size_t from, size_t to)>;

FailureOr<StagePlan> balanceStages(const ModelLayers &model,
                                   llvm::ArrayRef<ClusterDevice> devices,
                                   int64_t micro, std::string &error,
                                   const LinkOf &link = {});
// The plan of a given split (`first` as in StagePlan) with `devices` in
// stage order, for comparison or a split the user chose (--stages); fails
// like balanceStages, or on a split that is not one.
FailureOr<StagePlan> planStages(const ModelLayers &model,
                                llvm::ArrayRef<ClusterDevice> devices,
                                int64_t micro, std::vector<int64_t> first,
                                std::string &error, const LinkOf &link = {});
// The memory each stage of the split `first` needs (as StagePlan counts
// it: f32 weights, gradients and AdamW's two moments, and the activations
// the backward keeps) with inFlight[s] of `micro` micro-batches held on
// stage s.
std::vector<double> stageMemory(const ModelLayers &model,
                                llvm::ArrayRef<int64_t> first, int64_t micro,
                                llvm::ArrayRef<int64_t> inFlight);

// The seconds a forward and backward of the whole model on 1/`parts` of
// its batch take on `device`, as the balancer counts a stage's: what one
// of `parts` data-parallel devices computes per step.
double shareSeconds(const ModelLayers &model, const ClusterDevice &device,
                    int64_t parts);
// Equal layer counts (the first stages take one more when they do not
// divide).
std::vector<int64_t> equalSplit(int64_t layers, int64_t stages);

} // namespace mgc::passes
