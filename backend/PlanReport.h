// The partition plan report: what a user reads to see and trust a parallel
// plan. Computed once from the sharded logical module (placements on every
// value, communication ops inserted), its device programs and their
// executables; then printed as an aligned table (printPlan), as JSON
// (printPlanJson) or drawn as a Graphviz graph (printPlanDot). The fields,
// the phases and the byte formulas are described in docs/plan.md.
#pragma once

#include "backend/Executable.h"
#include "ir/Graph.h"
#include "ir/Sharding.h"
#include "passes/Partition.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mgc::backend {

// One parameter of the logical model and the part each device holds.
struct PlanParam {
  std::string name;
  ir::TensorType logical;
  ir::Sharding sharding;
  // The distinct local types (shard shapes), in order of first appearance
  // by device; one entry when every device holds the same shape.
  std::vector<ir::TensorType> shards;
  // For each device, the index of its shard in `shards`.
  std::vector<size_t> shardOfDevice;
};

// Where in the training step an op runs. Forward: the loss depends on it.
// Optimizer: not forward, and it depends on the optimizer's state (a
// `state` argument) or comes after the first such op. Backward: the rest,
// in a module with a loss. Step: the module has no loss, so no phase can be
// told.
enum class PlanPhase { Forward, Backward, Optimizer, Step };
llvm::StringRef planPhaseName(PlanPhase phase); // "forward", ...

// One communication op of the sharded module (a collective, or a local
// split, which moves no data but changes a placement).
struct PlanComm {
  size_t opIndex = 0; // position among the sharded module's ops (%N)
  ir::OpKind kind = ir::OpKind::AllReduce;
  std::string axis;
  int64_t groupSize = 1;  // devices along the axis
  ir::Placement from, to; // the placement change on `axis`
  PlanPhase phase = PlanPhase::Step;
  bool collective = true; // stream "comm"; false: local_split, "compute"
  std::string scope;      // the communication op's scope
  // The value moved: "matmul %9" or "param w" (communication ops in
  // between are looked through), and its scope.
  std::string producer;
  std::string producerScope;
  // The parameters whose gradients are moved (several for a bucket of
  // fused gradients, in bucket order), or none when it cannot be told.
  std::vector<std::string> gradientsOf;
  // The parameter whose new value (after the update) is moved, or empty.
  std::string updateOf;
  ir::TensorType logical; // the logical type of the value moved
  // Estimated bytes each device sends in this op (ring algorithms).
  std::vector<uint64_t> bytesByDevice;

  llvm::StringRef stream() const { return collective ? "comm" : "compute"; }
  uint64_t maxBytes() const;
};

// The memory of one device, in bytes.
struct PlanDeviceMemory {
  int64_t device = 0;
  size_t program = 0;
  uint64_t paramBytes = 0; // `param` arguments (local types)
  uint64_t stateBytes = 0; // `state` arguments: optimizer moments, counters
  uint64_t inputBytes = 0; // `input` arguments: the batch
  // The arena of the device program's memory plan: activations, gradients
  // and temporaries. Unknown when no executable was given for the program.
  std::optional<uint64_t> arenaPeak;
  uint64_t commBytes = 0; // sent per step, the sum over PlanComm

  uint64_t total() const {
    return paramBytes + stateBytes + inputBytes + arenaPeak.value_or(0);
  }
};

struct PlanReport {
  std::string moduleName;
  ir::Mesh mesh;
  size_t numPrograms = 0;
  std::vector<PlanParam> params;
  std::vector<PlanComm> comms; // in step order
  // Collectives over an axis of one device (a pipeline's stage mesh of one
  // device keeps its dp axis of size 1): they move nothing and are left
  // out of `comms`.
  size_t oneDeviceCollectives = 0;
  std::vector<PlanDeviceMemory> devices;
  // What the mesh's devices are when they are not the run's own (the
  // micro-batch devices of gradient accumulation), for the title: empty
  // for the mesh of the run.
  std::string devicesAre;
  // Inconsistencies between the inputs (a device without a program, a
  // communication op on an axis the mesh does not have, ...). The report
  // is still built; the affected numbers are left out or zero.
  std::vector<std::string> notes;

  size_t numCollectives() const; // comms on the "comm" stream
  // The largest per-step communication of any device.
  uint64_t maxCommBytesPerDevice() const;
  // The largest total memory of any device.
  uint64_t maxTotalBytes() const;
};

// Builds the report. `executableOfProgram[i]` is the executable of
// programs.programs[i] (null or missing: its arena peak is unknown). Never
// fails: what does not fit is listed in `notes`.
PlanReport
buildPlanReport(const ir::Module &sharded,
                const passes::DevicePrograms &programs,
                llvm::ArrayRef<const Executable *> executableOfProgram);

// Estimated bytes one device sends in a communication op over a group of
// `n` devices, from the bytes of its local operand and result (ring
// algorithms): all_reduce 2(n-1)/n * operand, reduce_scatter (n-1)/n *
// operand (the whole reduced tensor), all_gather (n-1)/n * result (the
// whole gathered tensor), all_to_all (n-1)/n * operand, local_split 0.
// Rounded down; 0 when n <= 1.
uint64_t commBytes(ir::OpKind kind, int64_t n, uint64_t operandBytes,
                   uint64_t resultBytes);

// "0 B", "512 B", "1.5 KiB", "3.0 MiB", "1.2 GiB": bytes below 1 KiB, else
// binary units with one decimal.
std::string formatBytes(uint64_t bytes);

// "dp=0,tp=1": the coordinates of `device` on `mesh`; "-" without axes.
std::string coordsText(const ir::Mesh &mesh, int64_t device);

// "0-3,6,8,9": device numbers, runs of three or more joined by a dash.
std::string formatDeviceList(llvm::ArrayRef<int64_t> devices);

// The aligned table (docs/plan.md, "The table").
void printPlan(const PlanReport &report, llvm::raw_ostream &os);
// The same content as JSON (docs/plan.md, "JSON").
void printPlanJson(const PlanReport &report, llvm::raw_ostream &os);
struct PlanDotOptions {
  // The devices drawn; empty: all. Collectives are joined only between
  // devices drawn.
  std::vector<int64_t> devices;
  // Draw the arguments (parameters, inputs, state) and their edges.
  bool arguments = true;
};

// A Graphviz graph of the partitioned step: one cluster per device with the
// ops of its program, communication ops highlighted, dashed edges joining
// the same collective across the devices of its group.
void printPlanDot(const ir::Module &sharded,
                  const passes::DevicePrograms &programs, llvm::raw_ostream &os,
                  const PlanDotOptions &options = {});

} // namespace mgc::backend
