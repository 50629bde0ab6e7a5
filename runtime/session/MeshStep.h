// The training step on a device mesh: the model's step through the mesh
// pipeline (autodiff, shard-strategy, optimizer, canonicalize, cse, dce,
// shard, bucket), partitioned into device programs, each compiled for the CPU
// backend. MeshRunner.h runs it.
#pragma once

#include "backend/Executable.h"
#include "mgc/Session.h"

#include "ir/Graph.h"
#include "ir/Sharding.h"
#include "passes/Accumulation.h"
#include "passes/ApplySplit.h"
#include "passes/Partition.h"
#include "passes/PipelineSplit.h"
#include "passes/Schedule.h"
#include "passes/ScheduleCheck.h"
#include "passes/StageBalance.h"
#include "support/Diagnostics.h"
#include "support/Result.h"

#include <memory>
#include <optional>
#include <vector>

namespace mgc::session {

// What places the forward program on a mesh (buildMeshForward).
inline constexpr const char *kMeshForwardPipeline =
    "eval-mode,mixed-precision,accuracy,shard-strategy,canonicalize,cse,dce,"
    "shard";
inline constexpr const char *kMeshTrainingPipeline =
    "mixed-precision,autodiff,shard-strategy,optimizer,canonicalize,cse,dce,"
    "shard,bucket";

// How a mesh with a pp axis runs its pipeline (docs/pipeline.md).
struct PipelineConfig {
  passes::ScheduleKind schedule = passes::ScheduleKind::OneFOneB;
  // Model chunks per pipeline device (the interleaved schedule's virtual
  // stages per device); 1 otherwise.
  int64_t chunks = 1;
  // The layers of each (virtual) stage, "0-5,6-11"; empty: chosen by the
  // stage balancer (passes/StageBalance.h), on the devices of `cluster` (a
  // JSON file, passes/Cluster.h: one device per device of the mesh) or on
  // identical devices.
  std::string stages;
  std::string cluster;
};

struct MeshConfig {
  ir::Mesh mesh;
  int zero = 0; // ZeRO stage: 0, 1 or 2
  // Gradient all-reduces fused into buckets of this many MiB (0: none).
  double bucketMiB = 25;
  // Micro-batches per step (gradient accumulation, passes/Accumulation.h);
  // 1: none.
  int64_t accumulate = 1;
  // With a pp axis: the pipeline (its micro-batches are `accumulate`).
  PipelineConfig pipeline;
};

// Device programs partitioned from one logical module, and compiled.
struct MeshPart {
  // The logical module (placed) the programs come from, when it is not the
  // step's sharded module (MeshStep::logicalOf).
  std::unique_ptr<ir::Module> logical;
  passes::DevicePrograms programs;
  // One executable per distinct program (same index as programs.programs).
  std::vector<std::unique_ptr<backend::Executable>> executables;

