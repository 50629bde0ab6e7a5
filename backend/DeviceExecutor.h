// One program on one device that is not the host, as a session drives it:
// arguments bound by name, parameters and optimizer state kept in the
// device's memory between runs, the next batch handed over early, and
// every byte that crosses between host and device counted. The CUDA
// executor implements it, and the CPU's (backend/cpu/CpuDevice.h: host
// memory is its device memory); tests implement it on host memory, so that
// what a session does with a device is checked without one.
#pragma once

#include "backend/DeviceMesh.h"
#include "support/Diagnostics.h"
#include "support/Result.h"

#include <map>
#include <set>
#include <string>

namespace mgc::backend {

// How one run treats the argument buffers, for a caller (a session) that
// keeps parameters and optimizer state on the device between steps.
struct RunControl {
  // The arguments whose device buffers already hold their values (from an
  // earlier run, or written there by another executor: HeldOutputs): not
  // copied in. One that is given is checked; one may be left out.
  const std::set<std::string> *resident = nullptr;
  // Copy each update's new value into its target's argument buffer on the
  // device at the end of the step, instead of returning it
  // (RunResult::updates stays empty; readArgument fetches a value).
  bool updatesStayOnDevice = false;
  // Where the executor accepts them (acceptsNextInputs: CUDA's with a CUDA
  // Graph): the inputs of the next run, handed over early. They are copied
  // to the device on a side stream, into the second set of input buffers,
  // while this run's step executes (the copy waits for nothing this step
  // does). The next run must then set `staged`.
  const NamedTensors *next = nullptr;
  // This run's inputs are the `next` of the previous run, already on their
  // way: not copied again (they must still be given, for the checks).
  bool staged = false;
  // Copy back only the outputs of one element (the loss, the learning rate,
  // the gradient norm): a training session reads nothing else of a step,
  // and a language model's logits output is gigabytes.
  bool scalarOutputsOnly = false;
  // For an executor that shares the buffers of another on the same device
  // (its holder, which keeps the step's state: the micro-batch programs of
  // gradient accumulation share the step program's): each output that the
  // holder takes as an argument (a micro-batch's gradient sums,
  // micro.sum.*) goes into the holder's buffer on the device instead of
  // coming back, copied there (Assign: the step's first micro-batch) or
  // added to what is there (Add), as the host adds them
  // (runtime::sumTensors), bit for bit.
  enum class HeldOutputs : uint8_t { Return, Assign, Add };
  HeldOutputs heldOutputs = HeldOutputs::Return;
  // With heldOutputs: the outputs that come back all the same, although
  // the holder takes them (a sum that other devices' parts go into, in an
  // order the caller keeps: a pipeline's tied embedding).
  const std::set<std::string> *returnedOutputs = nullptr;
};

class DeviceExecutor;

// What a new executor shares with others on its device: the executor whose
// buffers hold its persistent arguments (it allocates none of its own),
// and the one whose argument buffers take the outputs it leaves on the
// device (RunControl::heldOutputs; null: stateOf).
struct SharedBuffers {
  DeviceExecutor *stateOf = nullptr;
  DeviceExecutor *outputsInto = nullptr;
};

class DeviceExecutor {
public:
  virtual ~DeviceExecutor() = default;

  // The tensors of a run, held by the caller (they must outlive the call).
  using TensorRefs = std::map<std::string, const runtime::Tensor *>;

  // Runs the program once: every input, parameter and state tensor given
  // (those `control` marks resident are checked but not read), the outputs
  // and (unless control.updatesStayOnDevice) the updates returned. Errors
  // as the CPU executor's, reported to `diag`.
  virtual FailureOr<RunResult> run(const TensorRefs &arguments,
                                   DiagnosticEngine &diag,
                                   const RunControl &control = {}) = 0;
  // The value now in the device's buffer of argument `name`.
  virtual FailureOr<runtime::Tensor> readArgument(const std::string &name,
                                                  DiagnosticEngine &diag) = 0;
  // Whether a run may hand over the next run's inputs (RunControl::next).
  virtual bool acceptsNextInputs() const = 0;
  // The program it runs.
  virtual const Executable &executable() const = 0;
  // What the last run copied between host and device (its inputs, the
  // next run's handed over, the outputs it returned), and what
  // readArgument has read since.
  virtual TransferBytes lastTransfers() const = 0;
};

} // namespace mgc::backend
