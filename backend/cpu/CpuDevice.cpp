#include "backend/cpu/CpuDevice.h"

namespace mgc::backend::cpu {

std::unique_ptr<CpuDevice> CpuDevice::create(const Executable &exe,
                                             const CpuOptions &options,
                                             DiagnosticEngine &diag) {
  auto cpu = CpuExecutor::create(exe, options, diag);
  if (!cpu)
    return nullptr;
  return std::unique_ptr<CpuDevice>(new CpuDevice(std::move(cpu)));
}

FailureOr<RunResult> CpuDevice::run(const TensorRefs &arguments,
                                    DiagnosticEngine &diag,
                                    const RunControl &control) {
  if (control.updatesStayOnDevice || control.next || control.staged ||
      control.heldOutputs != RunControl::HeldOutputs::Return) {
    diag.error("the CPU's executor keeps no tensor of its own: its updates "
               "and outputs come back, and its inputs are read where they "
               "are (internal error)");
    return failure();
  }
  auto ran = cpu_->run(arguments, diag);
  if (ran.failed() || !control.scalarOutputsOnly)
    return ran;
  for (auto it = ran->outputs.begin(); it != ran->outputs.end();)
    it = it->second.numel() == 1 ? std::next(it) : ran->outputs.erase(it);
  return ran;
}

FailureOr<runtime::Tensor> CpuDevice::readArgument(const std::string &name,
                                                   DiagnosticEngine &diag) {
  diag.error("the CPU's executor holds no copy of '" + name +
             "': the caller's tensor is its value");
  return failure();
}

} // namespace mgc::backend::cpu
