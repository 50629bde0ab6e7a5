// A device executor for tests (backend/DeviceExecutor.h) that keeps every
// argument's "device" copy in host memory of its own, runs the CPU executor
// on those copies and counts each byte that crosses between them and the
// caller: what a runtime does with a device, checked without one.
#pragma once

#include "backend/DeviceExecutor.h"
#include "backend/cpu/CpuExecutor.h"

#include <memory>
#include <string>

namespace mgc::backend::testing {

class HostDevice final : public DeviceExecutor {
public:
  // `graph`: accept the next run's inputs early, as CUDA's executor with
  // a CUDA Graph does. `comm`: the device's communicator in a mesh.
  static std::unique_ptr<DeviceExecutor> create(const Executable &exe,
                                                bool graph,
                                                DiagnosticEngine &diag,
                                                Communicator *comm = nullptr) {
    cpu::CpuOptions options;
    options.comm = comm;
    auto cpu = cpu::CpuExecutor::create(exe, options, diag);
    if (!cpu)
      return nullptr;
    auto d = std::make_unique<HostDevice>();
    d->exe_ = &exe;
    d->cpu_ = std::move(cpu);
    d->graph_ = graph;
    return d;
  }

  FailureOr<RunResult> run(const TensorRefs &arguments, DiagnosticEngine &diag,
                           const RunControl &control) override {
    moved_ = {};
    auto ran = runOnce(arguments, diag, control);
    total_ += moved_;
    return ran;
  }

  FailureOr<RunResult> runOnce(const TensorRefs &arguments,
                               DiagnosticEngine &diag,
                               const RunControl &control) {
    const ir::Graph &g = exe_->module->graph();
    if ((control.next || control.staged) && !graph_) {
      diag.error("inputs handed over early need a graph");
      return failure();
    }
    for (const auto &[name, tensor] : arguments) {
      const ir::Value *arg = g.findArgument(name);
      if (!arg) {
        diag.error("no argument '" + name + "'");
        return failure();
      }
      bool input = arg->kind() == ir::ValueKind::Input;
      if (input && control.staged) {
        auto it = staged_.find(name);
        if (it == staged_.end()) {
          diag.error("input '" + name + "' was not handed over");
          return failure();
        }
        device_.insert_or_assign(name, std::move(it->second));
        continue;
      }
      if (!input && control.resident && control.resident->count(name)) {
        if (!device_.count(name)) {
          diag.error("'" + name + "' is resident but was never copied in");
          return failure();
        }
        continue;
      }
      device_.insert_or_assign(name, *tensor);
      moved_.hostToDevice += tensor->nbytes();
    }
    staged_.clear();
    TensorRefs onDevice;
    for (const auto &[name, tensor] : arguments)
      onDevice.emplace(name, &device_.at(name));
    UpdateTargets into;
    for (const ir::Update &u : g.updates())
      into.emplace(u.target->name(), &device_.at(u.target->name()));
    auto ran = cpu_->run(onDevice, diag,
                         control.updatesStayOnDevice ? &into : nullptr);
    if (ran.failed())
      return failure();
    if (control.next)
      for (const auto &[name, tensor] : *control.next) {
        staged_.insert_or_assign(name, tensor);
        moved_.hostToDevice += tensor.nbytes();
      }
    RunResult out;
    for (auto &[name, t] : ran->outputs)
      if (!control.scalarOutputsOnly || t.numel() == 1) {
        moved_.deviceToHost += t.nbytes();
        out.outputs.emplace(name, std::move(t));
      }
    for (auto &[name, t] : ran->updates) {
      moved_.deviceToHost += t.nbytes();
      out.updates.emplace(name, std::move(t));
    }
    return out;
  }

  FailureOr<runtime::Tensor> readArgument(const std::string &name,
                                          DiagnosticEngine &diag) override {
    auto it = device_.find(name);
    if (it == device_.end()) {
      diag.error("'" + name + "' is not on the device");
      return failure();
    }
    moved_.deviceToHost += it->second.nbytes();
    total_.deviceToHost += it->second.nbytes();
    return it->second;
  }
  // Every run's and read's, since the executor was made.
  TransferBytes totalTransfers() const { return total_; }
  bool acceptsNextInputs() const override { return graph_; }
  const Executable &executable() const override { return *exe_; }
  TransferBytes lastTransfers() const override { return moved_; }

private:
  const Executable *exe_ = nullptr;
  std::unique_ptr<cpu::CpuExecutor> cpu_;
  bool graph_ = false;
  NamedTensors device_, staged_;
  TransferBytes moved_, total_;
};

} // namespace mgc::backend::testing
