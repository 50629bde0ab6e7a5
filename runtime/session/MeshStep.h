// The training step on a device mesh: the model's step through the mesh
// pipeline (autodiff, shard-strategy, optimizer, canonicalize, cse, dce,
// shard, bucket), partitioned into device programs, each compiled for the CPU
// backend; and the runner that takes whole tensors, runs every device and
// gives whole tensors back, so a session (checkpoints, parameter access,
// the loss) sees the same step as on one device.
#pragma once

#include "backend/Executable.h"
#include "backend/cpu/MeshExecutor.h"
#include "ir/Graph.h"
#include "ir/Sharding.h"
#include "passes/Partition.h"
#include "support/Diagnostics.h"
#include "support/Result.h"

#include <memory>
#include <vector>

namespace mgc::session {

inline constexpr const char *kMeshTrainingPipeline =
    "autodiff,shard-strategy,optimizer,canonicalize,cse,dce,shard,bucket";

struct MeshConfig {
  ir::Mesh mesh;
  int zero = 0; // ZeRO stage: 0, 1 or 2
  // Gradient all-reduces fused into buckets of this many MiB (0: none).
  double bucketMiB = 25;
};

struct MeshStep {
  // The logical step after the shard pass: every value placed, the
  // communication ops in place. Its arguments and outputs are the step's
  // (logical names and types).
  std::unique_ptr<ir::Module> sharded;
  passes::DevicePrograms programs;
  // One executable per distinct program (same index as programs.programs).
  std::vector<std::unique_ptr<backend::Executable>> executables;

  std::vector<const backend::Executable *> perDevice() const;
};

// Builds the step of `model` (a frontend module, train overrides applied)
// for `config`. Reports and fails on bad settings, a mesh the model cannot
// be split on, or any pass error.
FailureOr<MeshStep> buildMeshStep(const ir::Module &model,
                                  const MeshConfig &config,
                                  DiagnosticEngine &diag);

class MeshRunner {
public:
  static std::unique_ptr<MeshRunner>
  create(MeshStep step, const backend::cpu::MeshOptions &options,
         DiagnosticEngine &diag);

  // One step: `arguments` are whole tensors by name (every input,
  // parameter and state of the step); the outputs and updates returned are
  // whole tensors (parts joined, partial sums added).
  FailureOr<backend::cpu::RunResult>
  run(const backend::cpu::NamedTensors &arguments, DiagnosticEngine &diag);

  const MeshStep &step() const { return step_; }
  backend::cpu::MeshExecutor &executor() { return *executor_; }

private:
  MeshRunner(MeshStep step) : step_(std::move(step)) {}
  MeshStep step_;
  std::unique_ptr<backend::cpu::MeshExecutor> executor_;
};

} // namespace mgc::session
