// mgc::Session: creation from a model file or an executable, feeding
// inputs, training steps, forward runs and parameter access on the CPU
// backend.
#include "runtime/session/Guarded.h"
#include "runtime/session/SessionImpl.h"

#include "frontend/Frontend.h"
#include "ir/Interpreter.h"
#include "ir/TargetModule.h"
#include "passes/LossScale.h"
#include "passes/Optimizer.h"
#include "runtime/session/DeviceExecutors.h"
#include "runtime/session/Pipeline.h"
#include "runtime/session/PlanWarnings.h"
#include "runtime/session/SessionInternals.h"

#include "support/InputFile.h"
#include "llvm/ADT/StringExtras.h"

#include <cmath>
#include <cstring>

namespace mgc {

static_assert(static_cast<int>(DType::I64) ==
                      static_cast<int>(ir::DType::I64) &&
                  static_cast<int>(DType::BF16) ==
                      static_cast<int>(ir::DType::BF16),
              "the public dtypes mirror ir::DType");

ir::DType toIR(DType dtype) { return static_cast<ir::DType>(dtype); }
DType fromIR(ir::DType dtype) { return static_cast<DType>(dtype); }

std::string typeString(DType dtype, const std::vector<int64_t> &shape) {
  return std::string(dtypeName(dtype)) + ir::shapeStr(shape);
}

runtime::Tensor toRuntime(const Tensor &t) {
  ir::TensorType type(toIR(t.dtype()), t.shape());
  // A tensor whose bytes do not match its shape (zeros, as before).
  if (t.nbytes() !=
      static_cast<size_t>(type.size()) * ir::dtypeBytes(type.dtype))
    return runtime::Tensor(type);
  runtime::Tensor r = runtime::Tensor::uninitialized(type);
  if (r.nbytes() > 0)
    std::memcpy(r.data(), t.data(), r.nbytes());
  return r;
}

Tensor fromRuntime(const runtime::Tensor &t) {
  Tensor out =
      Tensor::zeros(fromIR(t.dtype()),
                    std::vector<int64_t>(t.shape().begin(), t.shape().end()));
  if (out.nbytes() == t.nbytes() && t.nbytes() > 0)
    std::memcpy(out.data(), t.data(), t.nbytes());
  return out;
}

DiagnosticCollector::DiagnosticCollector(const Session::Impl *impl) {
  if (impl && !impl->sourceText.empty())
    diag_.addSource(impl->sourceName, impl->sourceText);
}

Status DiagnosticCollector::status() {
  os_.flush();
  std::string message = text_;
  while (!message.empty() && message.back() == '\n')
    message.pop_back();
  if (message.empty())
    message = "error: the operation failed";
  return Status::error(message);
}

const ir::Value *session::findArgument(const Session::Impl &impl,
                                       const std::string &name,
                                       ir::ValueKind kind) {
  const ir::Value *v = impl.main->graph().findArgument(name);
  return v && v->kind() == kind ? v : nullptr;
}

namespace {

// Copies of the tensors `refs` points at, for the mesh runner, which takes
// a step's inputs by value (its devices keep their parameters and state).
backend::cpu::NamedTensors
copiesOf(const backend::cpu::CpuExecutor::TensorRefs &refs) {
  backend::cpu::NamedTensors out;
  for (const auto &[name, tensor] : refs)
    out.emplace(name, *tensor);
  return out;
}

} // namespace

namespace {

bool looksLikeExecutable(const std::string &path) {
  llvm::Expected<InputFile> file = InputFile::open(path, "model file");
  char magic[4];
  if (!file || file->size() < 4 || llvm::errorToBool(file->read(0, 4, magic))) {
    if (!file)
      llvm::consumeError(file.takeError());
    return llvm::StringRef(path).endswith(".mgx");
  }
  return llvm::StringRef(magic, 4) == "mgx ";
}

std::vector<TensorInfo> infos(const ir::Module &m, ir::ValueKind kind) {
  std::vector<TensorInfo> out;
  for (const auto &arg : m.graph().arguments())
    if (arg->kind() == kind)
      out.push_back({arg->name(), fromIR(arg->type().dtype),
                     std::vector<int64_t>(arg->type().shape.begin(),
                                          arg->type().shape.end())});
  return out;
}

std::string listNames(const ir::Module &m, ir::ValueKind kind) {
  std::vector<std::string> names;
  for (const auto &arg : m.graph().arguments())
    if (arg->kind() == kind)
      names.push_back(arg->name());
  return names.empty() ? "none" : llvm::join(names, ", ");
}

// Arguments for running `exe`: the fed inputs and (unless `inputsOnly`) the
// persistent tensors. Reports inputs that were never fed.
FailureOr<backend::cpu::CpuExecutor::TensorRefs>
gatherArguments(const ir::Module &program, const Session::Impl &impl,
                DiagnosticEngine &diag, bool inputsOnly = false) {
  backend::cpu::CpuExecutor::TensorRefs args;
  bool ok = true;
  for (const auto &arg : program.graph().arguments()) {
    if (inputsOnly && arg->kind() != ir::ValueKind::Input)
      continue;
    const auto &source =
        arg->kind() == ir::ValueKind::Input ? impl.fed : impl.persistent;
    auto it = source.find(arg->name());
    if (it == source.end()) {
      diag.error("input '" + arg->name() + "' (" + arg->type().str() +
                 ") has not been fed");
      ok = false;
      continue;
    }
    args.emplace(arg->name(), &it->second);
  }
  if (!ok)
    return failure();
  return args;
}

// Whether the programs run on the CUDA backend (SessionOptions::backend).
FailureOr<bool> chooseCuda(const SessionOptions &options,
                           DiagnosticEngine &diag) {
  const std::string &backend = options.backend;
  bool onMesh = !options.mesh.empty() || options.accumulate != 1;
  if (options.gpuPerDevice && (backend != "cuda" || !onMesh)) {
    diag.error("a GPU per device (--gpu-per-device) is for a mesh on the "
               "CUDA backend: give --backend cuda and a mesh (--mesh, "
               "--devices)");
    return failure();
  }
  if (backend != "" && backend != "cpu" && backend != "cuda" &&
      backend != "auto") {
    diag.error("unknown backend '" + backend + "': expected cpu, cuda or auto");
    return failure();
  }
  // A CUDA Graph on the CPU would be ignored without a word: refused.
  auto refuseGraph = [&](const std::string &why) -> FailureOr<bool> {
    diag.error("a CUDA Graph (--cuda-graph) needs the CUDA backend, but " +
               why);
    return failure();
  };
  if (backend.empty() || backend == "cpu") {
    if (options.cudaGraph)
      return refuseGraph("the backend is the CPU (give --backend cuda)");
    return false;
  }
  // A mesh runs on CUDA when asked for: "auto" keeps it on the CPU.
  std::optional<std::string> why = session::deviceUnavailableReason();
  if (backend == "auto") {
    bool cuda = !why && !onMesh;
    if (options.cudaGraph && !cuda)
      return refuseGraph("--backend auto chose the CPU (" +
                         (why ? *why
                              : std::string("a mesh stays on the CPU unless "
                                            "--backend cuda")) +
                         ")");
    return cuda;
  }
  if (why) {
    diag.error(*why);
    return failure();
  }
  return true;
}

std::string readOptimizerName(const ir::Module &step) {
  if (const ir::AttrValue *v = step.attrs().find("train.optimizer"))
    if (auto *s = std::get_if<std::string>(v))
      return *s;
  return "adamw"; // the optimizer pass's default
}

} // namespace

Result<std::unique_ptr<Session>>
Session::create(const std::string &path, const SessionOptions &options) {
  return session::guarded(
      "setting up the session", [&]() -> Result<std::unique_ptr<Session>> {
        auto impl = std::make_unique<Impl>();
        impl->seed = options.seed;
        impl->skipNonFiniteSteps = options.skipNonFiniteSteps;
        impl->findNonFinite = options.findNonFinite;
        DiagnosticCollector c;
        DiagnosticEngine &diag = c.diag();
        FailureOr<bool> onCuda = chooseCuda(options, diag);
        if (onCuda.failed())
          return c.status();
        impl->backendName = *onCuda ? "cuda" : "cpu";
        if (options.findNonFinite && *onCuda) {
          diag.error("looking for the first value that is not finite "
                     "(--find-nonfinite) needs the CPU backend, and the "
                     "session runs on CUDA");
          return c.status();
        }
        if (looksLikeExecutable(path)) {
          if (!options.defines.empty() || options.batchSize != 0 ||
              !options.train.empty() || !options.mesh.empty() ||
              options.zero != 0 || options.accumulate != 1 ||
              !options.precision.empty()) {
            diag.error(
                "'" + path +
                "' is a compiled executable: defines, the batch size, "
                "training settings, meshes and accumulation apply to model "
                "files (.mg) only");
            return c.status();
          }
          auto exe = backend::readExecutableFile(path, diag);
          if (!exe)
            return c.status();
          impl->modelHash = session::executableModelHash(*exe->module);
          if (!exe->module->graph().updates().empty()) {
            if (!exe->module->graph().lossOutput()) {
              diag.error("'" + path + "' has updates but no loss output");
              return c.status();
            }
            impl->forwardExe = session::forwardFromStep(*exe->module, diag);
            if (!impl->forwardExe)
              return c.status();
            impl->stepExe = std::move(exe);
          } else {
            impl->forwardExe = std::move(exe);
          }
        } else {
          frontend::CompileOptions compile;
          compile.defines = options.defines;
          compile.batchSize = options.batchSize;
          compile.warnUnused = false;
          std::map<std::string, frontend::Number> constants;
          compile.constantsOut = &constants;
          auto module = frontend::compileModelFile(path, compile, diag);
          if (!module || diag.hasErrors())
            return c.status();
          impl->sourceName = path;
          impl->sourceText = diag.sourceText(path).str();
          session::setHuggingFaceMap(*impl, path, options.hfMap, constants);
          std::string replaced =
              session::dropOtherOptimizerSettings(*module, options.train);
          if (!replaced.empty())
            impl->warnings.push_back(replaced);
          if (failed(
                  session::applyTrainOverrides(*module, options.train, diag)) ||
              failed(session::applyPrecision(*module, options.precision, diag)))
            return c.status();
          // Every program is compiled within the limits of the backend that
          // runs it (passes/Fusion.cpp); without the attribute, the CPU's.
          if (*onCuda)
            module->attrs().set(ir::kTargetAttr,
                                std::string(ir::kCudaTarget.name));
          if (!(impl->model = session::cloneModule(*module, diag)))
            return c.status();
          auto processes = session::jobProcesses(options, diag);
          if (processes.failed())
            return c.status();
          impl->processes = *processes;
          if (!options.mesh.empty() || options.accumulate != 1) {
            std::string error;
            std::optional<ir::Mesh> mesh =
                options.mesh.empty() ? std::optional<ir::Mesh>(ir::Mesh())
                                     : ir::Mesh::parse(options.mesh, error);
            if (!mesh) {
              diag.error("mesh '" + options.mesh + "': " + error);
              return c.status();
            }
            module->attrs().set(session::kModelHashAttr,
                                session::modelHash(*module));
            auto config = session::meshConfig(*mesh, *module, options, diag);
            if (config.failed())
              return c.status();
            impl->meshText = config->mesh.str();
            impl->mesh = config->mesh;
            impl->options = options;
            auto meshStep = session::buildMeshStep(*module, *config, diag);
            if (meshStep.failed() ||
                failed(session::checkSamePlan(*meshStep, impl->processes,
                                              options, diag)))
              return c.status();
            for (std::string &w :
                 session::planWarnings(*meshStep, *module, *config))
              impl->warnings.push_back(std::move(w));
            auto devices =
                session::meshDevices(options, *onCuda, impl->processes, diag);
            if (devices.failed())
              return c.status();
            impl->meshRunner = session::MeshRunner::create(
                std::move(*meshStep), *devices, impl->processes, diag);
            if (!impl->meshRunner)
              return c.status();
            if (options.findNonFinite && impl->meshRunner->pipeline()) {
              diag.error("looking for the first value that is not finite "
                         "(--find-nonfinite) is not done on a mesh with a "
                         "pp axis: look for it on the same mesh without pp "
                         "(mesh " +
                         options.mesh + ")");
              return c.status();
            }
          } else if (options.zero != 0) {
            diag.error("ZeRO (zero = " + std::to_string(options.zero) +
                       ") needs a mesh with a dp axis");
            return c.status();
          }
          bool onMesh = impl->meshRunner != nullptr;
          auto exes =
              session::buildModelExecutables(std::move(module), diag, !onMesh);
          if (exes.failed())
            return c.status();
          impl->stepExe = std::move(exes->step);
          impl->forwardExe = std::move(exes->forward);
          impl->modelHash =
              session::executableModelHash(*impl->forwardExe->module);
        }

        backend::cpu::CpuOptions cpu;
        cpu.findNonFinite = options.findNonFinite;
        cpu.threads =
            options.threads > 0 ? static_cast<unsigned>(options.threads) : 0;
        if (*onCuda && impl->stepExe) {
          impl->deviceStep = session::makeDeviceExecutor(
              *impl->stepExe, options.cudaGraph, diag);
          if (!impl->deviceStep)
            return c.status();
        }
        if (*onCuda) {
          impl->deviceForward =
              session::makeDeviceExecutor(*impl->forwardExe, false, diag);
          if (!impl->deviceForward)
            return c.status();
        }
        if (impl->stepExe) {
          if (!*onCuda)
            impl->stepRunner =
                backend::cpu::CpuExecutor::create(*impl->stepExe, cpu, diag);
          if (!*onCuda && !impl->stepRunner)
            return c.status();
          impl->main = impl->stepExe->module.get();
          impl->optimizer = readOptimizerName(*impl->main);
        } else if (impl->meshRunner) {
          impl->main = impl->meshRunner->step().sharded.get();
          impl->optimizer = readOptimizerName(*impl->main);
        } else {
          impl->main = impl->forwardExe->module.get();
        }
        impl->cpu = cpu;
        if (!*onCuda && !impl->meshRunner) {
          impl->forwardRunner =
              backend::cpu::CpuExecutor::create(*impl->forwardExe, cpu, diag);
          if (!impl->forwardRunner)
            return c.status();
        }

        // Parameters and state from their initialisers, as every backend does;
        // on a mesh each device makes only its parts (the host keeps the step
        // counter).
        for (const auto &arg : impl->main->graph().arguments())
          if (arg->isPersistent() &&
              (!impl->meshRunner || arg->name() == passes::kStepStateName))
            impl->persistent.emplace(
                arg->name(),
                runtime::Tensor::initial(
                    *arg, options.seed,
                    options.threads > 0
                        ? static_cast<unsigned>(options.threads)
                        : backend::cpu::hardwareThreads()));
        if (impl->meshRunner) {
          if (failed(impl->meshRunner->initialize(options.seed, diag)))
            return c.status();
          impl->deviceCurrent = impl->hostStale = true;
        }
        return std::unique_ptr<Session>(new Session(std::move(impl)));
      });
}

std::vector<TensorInfo> Session::inputs() const {
  return infos(*impl_->main, ir::ValueKind::Input);
}

std::vector<TensorInfo> Session::parameters() const {
  return infos(*impl_->main, ir::ValueKind::Param);
}

// Checks `value` against the data input `input` of the session's program:
// an empty message when it fits.
static std::string checkFeed(const Session::Impl &impl,
                             const std::string &input, const std::string &got) {
  const ir::Value *v = session::findArgument(impl, input, ir::ValueKind::Input);
  if (!v) {
    std::string why = session::findArgument(impl, input, ir::ValueKind::Param)
                          ? "'" + input +
                                "' is a parameter, not an input "
                                "(use setParameter)"
                          : "the model has no input '" + input + "'";
    return "error: cannot feed '" + input + "': " + why + "; its inputs are " +
           listNames(*impl.main, ir::ValueKind::Input);
  }
  std::string want = v->type().str();
  if (want != got)
    return "error: input '" + input + "' expects " + want + ", got " + got;
  return "";
}

Status Session::feed(const std::string &input, Tensor value) {
  return session::guarded("feeding an input", [&]() -> Status {
    std::string error =
        checkFeed(*impl_, input, typeString(value.dtype(), value.shape()));
    if (!error.empty())
      return Status::error(error);
    return SessionInternals::feed(*this, input, toRuntime(value));
  });
}

Status Session::feedNext(const std::string &input, Tensor value) {
  return session::guarded("feeding an input", [&]() -> Status {
    std::string error =
        checkFeed(*impl_, input, typeString(value.dtype(), value.shape()));
    if (!error.empty())
      return Status::error(error);
    return SessionInternals::feed(*this, input, toRuntime(value), true);
  });
}

Status SessionInternals::feed(Session &session, const std::string &input,
                              runtime::Tensor value, bool next) {
  Session::Impl &impl = *session.impl_;
  return session::guarded("feeding an input", [&]() -> Status {
    std::string error = checkFeed(impl, input, value.type().str());
    if (!error.empty())
      return Status::error(error);
    if (next) {
      impl.fedNext.insert_or_assign(input, std::move(value));
      return Status::ok();
    }
    impl.fed.insert_or_assign(input, std::move(value));
    // A value copied in ahead for this step is replaced.
    impl.fedStaged = false;
    return Status::ok();
  });
}

Result<StepResult> Session::step() {
  return session::guarded("the training step", [&]() -> Result<StepResult> {
    if (!impl_->stepExe && !impl_->meshRunner)
      return Status::error(
          "error: the model has no training step (it has no loss output, or "
          "the session was made from a forward-only executable); use "
          "forward()");
    DiagnosticCollector c(impl_.get());
    session::MeshRunner *mesh = impl_->meshRunner.get();
    // The state to go back to if the step is not finite.
    std::optional<backend::cpu::NamedTensors> before;
    if (impl_->skipNonFiniteSteps) {
      if (failed(session::syncHost(*impl_, c.diag())))
        return c.status();
      before = impl_->persistent;
    }
    auto args =
        gatherArguments(*impl_->main, *impl_, c.diag(), mesh != nullptr);
    if (args.failed())
      return c.status();
    if (failed(session::injectFault(*impl_, session::stepCount(*impl_) + 1,
                                    c.diag())))
      return c.status();
    if (mesh && !impl_->deviceCurrent) {
      // Changed on the host since the last step: cut the devices' parts anew.
      if (failed(mesh->load(impl_->persistent, c.diag())))
        return c.status();
      impl_->deviceCurrent = true;
    }
    bool nextStaged = false;
    auto run =
        mesh ? mesh->run(copiesOf(*args), c.diag(),
                         "step " +
                             std::to_string(session::stepCount(*impl_) + 1) +
                             ", ")
             : session::runProgram(*impl_, true, *args, c.diag(),
                                   &impl_->fedNext, &nextStaged);
    if (run.failed())
      return c.status();
    if (mesh)
      session::dropHostCopies(*impl_);
    for (auto &[name, t] : impl_->fedNext)
      impl_->fed.insert_or_assign(name, std::move(t));
    impl_->fedNext.clear();
    impl_->fedStaged = nextStaged;
    impl_->meshForwardStale = true;
    for (auto &[name, t] : run->updates)
      impl_->persistent.insert_or_assign(name, std::move(t));
    StepResult result;
    result.step = session::stepCount(*impl_);
    std::optional<backend::TransferBytes> moved;
    if (mesh)
      moved = mesh->lastTransfers();
    else
      moved = backend::TransferBytes{}; // the CPU: the host is the device
    if (!mesh && impl_->deviceStep)
      moved = impl_->deviceStep->lastTransfers();
    if (moved) {
      result.transfersMeasured = true;
      result.hostToDeviceBytes = moved->hostToDevice;
      result.deviceToHostBytes = moved->deviceToHost;
    }
    const ir::Output *loss = impl_->main->graph().lossOutput();
    for (const auto &[name, t] : run->outputs) {
      if (t.numel() != 1 || !t.shape().empty())
        continue;
      if (loss && name == loss->name)
        result.loss = t.get(0);
      else
        result.metrics[name] = t.get(0);
    }
    auto norm = result.metrics.find(passes::kGradNormOutputName);
    result.overflowed = result.metrics.count(passes::kLossScaleOutputName) &&
                        norm != result.metrics.end() &&
                        !std::isfinite(norm->second);
    if (impl_->findNonFinite && !result.finite()) {
      auto origin = session::describeNonFinite(*impl_, c.diag());
      if (origin.failed())
        return c.status();
      result.nonFiniteOrigin = *origin;
    }
    if (before && !result.finite()) {
      // Undo the update but keep the counter: the next step is the next
      // step of the schedule and of the data.
      runtime::Tensor counter = impl_->persistent.at(passes::kStepStateName);
      impl_->persistent = std::move(*before);
      impl_->persistent.insert_or_assign(passes::kStepStateName,
                                         std::move(counter));
      impl_->hostStale = false;
      session::hostChanged(*impl_);
      result.skipped = true;
    }
    return result;
  });
}

bool StepResult::finite() const {
  auto norm = metrics.find("grad_norm");
  return std::isfinite(loss) &&
         (norm == metrics.end() || std::isfinite(norm->second) || overflowed);
}

Result<std::map<std::string, Tensor>> Session::forward() {
  return session::guarded(
      "the forward pass", [&]() -> Result<std::map<std::string, Tensor>> {
        DiagnosticCollector c(impl_.get());
        if (failed(session::syncHost(*impl_, c.diag())))
          return c.status();
        auto args =
            gatherArguments(*impl_->forwardExe->module, *impl_, c.diag());
        if (args.failed())
          return c.status();
        auto run = session::runProgram(*impl_, false, *args, c.diag());
        if (run.failed())
          return c.status();
        std::map<std::string, Tensor> out;
        for (const auto &[name, t] : run->outputs)
          out.emplace(name, fromRuntime(t));
        return out;
      });
}

Result<Tensor> Session::parameter(const std::string &name) const {
  if (!session::findArgument(*impl_, name, ir::ValueKind::Param))
    return Status::error("error: the model has no parameter '" + name +
                         "'; its parameters are " +
                         listNames(*impl_->main, ir::ValueKind::Param));
  DiagnosticCollector c(impl_.get());
  if (failed(session::syncHost(*impl_, c.diag())))
    return c.status();
  return fromRuntime(impl_->persistent.at(name));
}

Status Session::setParameter(const std::string &name, const Tensor &value) {
  return session::guarded("setting a parameter", [&]() -> Status {
    const ir::Value *v =
        session::findArgument(*impl_, name, ir::ValueKind::Param);
    if (!v)
      return Status::error("error: the model has no parameter '" + name +
                           "'; its parameters are " +
                           listNames(*impl_->main, ir::ValueKind::Param));
    std::string want = v->type().str();
    std::string got = typeString(value.dtype(), value.shape());
    if (want != got)
      return Status::error("error: parameter '" + name + "' is " + want +
                           ", got " + got);
    DiagnosticCollector c(impl_.get());
    if (failed(session::syncHost(*impl_, c.diag())))
      return c.status();
    impl_->persistent.insert_or_assign(name, toRuntime(value));
    session::hostChanged(*impl_);
    return Status::ok();
  });
}

int64_t Session::stepCount() const { return session::stepCount(*impl_); }

uint64_t Session::seed() const { return impl_->seed; }

const std::string &Session::backendName() const { return impl_->backendName; }

Result<std::vector<DeviceCommunication>> Session::communication() const {
  return session::guarded(
      "the communication report",
      [&]() -> Result<std::vector<DeviceCommunication>> {
        if (!impl_->meshRunner)
          return Status::error(
              "error: communication is measured only for a step "
              "on a mesh (SessionOptions::mesh)");
        DiagnosticCollector c(impl_.get());
        auto devices = impl_->meshRunner->communication(c.diag());
        if (devices.failed())
          return c.status();
        return *devices;
      });
}

Result<PipelineReport> Session::pipelineReport() const {
  return session::guarded(
      "the pipeline report", [&]() -> Result<PipelineReport> {
        const session::PipelineRunner *runner =
            impl_->meshRunner ? impl_->meshRunner->pipeline() : nullptr;
        if (!runner)
          return Status::error(
              "error: a pipeline report needs a mesh with a pp "
              "axis (SessionOptions::mesh)");
        const session::PipelinePart &part = *impl_->meshRunner->step().pipeline;
        session::PipelineRunner::Times t = runner->times();
        if (impl_->processes && impl_->processes->size() > 1) {
          // Each process measured its own devices (zeros for the others'): add
          // every process's figures. Every rank calls this.
          std::vector<double> mine;
          for (size_t d = 0; d < t.busySeconds.size(); ++d)
            mine.insert(mine.end(), {t.busySeconds[d], t.waitSeconds[d],
                                     static_cast<double>(t.bytesSent[d])});
          std::string bytes(reinterpret_cast<const char *>(mine.data()),
                            mine.size() * sizeof(double)),
              error;
          std::vector<std::string> all;
          if (failed(impl_->processes->allGather(bytes, all, error)))
            return Status::error("error: gathering the pipeline's times: " +
                                 error);
          std::fill(t.busySeconds.begin(), t.busySeconds.end(), 0);
          std::fill(t.waitSeconds.begin(), t.waitSeconds.end(), 0);
          std::fill(t.bytesSent.begin(), t.bytesSent.end(), 0);
          for (const std::string &rank : all) {
            if (rank.size() != bytes.size())
              return Status::error("error: gathering the pipeline's times: a "
                                   "rank's figures are malformed");
            const double *v = reinterpret_cast<const double *>(rank.data());
            for (size_t d = 0; d < t.busySeconds.size(); ++d) {
              t.busySeconds[d] += v[3 * d];
              t.waitSeconds[d] += v[3 * d + 1];
              t.bytesSent[d] += static_cast<uint64_t>(v[3 * d + 2]);
            }
          }
        }
        PipelineReport r;
        r.stages = static_cast<int>(part.schedule.stages);
        r.microBatches = static_cast<int>(part.schedule.micro);
        r.schedule = passes::scheduleName(part.schedule.kind);
        r.bubble = t.bubble();
        r.predictedBubble = part.predicted.bubble;
        double steps = static_cast<double>(std::max<int64_t>(1, t.steps));
        for (size_t d = 0; d < t.bytesSent.size(); ++d) {
          r.bytesPerStep.push_back(static_cast<double>(t.bytesSent[d]) / steps);
          double perStage = static_cast<double>(t.devicesPerStage);
          r.waiting.push_back(
              t.seconds > 0 ? t.waitSeconds[d] / perStage / t.seconds : 0);
        }
        return r;
      });
}

Status Session::writeTrace(const std::string &path) const {
  return session::guarded("writing the trace", [&]() -> Status {
    if (!impl_->meshRunner)
      return Status::error("error: a trace is recorded only for a step on a "
                           "mesh (SessionOptions::mesh and trace)");
    DiagnosticCollector c(impl_.get());
    auto events = impl_->meshRunner->gatherTrace(c.diag());
    if (events.failed())
      return c.status();
    // With several processes rank 0 writes every device's timeline.
    if (rank() != 0)
      return Status::ok();
    if (failed(backend::cpu::writeChromeTrace(*events, path, c.diag())))
      return c.status();
    return Status::ok();
  });
}

} // namespace mgc
