// Runs an Executable on the CPU: binds input, parameter and state tensors by
// name, runs every op's kernel in the executable's order on one arena laid
// out by its memory plan, and returns the outputs and the new values of the
// updated parameters and state.
#pragma once

#include "backend/DeviceMesh.h"
#include "backend/Executable.h"
#include "backend/cpu/Kernels.h"
#include "runtime/Tensor.h"
#include "support/Diagnostics.h"
#include "support/Result.h"

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace mgc::backend::cpu {

using backend::NamedTensors;
using backend::NonFiniteOrigin;
using backend::RunResult;

struct CpuOptions {
  // Threads for the kernels, counting the caller; 0: one per hardware
  // thread. Results do not depend on it.
  unsigned threads = 0;
  // The device's communicator in a multi-device run (kernels of the
  // communication ops and local_split use it); null for one device.
  Communicator *comm = nullptr;
  // After each op, look for a NaN or an infinity in its result and keep the
  // first op that made one (firstNonFinite()): a scan of every result, for
  // finding where a diverging step went wrong.
  bool findNonFinite = false;
};

class CpuExecutor {
public:
  // Checks the executable (plan within the arena, an op kind the CPU knows)
  // and allocates the arena. Reports and returns null on error.
  static std::unique_ptr<CpuExecutor> create(const Executable &exe,
                                             const CpuOptions &options,
                                             DiagnosticEngine &diag);
  ~CpuExecutor();

  // Runs one step. `arguments` holds a tensor for every input, parameter and
  // state of the module, of the declared type; missing, extra or mistyped
  // tensors, and run-time errors (ids out of range), are reported naming the
  // tensor or the op's location.
  FailureOr<RunResult> run(const NamedTensors &arguments,
                           DiagnosticEngine &diag);
  // The same with the tensors held elsewhere (they must outlive the call):
  // a runtime whose programs share tensors passes them without copies.
  using TensorRefs = std::map<std::string, const runtime::Tensor *>;
  // `updateInto`: tensors (by update target name, of the target's type)
  // that take the value of their update in place, when the step is done,
  // instead of a new tensor in RunResult::updates; a session passes its
  // parameters and optimizer state, so that a step allocates and copies
  // none of them. A target may be bound as the argument it updates.
  using UpdateTargets = backend::UpdateTargets;
  FailureOr<RunResult> run(const TensorRefs &arguments, DiagnosticEngine &diag,
                           const UpdateTargets *updateInto = nullptr);

  const Executable &executable() const { return exe_; }
  uint64_t arenaBytes() const { return exe_.plan.peak; }
  unsigned threads() const { return pool_.size(); }

  // The pieces of run(), for a runtime that spreads the steps of one
  // program over several queues (MeshExecutor): bind the arguments, run
  // each step (in the executable's order, on any thread, as long as a step
  // runs after the steps that define its operands), collect the results.
  using Bound = std::vector<const runtime::Tensor *>;
  // Checks `arguments` as run() does and points `bound` at them (by graph
  // argument); every message starts with `prefix`.
  LogicalResult bindArguments(const NamedTensors &arguments, Bound &bound,
                              DiagnosticEngine &diag,
                              llvm::StringRef prefix = "");
  LogicalResult bindArguments(const TensorRefs &arguments, Bound &bound,
                              DiagnosticEngine &diag,
                              llvm::StringRef prefix = "");
  // Lends `updateInto` (as run() takes it) to the run just bound: an update
  // whose target is the very argument it updates may be written there by
  // its producer (placeUpdates); collectResults then takes the same map.
  void lendUpdateTargets(const Bound &bound, const UpdateTargets &updateInto);
  size_t numSteps() const { return steps_.size(); }
  const ir::Op &stepOp(size_t step) const { return *steps_[step].op; }
  // Runs the kernel of step `step` with `pool` (the executor's own pool
  // serves one thread at a time: another thread passes its own); on
  // failure sets `error` to "op %N (name): why".
  LogicalResult runStep(size_t step, const Bound &bound, ThreadPool &pool,
                        std::string &error);
  ThreadPool &pool() { return pool_; }
  // Copies the outputs and update values out of the arena (and arguments);
  // the updates named in `updateInto` into those tensors.
  RunResult collectResults(const Bound &bound,
                           const UpdateTargets *updateInto = nullptr);
  // With CpuOptions::findNonFinite: the first op of the last run (since
  // bindArguments) whose result was not finite; none if all were.
  std::optional<NonFiniteOrigin> firstNonFinite() const;

private:
  CpuExecutor(const Executable &exe, const CpuOptions &options,
              unsigned threads);
  // Records step `index` if its result is not finite and it comes before
  // the op recorded so far (steps may run on several threads).
  void checkFinite(size_t index, TensorRef result,
                   llvm::ArrayRef<TensorRef> operands);

  // Where an operand comes from: an argument (by index) or the arena.
  struct Source {
    int argument = -1; // index into arguments_, or -1: arena at `offset`
    uint64_t offset = 0;
    const ir::TensorType *type = nullptr;
    // The value of an update written in place (placeUpdates): in a run
    // where the argument with this index is its target, it lives there.
    int update = -1;
  };
  struct Step {
    const ir::Op *op;
    KernelFn kernel;
    std::vector<Source> operands;
    uint64_t offset, scratchOffset, scratchSize;
    bool transposed[2] = {false, false}; // KernelArgs::transposed
    int update = -1; // Source::update of its result
  };
  // Marks the fused ops that may write an update's value into its target
  // argument instead of the arena: the op is the update's producer, every
  // other reader of the argument runs before it, and a fused op reads each
  // block of its operands before it writes that block. Whether a run does
  // so depends on its `updateInto` (run).
  void placeUpdates();
  // Skips the transposes of matrices that only matmuls read, when the
  // matrix stays whole until those matmuls run (an argument, or a result
  // whose bytes no step in between overwrites): each such matmul reads it
  // with GEMM's transpose flag (KernelArgs::transposed).
  void foldTransposes();
  // Whether no step from `from` to `to` (inclusive) writes a result or
  // scratch space over the arena bytes of `src`.
  bool arenaKept(const Source &src, size_t from, size_t to) const;

  TensorRef resolve(const Source &s,
                    llvm::ArrayRef<const runtime::Tensor *> args);
  Source sourceOf(const ir::Value *v) const;

  const Executable &exe_;
  ThreadPool pool_;
  Communicator *comm_ = nullptr;
  std::vector<const ir::Value *> arguments_; // graph arguments in order
  std::vector<Step> steps_;
  // Of this run: per argument, whether updates are written into it
  // (placeUpdates; set by run, clear after bindArguments).
  std::vector<char> inPlace_;
  // The update values placeUpdates marked, and the argument of each.
  llvm::DenseMap<const ir::Value *, int> updateArgument_;
  std::byte *arena_ = nullptr;
  bool findNonFinite_ = false;
  mutable std::mutex nonFiniteMutex_;
  std::optional<NonFiniteOrigin> nonFinite_;
  // Arena offset of each op's result (by result value).
  llvm::DenseMap<const ir::Value *, uint64_t> offsetOf_;
};

} // namespace mgc::backend::cpu
