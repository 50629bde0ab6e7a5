// A device executor for tests (backend/DeviceExecutor.h) that keeps every
// argument's "device" copy in host memory of its own, runs the CPU executor
// on those copies and counts each byte that crosses between them and the
// caller: what a runtime does with a device, checked without one. Made to
// share another's state (as CudaOptions::stateOf), it keeps its persistent
// arguments in that holder's memory and leaves the outputs the holder takes
// there (RunControl::heldOutputs), as CUDA's executor does.
#pragma once

#include "backend/DeviceExecutor.h"
#include "backend/cpu/CpuExecutor.h"
#include "runtime/ShardTensor.h"

#include <memory>
#include <string>

namespace mgc::backend::testing {

class HostDevice final : public DeviceExecutor {
public:
  // `graph`: accept the next run's inputs early, as CUDA's executor with
  // a CUDA Graph does. `comm`: the device's communicator in a mesh.
  // `stateOf`: the executor whose memory holds this one's persistent
  // arguments (each must be one of its persistent arguments, of the same
  // type); `outputsInto`: the one whose memory takes the outputs left on
  // the device (null: stateOf).
  static std::unique_ptr<DeviceExecutor>
  create(const Executable &exe, bool graph, DiagnosticEngine &diag,
         Communicator *comm = nullptr, HostDevice *stateOf = nullptr,
         HostDevice *outputsInto = nullptr) {
    if (stateOf)
      for (const auto &arg : exe.module->graph().arguments()) {
        if (!arg->isPersistent())
          continue;
        const ir::Value *held =
            stateOf->exe_->module->graph().findArgument(arg->name());
        if (!held || !held->isPersistent() || held->type() != arg->type()) {
          diag.error("'" + arg->name() + "' is not among the state of the " +
                     "executor it shares");
          return nullptr;
        }
      }
    cpu::CpuOptions options;
    options.comm = comm;
    auto cpu = cpu::CpuExecutor::create(exe, options, diag);
    if (!cpu)
      return nullptr;
    auto d = std::make_unique<HostDevice>();
    d->exe_ = &exe;
    d->cpu_ = std::move(cpu);
    d->graph_ = graph;
    d->holder_ = stateOf;
    d->outputsInto_ = outputsInto ? outputsInto : stateOf;
    return d;
  }

  FailureOr<RunResult> run(const TensorRefs &arguments, DiagnosticEngine &diag,
                           const RunControl &control) override {
    moved_ = {};
    auto ran = runOnce(arguments, diag, control);
    total_ += moved_;
    return ran;
  }

  // Every run's and read's, since the executor was made: all bytes, the
  // persistent arguments' bytes copied in, and the names of the outputs
  // that came back.
  TransferBytes totalTransfers() const { return total_; }
  uint64_t persistentBytesIn() const { return persistentIn_; }
  const std::set<std::string> &returnedNames() const { return returned_; }

  FailureOr<runtime::Tensor> readArgument(const std::string &name,
                                          DiagnosticEngine &diag) override {
    const ir::Value *arg = exe_->module->graph().findArgument(name);
    NamedTensors &at = arg ? memoryOf(*arg) : device_;
    auto it = at.find(name);
    if (it == at.end()) {
      diag.error("'" + name + "' is not on the device");
      return failure();
    }
    moved_.deviceToHost += it->second.nbytes();
    total_.deviceToHost += it->second.nbytes();
    return it->second;
  }
  bool acceptsNextInputs() const override { return graph_; }
  const Executable &executable() const override { return *exe_; }
  TransferBytes lastTransfers() const override { return moved_; }

private:
  // Where argument `arg`'s device copy lives: the holder's memory for a
  // persistent argument of an executor that shares its state.
  NamedTensors &memoryOf(const ir::Value &arg) {
    return holder_ && arg.isPersistent() ? holder_->device_ : device_;
  }

