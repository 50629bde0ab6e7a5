// Runs an Executable on the CPU: binds input, parameter and state tensors by
// name, runs every op's kernel in the executable's order on one arena laid
// out by its memory plan, and returns the outputs and the new values of the
// updated parameters and state.
#pragma once

#include "backend/Executable.h"
#include "backend/cpu/Kernels.h"
#include "runtime/Tensor.h"
#include "support/Diagnostics.h"
#include "support/Result.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mgc::backend::cpu {

using NamedTensors = std::map<std::string, runtime::Tensor>;

struct CpuOptions {
  // Threads for the kernels, counting the caller; 0: one per hardware
  // thread. Results do not depend on it.
  unsigned threads = 0;
};

struct RunResult {
  NamedTensors outputs;
  // The value each `update` gives its target after the step, by the
  // target's name (the caller, a session, stores them for the next step).
  NamedTensors updates;
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

  const Executable &executable() const { return exe_; }
  uint64_t arenaBytes() const { return exe_.plan.peak; }
  unsigned threads() const { return pool_.size(); }

private:
  CpuExecutor(const Executable &exe, unsigned threads);

  // Where an operand comes from: an argument (by index) or the arena.
  struct Source {
    int argument = -1; // index into arguments_, or -1: arena at `offset`
    uint64_t offset = 0;
    const ir::TensorType *type = nullptr;
  };
  struct Step {
    const ir::Op *op;
    KernelFn kernel;
    std::vector<Source> operands;
    uint64_t offset, scratchOffset, scratchSize;
  };

  TensorRef resolve(const Source &s,
                    llvm::ArrayRef<const runtime::Tensor *> args);
  Source sourceOf(const ir::Value *v) const;

  const Executable &exe_;
  ThreadPool pool_;
  std::vector<const ir::Value *> arguments_; // graph arguments in order
  std::vector<Step> steps_;
  std::byte *arena_ = nullptr;
  // Arena offset of each op's result (by result value).
  llvm::DenseMap<const ir::Value *, uint64_t> offsetOf_;
};

} // namespace mgc::backend::cpu
