// The state behind mgc::Session: the executables, their CPU executors, the
// parameters and optimizer state between steps, and the fed inputs. Shared
// by the session's files (creation and steps; checkpoints).
#pragma once

#include "mgc/Session.h"

#include "backend/DeviceExecutor.h"
#include "backend/Executable.h"
#include "backend/ProcessGroup.h"
#include "backend/cpu/CpuExecutor.h"
#include "frontend/ConstEval.h"
#include "runtime/session/MeshRunner.h"
#include "support/Diagnostics.h"

#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <string>

namespace mgc {

namespace session {
struct Decoding;
} // namespace session

struct Session::Impl {
  // The training step (null for a model without a loss) and the forward
  // program.
  std::unique_ptr<backend::Executable> stepExe, forwardExe;
  std::unique_ptr<backend::cpu::CpuExecutor> stepRunner, forwardRunner;
  // The CPU executors' options (a mesh session makes its forward executor
  // on the first forward()).
  backend::cpu::CpuOptions cpu;
  // On a device (the CUDA backend; session/DeviceExecutors.h): the
  // executors of the step (if any) and the forward program, instead of
  // stepRunner and forwardRunner.
  std::unique_ptr<backend::DeviceExecutor> deviceStep, deviceForward;
  // The training step on a mesh (instead of stepExe/stepRunner).
  std::unique_ptr<session::MeshRunner> meshRunner;
  // The mesh as given, with a cluster's dp shares (Session::meshText).
  std::string meshText;
  // What building the plan found worth saying (Session::warnings).
  std::vector<std::string> warnings;
  // The job's processes when the mesh is shared among several (not owned:
  // one per process), else null.
  backend::ProcessGroup *processes = nullptr;
  // The CUDA step and the mesh keep parameters and state on their devices
  // between steps. deviceCurrent: the devices hold every persistent tensor
  // (none changed on the host since); hostStale: `persistent` is older
  // than the devices (session::syncHost fetches it).
  bool deviceCurrent = false, hostStale = false;
  // The program whose arguments define the session: the step if there is
  // one, else the forward program.
  const ir::Module *main = nullptr;
  std::string modelHash;
  std::string optimizer; // "" without a training step
  uint64_t seed = 0;
  bool skipNonFiniteSteps = false;
  bool findNonFinite = false;
  std::string backendName; // "cpu" or "cuda": what the session runs on
  // Model source, so that diagnostics show the line and a caret.
  std::string sourceName, sourceText;
  // A model file's constants as compiled, and the name map of Hugging Face
  // checkpoints ("" where there is none): SessionHuggingFace.cpp.
  std::map<std::string, frontend::Number> constants;
  std::string hfMap;
  // Every parameter and state tensor, and the fed inputs, by name.
  backend::cpu::NamedTensors persistent, fed;
  // Inputs for the step after the next (Session::feedNext).
  backend::cpu::NamedTensors fedNext;
  // The model as the frontend made it, before any pass (a session made
  // from a model file, without a mesh): startDecoding builds from it.
  std::unique_ptr<ir::Module> model;
  // With a mesh: the mesh and the options the session was made with, and
  // the forward program on the mesh (Session::evaluate, made on first use),
  // whose parameters are loaded again after a step or a change on the host.
  ir::Mesh mesh;
  SessionOptions options;
  std::unique_ptr<session::MeshRunner> meshForward;
  bool meshForwardStale = true;
  // The decoding program and its key/value cache (startDecoding).
  std::unique_ptr<session::Decoding> decoding;
  // The fed inputs are on the device already, copied during the last step
  // (a CUDA Graph step given them as its RunControl::next).
  bool fedStaged = false;

