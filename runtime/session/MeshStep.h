// The training step on a device mesh: the model's step through the mesh
// pipeline (autodiff, shard-strategy, optimizer, canonicalize, cse, dce,
// shard, bucket), partitioned into device programs, each compiled for the CPU
// backend. MeshRunner.h runs it.
#pragma once

#include "backend/Executable.h"
#include "ir/Graph.h"
#include "ir/Sharding.h"
#include "passes/Accumulation.h"
#include "passes/Partition.h"
#include "support/Diagnostics.h"
#include "support/Result.h"

#include <memory>
#include <vector>

namespace mgc::session {

inline constexpr const char *kMeshTrainingPipeline =
    "mixed-precision,autodiff,shard-strategy,optimizer,canonicalize,cse,dce,"
    "shard,bucket";

struct MeshConfig {
  ir::Mesh mesh;
  int zero = 0; // ZeRO stage: 0, 1 or 2
  // Gradient all-reduces fused into buckets of this many MiB (0: none).
  double bucketMiB = 25;
  // Micro-batches per step (gradient accumulation, passes/Accumulation.h);
  // 1: none.
  int64_t accumulate = 1;
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

  const ir::Module &logicalOf(const MeshPart &part) const {
    return part.logical ? *part.logical : *sharded;
  }
};

// Builds the step of `model` (a frontend module, train overrides applied)
// for `config`. Reports and fails on bad settings, a mesh the model cannot
// be split on, or any pass error.
FailureOr<MeshStep> buildMeshStep(const ir::Module &model,
                                  const MeshConfig &config,
                                  DiagnosticEngine &diag);

} // namespace mgc::session
