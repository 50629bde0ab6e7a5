// The CPU's executor behind the device executor interface
// (backend/DeviceExecutor.h), for runtimes that drive every backend's
// executors the same way (the pipeline runner). The CPU's device memory is
// the host's: a run reads the caller's tensors where they are, so nothing
// is copied, nothing is resident but what the caller holds, and the
// updates come back (or into the caller's tensors) as CpuExecutor::run
// gives them.
#pragma once

#include "backend/DeviceExecutor.h"
#include "backend/cpu/CpuExecutor.h"

#include <memory>

namespace mgc::backend::cpu {

class CpuDevice final : public DeviceExecutor {
public:
  // Reports and returns null as CpuExecutor::create.
  static std::unique_ptr<CpuDevice> create(const Executable &exe,
                                           const CpuOptions &options,
                                           DiagnosticEngine &diag);

  // Runs CpuExecutor::run on the tensors given. A resident argument left
  // out, updates kept on the device, inputs handed over early and outputs
  // left in another executor's buffers are refused: the host holds every
  // value the CPU reads.
  FailureOr<RunResult> run(const TensorRefs &arguments, DiagnosticEngine &diag,
                           const RunControl &control = {}) override;
  // Refused: the CPU keeps no argument of its own.
  FailureOr<runtime::Tensor> readArgument(const std::string &name,
                                          DiagnosticEngine &diag) override;
  bool acceptsNextInputs() const override { return false; }
  // Nothing: host memory is the device's.
  TransferBytes lastTransfers() const override { return {}; }
  const Executable &executable() const override { return cpu_->executable(); }
  CpuExecutor &cpu() { return *cpu_; }

private:
  explicit CpuDevice(std::unique_ptr<CpuExecutor> cpu) : cpu_(std::move(cpu)) {}
  std::unique_ptr<CpuExecutor> cpu_;
};

} // namespace mgc::backend::cpu