  Impl();
  ~Impl();
};

// Free functions rather than members, so that libmgc.so's version script
// (which exports mgc::Session::*) does not export them.
namespace session {
// The argument of the session's program with this name and kind, or null.
const ir::Value *findArgument(const Session::Impl &impl,
                              const std::string &name, ir::ValueKind kind);
// Keeps a model file's constants, and finds the name map of Hugging Face
// checkpoints: `given` (SessionOptions::hfMap), else MODEL.hf.json beside
// `modelPath` where it exists.
void setHuggingFaceMap(
    Session::Impl &impl, const std::string &modelPath, const std::string &given,
    const std::map<std::string, frontend::Number> &constants);
// The tensors of a Hugging Face checkpoint under the model's parameter
// names (SessionHuggingFace.cpp); what the map did goes to `report`.
Result<runtime::TensorMap> readHuggingFace(const Session::Impl &impl,
                                           const std::string &path,
                                           InitFromReport &report);
// Steps done: the value of the optimizer's step counter (0 without one).
int64_t stepCount(const Session::Impl &impl);
// Brings `persistent` up to date with the devices after CUDA or mesh steps
// (a no-op otherwise); call before reading it. With several processes every
// rank calls it.
LogicalResult syncHost(Session::Impl &impl, DiagnosticEngine &diag);
// Says that `persistent` was changed on the host: the next CUDA step copies
// it to the device. Call after writing it.
void hostChanged(Session::Impl &impl);
// On a mesh, whose devices hold the parameters and state: frees the whole
// host copies in `persistent` (all but the step counter, which every step
// returns); syncHost joins them again when someone reads them.
void dropHostCopies(Session::Impl &impl);
// Runs the training step (`step`) or the forward program on the session's
// backend (not the mesh).
// A training step on the CUDA backend may take the next step's inputs
// (`next`) to copy them in while it runs; it says in `*nextStaged` whether
// it did.
// The arguments are the session's own tensors (not copies); on the CPU a
// step writes its updates into `persistent` in place.
FailureOr<backend::cpu::RunResult>
runProgram(Session::Impl &impl, bool step,
           const backend::cpu::CpuExecutor::TensorRefs &arguments,
           DiagnosticEngine &diag,
           const backend::cpu::NamedTensors *next = nullptr,
           bool *nextStaged = nullptr);
// The job's processes when `options` share a mesh among several (the
// launcher's variables say so and options.processes is "auto"), else null.
// Fails when the launch cannot run: no MPI in this build, MPI's world not
// the launcher's, or several processes with no mesh to share.
FailureOr<backend::ProcessGroup *> jobProcesses(const SessionOptions &options,
                                                DiagnosticEngine &diag);
// The devices of the session's mesh: CUDA devices when `onCuda` (one
// process only, for now), else simulated CPU devices.
FailureOr<MeshDevices> meshDevices(const SessionOptions &options, bool onCuda,
                                   backend::ProcessGroup *processes,
                                   DiagnosticEngine &diag);
// With several processes: every rank must have built the same plan (model,
// -D, mesh, settings, seed, the pipeline's schedule and stages) and been
// given the same SessionOptions::sameOnEveryRank; refuses, naming the
// first rank and setting that differ.
LogicalResult checkSamePlan(const MeshStep &step,
                            backend::ProcessGroup *processes,
                            const SessionOptions &options,
                            DiagnosticEngine &diag);
// With SessionOptions::findNonFinite, after a step that was not finite:
// where its values first stopped being finite, in words, with the op's
// source line ("" if the executors saw no such op). On a mesh shared among
// processes every rank calls it and all get the same answer (the lowest
// device's).
FailureOr<std::string> describeNonFinite(Session::Impl &impl,
                                         DiagnosticEngine &diag);
// The fault MGC_FAULT injects into this rank at step `step`, if any
// (backend/FaultInjection.h); fails on a malformed MGC_FAULT.
LogicalResult injectFault(const Session::Impl &impl, int64_t step,
                          DiagnosticEngine &diag);
} // namespace session

// Collects diagnostics into a string, for a Status.
class DiagnosticCollector {
public:
  explicit DiagnosticCollector(const Session::Impl *impl = nullptr);
  DiagnosticEngine &diag() { return diag_; }
  Status status();

private:
  std::string text_;
  llvm::raw_string_ostream os_{text_};
  DiagnosticEngine diag_{os_};
};

// Type conversions between the public API and the runtime.
ir::DType toIR(DType dtype);
DType fromIR(ir::DType dtype);
std::string typeString(DType dtype, const std::vector<int64_t> &shape);
runtime::Tensor toRuntime(const Tensor &t);
Tensor fromRuntime(const runtime::Tensor &t);

} // namespace mgc