  FailureOr<RunResult> runOnce(const TensorRefs &arguments,
                               DiagnosticEngine &diag,
                               const RunControl &control) {
    const ir::Graph &g = exe_->module->graph();
    if ((control.next || control.staged) && !graph_) {
      diag.error("inputs handed over early need a graph");
      return failure();
    }
    if (control.heldOutputs != RunControl::HeldOutputs::Return &&
        !outputsInto_) {
      diag.error("outputs left in another executor's memory need a holder");
      return failure();
    }
    for (const auto &[name, tensor] : arguments)
      if (!g.findArgument(name)) {
        diag.error("no argument '" + name + "'");
        return failure();
      }
    TensorRefs onDevice;
    for (const auto &arg : g.arguments()) {
      const std::string &name = arg->name();
      NamedTensors &at = memoryOf(*arg);
      bool input = arg->kind() == ir::ValueKind::Input;
      auto given = arguments.find(name);
      if (input && control.staged) {
        auto it = staged_.find(name);
        if (it == staged_.end()) {
          diag.error("input '" + name + "' was not handed over");
          return failure();
        }
        at.insert_or_assign(name, std::move(it->second));
      } else if (control.resident && control.resident->count(name)) {
        if (!at.count(name)) {
          diag.error("'" + name + "' is resident but was never copied in");
          return failure();
        }
      } else if (given != arguments.end()) {
        at.insert_or_assign(name, *given->second);
        moved_.hostToDevice += given->second->nbytes();
        if (arg->isPersistent())
          persistentIn_ += given->second->nbytes();
      } else {
        continue; // missing: the CPU executor says so
      }
      onDevice.emplace(name, &at.at(name));
    }
    staged_.clear();
    UpdateTargets into;
    for (const ir::Update &u : g.updates())
      into.emplace(u.target->name(), &memoryOf(*u.target).at(u.target->name()));
    auto ran = cpu_->run(onDevice, diag,
                         control.updatesStayOnDevice ? &into : nullptr);
    // The sums others left here are used up: adding to them again, or
    // reading them as resident, is the caller's error.
    for (const std::string &name : std::exchange(leftHere_, {}))
      device_.erase(name);
    if (ran.failed())
      return failure();
    if (control.next)
      for (const auto &[name, tensor] : *control.next) {
        staged_.insert_or_assign(name, tensor);
        moved_.hostToDevice += tensor.nbytes();
      }
    RunResult out;
    for (auto &[name, t] : ran->outputs) {
      bool left = false;
      if (failed(leaveInHolder(name, t, control, left, diag)))
        return failure();
      if (left)
        continue;
      if (!control.scalarOutputsOnly || t.numel() == 1) {
        moved_.deviceToHost += t.nbytes();
        returned_.insert(name);
        out.outputs.emplace(name, std::move(t));
      }
    }
    for (auto &[name, t] : ran->updates) {
      moved_.deviceToHost += t.nbytes();
      out.updates.emplace(name, std::move(t));
    }
    return out;
  }

  // Leaves output `name` in the holder's memory (`left`) when the holder
  // takes it and `control` says so, assigned or added as the host adds;
  // adding to a sum never assigned is an error.
  LogicalResult leaveInHolder(const std::string &name, const runtime::Tensor &t,
                              const RunControl &control, bool &left,
                              DiagnosticEngine &diag) {
    if (control.heldOutputs == RunControl::HeldOutputs::Return ||
        (control.returnedOutputs && control.returnedOutputs->count(name)))
      return success();
    HostDevice &into = *outputsInto_;
    const ir::Value *arg = into.exe_->module->graph().findArgument(name);
    if (!arg || arg->isPersistent() || arg->type() != t.type())
      return success();
    left = true;
    into.leftHere_.insert(name);
    auto it = into.device_.find(name);
    if (control.heldOutputs == RunControl::HeldOutputs::Assign) {
      into.device_.insert_or_assign(name, t);
      return success();
    }
    if (it == into.device_.end()) {
      diag.error("output '" + name + "' is added to a sum never assigned");
      return failure();
    }
    it->second = runtime::sumTensors({it->second, t});
    return success();
  }

  const Executable *exe_ = nullptr;
  std::unique_ptr<cpu::CpuExecutor> cpu_;
  bool graph_ = false;
  HostDevice *holder_ = nullptr, *outputsInto_ = nullptr;
  NamedTensors device_, staged_;
  TransferBytes moved_, total_;
  uint64_t persistentIn_ = 0;
  std::set<std::string> returned_, leftHere_;
};

} // namespace mgc::backend::testing