  std::vector<const backend::Executable *> perDevice() const;
};

// A pipelined step's micro-batch part: the micro program cut into the
// programs of the stages (passes/PipelineSplit.h), run in the order of the
// schedule (proved free of deadlock when it is built).
struct PipelinePart {
  passes::Schedule schedule;
  // Per pipeline device, its program of the schedule.
  std::vector<passes::PipeProgram> programs;
  // The model's layers and the first of each virtual stage.
  std::vector<std::string> layers;
  std::vector<int64_t> first;
  // With a cluster: the balancer's plan (its predicted times and memory per
  // stage) and the cluster device each stage runs on, as the file names it
  // ("cluster device 1 (t4)"); and what it gains: the predicted step of an
  // equal split of the layers over the devices in the file's order, or why
  // there is none (it does not fit).
  std::optional<passes::StagePlan> balanced;
  std::vector<std::string> deviceNames;
  std::optional<double> equalSplitSeconds;
  std::string equalSplitError;
  // Every stage is a copy of the mesh without pp (MeshStep::mesh): its
  // device d runs the part of the stage's work that device d of that mesh
  // would, with the same collectives among the stage's devices, and talks
  // to device d of the stages before and after it.
  ir::Mesh stageMesh;
  // One split per distinct micro-batch program (the devices of a mesh, and
  // micro-batches, often share one), the split device d runs on
  // micro-batch i (splitOf[i][d]), and the executables of each split's
  // programs: executables[k][s][p] for splits[k].programs[s][p].
  std::vector<passes::PipelineSplit> splits;
  std::vector<std::vector<size_t>> splitOf;
  std::vector<std::vector<std::vector<std::unique_ptr<backend::Executable>>>>
      executables;
  // Per pipeline device, the FLOPs of its work on one micro-batch (the
  // cost model's count of its programs' ops; the mean over its chunks), and
  // the schedule's simulation on them (with a cluster, on the balancer's
  // times of its stages): the predicted bubble.
  std::vector<passes::WorkCosts> costs;
  passes::PipeTiming predicted;
  // Per (virtual) stage: the most micro-batches the schedule holds on it
  // at once, and its memory peak then (passes::stageMemory on the cost
  // model).
  std::vector<int64_t> inFlight;
  std::vector<double> memoryPeak;
  // The apply part (MeshStep::step's logical module) cut by pipeline
  // device (passes/ApplySplit.h), so that each holds and updates its own
  // stages' parameters; and per pipeline device its gather and update
  // programs with their gradients' dp all-reduces in buckets (the bucket
  // pass), partitioned on the stage mesh and compiled (no gather programs
  // when the cut has none).
  passes::ApplySplit applySplit;
  std::vector<MeshPart> applyGather, applyUpdate;
};

struct MeshStep {
  // The logical step after the shard pass: every value placed, the
  // communication ops in place. Its arguments and outputs are the step's
  // (logical names and types). With accumulation it is placed on the
  // micro-batch mesh.
  std::unique_ptr<ir::Module> sharded;
  // The mesh the devices form (with accumulation, with a dp axis).
  ir::Mesh mesh;
  int64_t accumulate = 1;
  // What each device runs once per step, partitioned on `mesh`: the whole
  // step, or with accumulation its apply part.
  MeshPart step;
  // With accumulation, the micro-batch part, partitioned on the micro-batch
  // mesh: device d runs micro-batch i with the program of micro-batch
  // device passes::microBatchDevice(mesh, accumulate, d, i).
  MeshPart micro;
  // With a pp axis: the micro-batch part as a pipeline (instead of running
  // `micro`'s programs whole). `mesh` is then the mesh without pp; the
  // apply part runs on each pipeline device's copy of it, over that
  // device's parameters (PipelinePart::applySplit).
  std::shared_ptr<const PipelinePart> pipeline;

  const ir::Module &logicalOf(const MeshPart &part) const {
    return part.logical ? *part.logical : *sharded;
  }
};

// A device program compiled for the CPU backend (after kDeviceProgramPipeline).
std::unique_ptr<backend::Executable>
compileDeviceProgram(const ir::Module &program, DiagnosticEngine &diag);

// Compiles each of `part`'s programs into part.executables.
LogicalResult compilePart(MeshPart &part, DiagnosticEngine &diag);

// With a pp axis: cuts the micro part of `step` (built on the mesh without
// pp) into the pipeline of `config` and compiles its programs.
LogicalResult buildPipelinePart(MeshStep &step, const ir::Module &model,
                                const MeshConfig &config,
                                DiagnosticEngine &diag);

// The configuration of the session options' mesh step of `model` on
// `mesh`: ZeRO, buckets, micro-batches and the pipeline's settings; without
// a pp axis a cluster weights the dp shares for its devices
// (passes::weightDataAxis, on the cost model's time of the model's step).
// Reports a schedule that is not one, pipeline settings without a pp axis
// or a cluster that does not fit the mesh, and fails.
FailureOr<MeshConfig> meshConfig(const ir::Mesh &mesh, const ir::Module &model,
                                 const SessionOptions &options,
                                 DiagnosticEngine &diag);

// Builds the step of `model` (a frontend module, train overrides applied)
// for `config`. Reports and fails on bad settings, a mesh the model cannot
// be split on, or any pass error.
FailureOr<MeshStep> buildMeshStep(const ir::Module &model,
                                  const MeshConfig &config,
                                  DiagnosticEngine &diag);

// Builds the forward program of `model` (a frontend module) on `mesh`, for
// evaluation (Session::evaluate): eval-mode and accuracy, every value
// placed as the sharding rules choose, partitioned into device programs and
// compiled; a MeshStep without updates, accumulation or pipeline. A pp axis
// is refused.
FailureOr<MeshStep> buildMeshForward(const ir::Module &model,
                                     const ir::Mesh &mesh,
                                     DiagnosticEngine &diag);

} // namespace mgc::session
