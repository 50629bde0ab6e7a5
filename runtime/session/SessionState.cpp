// Where a session's parameters and optimizer state live between steps,
// and how its programs run on them: in the session's host tensors on the
// CPU, or resident on a device (backend::DeviceExecutor) with the host
// copies fetched when someone reads them (syncHost).
#include "runtime/session/SessionImpl.h"

#include "passes/Optimizer.h"

#include <set>

namespace mgc {

FailureOr<backend::cpu::RunResult>
session::runProgram(Session::Impl &impl, bool step,
                    const backend::cpu::CpuExecutor::TensorRefs &refs,
                    DiagnosticEngine &diag,
                    const backend::cpu::NamedTensors *next, bool *nextStaged) {
  if (nextStaged)
    *nextStaged = false;
  if (step && impl.deviceStep) {
    // Parameters and state stay on the device: only the inputs (and, after
    // a change on the host, everything) are copied in.
    std::set<std::string> resident;
    if (impl.deviceCurrent)
      for (const auto &[name, tensor] : impl.persistent)
        resident.insert(name);
    backend::RunControl control{&resident, true};
    // Session::step reads the scalar outputs only.
    control.scalarOutputsOnly = true;
    // The inputs copied in during the last step, and the next ones handed
    // over now, when the executor double-buffers its inputs (a CUDA Graph).
    bool handOver = impl.deviceStep->acceptsNextInputs() && next &&
                    next->size() == impl.main->graph().inputs().size();
    control.staged = impl.fedStaged;
    control.next = handOver ? next : nullptr;
    impl.fedStaged = false;
    auto result = impl.deviceStep->run(refs, diag, control);
    if (result.failed())
      return failure();
    if (nextStaged)
      *nextStaged = handOver;
    impl.deviceCurrent = impl.hostStale = true;
    // The step counter is read after every step (stepCount).
    if (impl.persistent.count(passes::kStepStateName)) {
      auto counter =
          impl.deviceStep->readArgument(passes::kStepStateName, diag);
      if (counter.failed())
        return failure();
      result->updates.emplace(passes::kStepStateName, std::move(*counter));
    }
    return result;
  }
  if (!step && impl.deviceForward) {
    if (failed(session::syncHost(impl, diag)))
      return failure();
    return impl.deviceForward->run(refs, diag);
  }
  if (!step && !impl.forwardRunner) {
    // A mesh session makes its one-device forward executor (and its arena)
    // only when forward() is first called.
    impl.forwardRunner =
        backend::cpu::CpuExecutor::create(*impl.forwardExe, impl.cpu, diag);
    if (!impl.forwardRunner)
      return failure();
  }
  if (!step)
    return impl.forwardRunner->run(refs, diag);
  backend::cpu::CpuExecutor::UpdateTargets into;
  for (auto &[name, tensor] : impl.persistent)
    into.emplace(name, &tensor);
  return impl.stepRunner->run(refs, diag, &into);
}

LogicalResult session::syncHost(Session::Impl &impl, DiagnosticEngine &diag) {
  if (impl.meshRunner) {
    if (!impl.hostStale)
      return success();
    auto whole = impl.meshRunner->gather(diag);
    if (whole.failed())
      return failure();
    for (auto &[name, t] : *whole)
      impl.persistent.insert_or_assign(name, std::move(t));
    impl.hostStale = false;
    return success();
  }
  if (!impl.deviceStep || !impl.hostStale)
    return success();
  for (const ir::Update &u : impl.stepExe->module->graph().updates()) {
    auto value = impl.deviceStep->readArgument(u.target->name(), diag);
    if (value.failed())
      return failure();
    impl.persistent.insert_or_assign(u.target->name(), std::move(*value));
  }
  impl.hostStale = false;
  return success();
}

void session::hostChanged(Session::Impl &impl) {
  impl.deviceCurrent = false;
  impl.meshForwardStale = true;
}

void session::dropHostCopies(Session::Impl &impl) {
  for (auto it = impl.persistent.begin(); it != impl.persistent.end();)
    it = it->first == passes::kStepStateName ? std::next(it)
                                             : impl.persistent.erase(it);
  impl.hostStale = true;
}

int64_t session::stepCount(const Session::Impl &impl) {
  auto it = impl.persistent.find(passes::kStepStateName);
  if (it == impl.persistent.end() || it->second.numel() != 1)
    return 0;
  return static_cast<int64_t>(it->second.get(0));
}

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::~Session() = default;

} // namespace mgc
