// The mesh runner with devices that keep their parameters and state, as
// CUDA's do (DeviceMesh::keepState), without a GPU: a test mesh wraps the
// CPU's simulated devices, holds each device's state in memory of its own
// and counts every byte that crosses into and out of it. Against the plain
// CPU mesh: the same losses bit for bit, no state bytes after the first
// step (with gradient accumulation too: the micro-batches share the step's
// state and leave their gradient sums on the devices), only scalars out, a
// gather and a checkpoint's parts fetched from the devices, and a load
// copied in again.
#include "HostDevice.h"
#include "MeshTestSupport.h"
#include "SourcePath.h"

#include "backend/cpu/InProcessCommunicator.h"
#include "frontend/Frontend.h"
#include "passes/Optimizer.h"
#include "runtime/ShardTensor.h"
#include "runtime/session/MeshRunner.h"
#include "runtime/session/MeshStep.h"

#include <set>

namespace mgc::backend::testing {
namespace {

// Simulated CPU devices that keep the parameters and state "on the device":
// in held_, copied from the arguments only when not current, updated in
// place, read back by readState(). A mesh made to share another's state
// (the micro-batches of accumulation) uses the holder's held_ and leaves
// its gradient sums in the holder's sums_. Every byte in and out is
// counted, by the mesh that moves it.
class KeepingMesh final : public DeviceMesh {
public:
  KeepingMesh(std::unique_ptr<DeviceMesh> inner,
              std::vector<const Executable *> programs, KeepingMesh *holder)
      : inner_(std::move(inner)), programs_(std::move(programs)),
        holder_(holder) {
    size_t n = inner_->localDevices().size();
    persistent_.assign(n, {});
    for (size_t k = 0; k < n; ++k)
      for (const auto &arg :
           programs_[static_cast<size_t>(inner_->localDevices()[k])]
               ->module->graph()
               .arguments())
        if (arg->isPersistent())
          persistent_[k].insert(arg->name());
    keep_ = holder != nullptr;
  }

  uint64_t bytesIn = 0, stateBytesIn = 0, bytesOut = 0;
  // Since the last run began (lastTransfers).
  TransferBytes sinceRun;

  std::optional<TransferBytes> lastTransfers() const override {
    return sinceRun;
  }

  bool keepState() override {
    keep_ = true;
    size_t n = inner_->localDevices().size();
    held_.assign(n, {});
    sums_.assign(n, {});
    onDevice_.assign(n, {});
    return true;
  }
  void stateChanged() override {
    for (std::set<std::string> &names : onDevice_)
      names.clear();
  }
  FailureOr<runtime::Tensor> readState(size_t k, const std::string &name,
                                       DiagnosticEngine &diag) override {
    auto it = held_[k].find(name);
    if (!onDevice_[k].count(name) || it == held_[k].end()) {
      diag.error("no current '" + name + "'");
      return failure();
    }
    bytesOut += it->second.nbytes();
    sinceRun.deviceToHost += it->second.nbytes();
    return it->second;
  }

  FailureOr<std::vector<RunResult>>
  run(const std::vector<NamedTensors> &arguments, DiagnosticEngine &diag,
      llvm::StringRef context,
      const std::vector<UpdateTargets> *updateInto) override {
    uint64_t inBefore = bytesIn, outBefore = bytesOut;
    auto ran = runCounted(arguments, diag, context, updateInto);
    sinceRun = {bytesIn - inBefore, bytesOut - outBefore};
    return ran;
  }

  FailureOr<std::vector<RunResult>>
  runCounted(const std::vector<NamedTensors> &arguments, DiagnosticEngine &diag,
             llvm::StringRef context,
             const std::vector<UpdateTargets> *updateInto) {
    size_t n = arguments.size();
    if (!keep_) {
      for (const NamedTensors &a : arguments)
        for (const auto &[name, t] : a)
          bytesIn += t.nbytes();
      auto ran = inner_->run(arguments, diag, context, updateInto);
      if (ran.succeeded())
        for (const RunResult &r : *ran)
          for (const auto *m : {&r.outputs, &r.updates})
            for (const auto &[name, t] : *m)
              bytesOut += t.nbytes();
      return ran;
    }
    KeepingMesh &home = holder_ ? *holder_ : *this;
    // The inputs come in; the state only when not current.
    std::vector<NamedTensors> args(n);
    for (size_t k = 0; k < n; ++k)
      for (const auto &[name, t] : arguments[k]) {
        if (!persistent_[k].count(name)) {
          bytesIn += t.nbytes();
          args[k].emplace(name, t);
        } else if (!home.onDevice_[k].count(name)) {
          bytesIn += t.nbytes();
          stateBytesIn += t.nbytes();
          home.held_[k].insert_or_assign(name, t);
          home.onDevice_[k].insert(name);
        }
      }
    // The held state is lent to the run and updated in place; the holder's
    // run reads the micro-batches' sums where they left them.
    std::vector<UpdateTargets> into(n);
    for (size_t k = 0; k < n; ++k) {
      for (const std::string &name : persistent_[k])
        args[k].emplace(name, std::move(home.held_[k].at(name)));
      for (const std::string &name : persistent_[k])
        into[k].emplace(name, &args[k].at(name));
      if (!holder_)
        for (auto &[name, t] : sums_[k])
          args[k].insert_or_assign(name, std::move(t));
    }
    auto ran = inner_->run(args, diag, context, &into);
    for (size_t k = 0; k < n; ++k)
      for (const std::string &name : persistent_[k])
        home.held_[k].at(name) = std::move(args[k].at(name));
    if (!holder_)
      for (NamedTensors &sums : sums_)
        sums.clear();
    if (ran.failed())
      return failure();
    // Only the scalars come out; updates stay, and so do the sums the
    // holder takes.
    std::vector<RunResult> out(n);
    for (size_t k = 0; k < n; ++k)
      for (auto &[name, t] : (*ran)[k].outputs) {
        if (holder_ &&
            llvm::StringRef(name).startswith(passes::kMicroSumPrefix)) {
          auto it = home.sums_[k].find(name);
          if (it == home.sums_[k].end())
            home.sums_[k].emplace(name, std::move(t));
          else
            it->second = runtime::sumTensors({it->second, t});
          continue;
        }
        if (t.numel() == 1) {
          bytesOut += t.nbytes();
          out[k].outputs.emplace(name, std::move(t));
        }
      }
    return out;
  }

  const std::vector<QueueTimes> &lastTimes() const override {
    return inner_->lastTimes();
  }
  const std::vector<TraceEvent> &trace() const override {
    return inner_->trace();
  }
  void clearTrace() override { inner_->clearTrace(); }
  void setTraceOrigin(std::chrono::steady_clock::time_point origin) override {
    inner_->setTraceOrigin(origin);
  }
  const ir::Mesh &mesh() const override { return inner_->mesh(); }
  llvm::ArrayRef<int64_t> localDevices() const override {
    return inner_->localDevices();
  }

private:
  std::unique_ptr<DeviceMesh> inner_;
  std::vector<const Executable *> programs_;
  KeepingMesh *holder_ = nullptr;
  bool keep_ = false;
  // Per local device (of the holder): the state, the micro-batches' sums
  // since its last run, and the names whose held value is current.
  std::vector<NamedTensors> held_, sums_;
  std::vector<std::set<std::string>> onDevice_;
  std::vector<std::set<std::string>> persistent_;
};

struct Runner {
  std::unique_ptr<session::MeshRunner> runner;
  // The test meshes, when they are: the step's first (the holder of the
  // state), then the micro-batches' of accumulation.
  std::vector<KeepingMesh *> keeping;

  // Summed over the test meshes.
  uint64_t total(uint64_t KeepingMesh::*count) const {
    uint64_t sum = 0;
    for (const KeepingMesh *k : keeping)
      sum += k->*count;
    return sum;
  }
  uint64_t bytesIn() const { return total(&KeepingMesh::bytesIn); }
  uint64_t stateBytesIn() const { return total(&KeepingMesh::stateBytesIn); }
  uint64_t bytesOut() const { return total(&KeepingMesh::bytesOut); }
};

Runner makeRunner(const ir::Module &model, const char *meshText, int accumulate,
                  bool keep) {
  DiagnosticEngine diag;
  SessionOptions options;
  options.accumulate = accumulate;
  auto config = session::meshConfig(meshOf(meshText), model, options, diag);
  REQUIRE(config.succeeded());
  auto step = session::buildMeshStep(model, *config, diag);
  REQUIRE(step.succeeded());
  cpu::MeshOptions cpuOptions;
  session::MeshDevices devices = session::cpuMeshDevices(cpuOptions);
  Runner r;
  if (keep) {
    auto plain = devices.make;
    devices.make =
        [plain,
         &r](const ir::Mesh &mesh, std::vector<const Executable *> programs,
             const CommunicatorFactory &communicators, DeviceMesh *stateOf,
             DiagnosticEngine &d) -> std::unique_ptr<DeviceMesh> {
      auto inner = plain(mesh, programs, communicators, nullptr, d);
      if (!inner)
        return nullptr;
      auto made =
          std::make_unique<KeepingMesh>(std::move(inner), std::move(programs),
                                        static_cast<KeepingMesh *>(stateOf));
      r.keeping.push_back(made.get());
      return made;
    };
  }
  r.runner =
      session::MeshRunner::create(std::move(*step), devices, nullptr, diag);
  REQUIRE(r.runner);
  REQUIRE(succeeded(r.runner->initialize(5, diag)));
  return r;
}

NamedTensors inputsOf(const ir::Module &model, int step) {
  ir::TensorMap all = randomArguments(model, 100 + step, 5, -1, 1);
  NamedTensors out;
  for (const auto &arg : model.graph().arguments())
    if (arg->kind() == ir::ValueKind::Input)
      out.emplace(arg->name(), runtime::Tensor::fromHost(all.at(arg->name())));
  return out;
}

bool sameTensors(const NamedTensors &a, const NamedTensors &b) {
  if (a.size() != b.size())
    return false;
  for (const auto &[name, t] : a) {
    auto it = b.find(name);
    if (it == b.end() || !bitIdentical(t, it->second))
      return false;
  }
  return true;
}

// A GPT small enough to train in a few milliseconds per step.
std::unique_ptr<ir::Module> tinyGpt(DiagnosticEngine &diag, int layers = 2,
                                    int batch = 4) {
  frontend::CompileOptions compile;
  compile.defines = {{"V", "32"},
                     {"T", "8"},
                     {"D", "16"},
                     {"H", "2"},
                     {"L", std::to_string(layers)},
                     {"B", std::to_string(batch)}};
  return frontend::compileModelFile(mgc::test::sourceDir() + "/samples/gpt.mg",
                                    compile, diag);
}

TEST_CASE("mesh runner: devices that keep their state move only the batch "
          "and scalars, with the plain mesh's results") {
  DiagnosticEngine diag;
  auto model = tinyGpt(diag);
  REQUIRE(model);
  struct Case {
    std::string mesh;
    int accumulate;
  };
  for (const Case &c : {Case{"dp=2", 1}, Case{"dp=2,tp=2", 1}, Case{"dp=2", 2},
                        Case{"dp=2,tp=2", 2}, Case{"tp=2", 4}}) {
    CAPTURE(c.mesh);
    CAPTURE(c.accumulate);
    Runner plain = makeRunner(*model, c.mesh.c_str(), c.accumulate, false);
    Runner kept = makeRunner(*model, c.mesh.c_str(), c.accumulate, true);
    // The step's mesh, and one per distinct set of micro-batch programs.
    REQUIRE(kept.keeping.size() >= (c.accumulate > 1 ? 2u : 1u));
    uint64_t batchBytes = 0;
    auto run = [&](int step) {
      NamedTensors inputs = inputsOf(*model, step);
      auto a = plain.runner->run(inputs, diag);
      uint64_t before = kept.bytesIn(), outBefore = kept.bytesOut();
      auto b = kept.runner->run(inputs, diag);
      REQUIRE(a.succeeded());
      REQUIRE(b.succeeded());
      // What the runner reports: the plain mesh's devices copy nothing,
      // the kept ones what the test meshes counted.
      REQUIRE(plain.runner->lastTransfers());
      CHECK(plain.runner->lastTransfers()->hostToDevice == 0);
      CHECK(plain.runner->lastTransfers()->deviceToHost == 0);
      REQUIRE(kept.runner->lastTransfers());
      CHECK(kept.runner->lastTransfers()->hostToDevice ==
            kept.bytesIn() - before);
      // The test meshes' count includes the step counter's readState.
      CHECK(kept.runner->lastTransfers()->deviceToHost ==
            kept.bytesOut() - outBefore);
      CHECK(sameTensors(a->outputs, b->outputs));
      // The step counter, read from the devices.
      CHECK(sameTensors(a->updates, b->updates));
      return kept.bytesIn() - before;
    };
    uint64_t first = run(0);
    CHECK(kept.stateBytesIn() > 0);
    uint64_t stateAfterFirst = kept.stateBytesIn();
    for (int step = 1; step < 3; ++step) {
      uint64_t outBefore = kept.bytesOut();
      batchBytes = run(step);
      CHECK(kept.stateBytesIn() == stateAfterFirst);
      // The scalar outputs of each device and micro-batch (loss, lr,
      // grad_norm) and the step counter: a few bytes, nothing of the
      // parameters or the gradients.
      CHECK(kept.bytesOut() - outBefore > 0);
      CHECK(kept.bytesOut() - outBefore <= 64 * 4 * c.accumulate);
    }
    CHECK(batchBytes < first);
    // A gather fetches the devices' state: the plain mesh's bits.
    uint64_t outBefore = kept.bytesOut();
    auto wholeA = plain.runner->gather(diag);
    auto wholeB = kept.runner->gather(diag);
    REQUIRE(wholeA.succeeded());
    REQUIRE(wholeB.succeeded());
    CHECK(sameTensors(*wholeA, *wholeB));
    CHECK(kept.bytesOut() - outBefore >= stateAfterFirst);
    // So do a checkpoint's parts.
    REQUIRE(succeeded(kept.runner->syncState(diag)));
    CHECK(kept.runner->localSlabs().size() ==
          plain.runner->localSlabs().size());
    // A load goes in again at the next step, and the steps go on equal.
    REQUIRE(succeeded(plain.runner->load(*wholeA, diag)));
    REQUIRE(succeeded(kept.runner->load(*wholeB, diag)));
    run(3);
    CHECK(kept.stateBytesIn() == 2 * stateAfterFirst);
    run(4);
    CHECK(kept.stateBytesIn() == 2 * stateAfterFirst);
  }
}

// A pipeline's programs on device executors (PipelineRunner::Devices): the
// test executor on host memory, which counts its copies, keeps the state
// and the gradient sums as CUDA's does, with communicators of its own for
// the stage meshes' collectives. It gives the CPU executors' bits, the
// runner reports what the executors copied, and after the first step (or
// a load) no parameter or state byte goes in and no gradient sum comes
// out but the tied embedding's, which two stages give.
TEST_CASE("mesh runner: a pipeline's programs run on device executors that "
          "keep the state") {
  DiagnosticEngine diag;
  auto model = tinyGpt(diag, 4, 8);
  REQUIRE(model);
  struct Case {
    const char *mesh, *schedule;
    int virtualStages;
  };
  for (const Case &c : {Case{"pp=2", "1f1b", 1}, Case{"pp=2,dp=2", "1f1b", 1},
                        Case{"pp=2", "gpipe", 1}, Case{"pp=2,tp=2", "zb-h1", 1},
                        Case{"pp=2", "interleaved", 2}}) {
    std::string what = std::string(c.mesh) + " " + c.schedule;
    CAPTURE(what);
    std::vector<HostDevice *> made;
    cpu::InProcessMesh *collectives = nullptr;
    bool endpointsOfCollectives = true, localIsDevice = true;
    auto makeRunner = [&](bool onTestDevices) {
      SessionOptions options;
      options.accumulate = 4;
      options.schedule = c.schedule;
      options.virtualStages = c.virtualStages;
      auto config = session::meshConfig(meshOf(c.mesh), *model, options, diag);
      REQUIRE(config.succeeded());
      auto step = session::buildMeshStep(*model, *config, diag);
      REQUIRE(step.succeeded());
      session::MeshDevices devices =
          session::cpuMeshDevices(cpu::MeshOptions());
      if (onTestDevices)
        devices.pipelineDevices = [&](const ir::Mesh &whole,
                                      ProcessGroup *processes) {
          CHECK(processes == nullptr);
          CHECK(whole.numDevices() == meshOf(c.mesh).numDevices());
          session::PipelineRunner::Devices out;
          out.keepState = true;
          out.collectives =
              [&](const ir::Mesh &m,
                  std::string &) -> std::unique_ptr<CommunicatorSet> {
            auto set = std::make_unique<cpu::InProcessMesh>(m);
            collectives = set.get();
            return set;
          };
          out.executors =
              [&](const Executable &program, Communicator &comm, size_t local,
                  const SharedBuffers &shared,
                  DiagnosticEngine &d) -> std::unique_ptr<DeviceExecutor> {
            endpointsOfCollectives &=
                collectives && &collectives->endpoint(comm.device()) == &comm;
            localIsDevice &= static_cast<int64_t>(local) == comm.device();
            auto e = HostDevice::create(
                program, false, d, &comm,
                static_cast<HostDevice *>(shared.stateOf),
                static_cast<HostDevice *>(shared.outputsInto));
            if (e)
              made.push_back(static_cast<HostDevice *>(e.get()));
            return e;
          };
          return out;
        };
      auto runner =
          session::MeshRunner::create(std::move(*step), devices, nullptr, diag);
      REQUIRE(runner);
      REQUIRE(succeeded(runner->initialize(5, diag)));
      return runner;
    };
    auto plain = makeRunner(false);
    auto tested = makeRunner(true);
    REQUIRE(!made.empty());
    REQUIRE(tested->pipeline());
    CHECK(tested->pipeline()->keepsState());
    CHECK(endpointsOfCollectives);
    CHECK(localIsDevice);
    auto stateBytesIn = [&] {
      uint64_t bytes = 0;
      for (const HostDevice *e : made)
        bytes += e->persistentBytesIn();
      return bytes;
    };
    auto returnedSums = [&] {
      std::set<std::string> names;
      for (const HostDevice *e : made)
        for (const std::string &name : e->returnedNames())
          if (llvm::StringRef(name).startswith("micro.sum."))
            names.insert(name);
      return names;
    };
    uint64_t reportedIn = 0, reportedOut = 0;
    auto run = [&](int step) {
      NamedTensors inputs = inputsOf(*model, step);
      auto a = plain->run(inputs, diag);
      auto b = tested->run(inputs, diag);
      REQUIRE(a.succeeded());
      REQUIRE(b.succeeded());
      CHECK(sameTensors(a->outputs, b->outputs));
      // The step counter, read from the devices.
      CHECK(sameTensors(a->updates, b->updates));
      REQUIRE(plain->lastTransfers());
      CHECK(plain->lastTransfers()->hostToDevice == 0);
      REQUIRE(tested->lastTransfers());
      reportedIn += tested->lastTransfers()->hostToDevice;
      reportedOut += tested->lastTransfers()->deviceToHost;
    };
    run(0);
    uint64_t stateAfterFirst = stateBytesIn();
    CHECK(stateAfterFirst > 0);
    // The tied embedding's gradient, given by the first and the last stage.
    CHECK(returnedSums().size() == 1);
    for (int step = 1; step < 3; ++step) {
      run(step);
      CHECK(stateBytesIn() == stateAfterFirst);
    }
    CHECK(returnedSums().size() == 1);
    TransferBytes counted;
    for (const HostDevice *e : made)
      counted += e->totalTransfers();
    CHECK(reportedIn == counted.hostToDevice);
    // The reads of the step counter are the runner's, not a run's.
    CHECK(reportedOut >= counted.deviceToHost);
    // A gather fetches the devices' state: the plain runner's bits.
    auto wholeA = plain->gather(diag);
    auto wholeB = tested->gather(diag);
    REQUIRE(wholeA.succeeded());
    REQUIRE(wholeB.succeeded());
    CHECK(sameTensors(*wholeA, *wholeB));
    // A load goes in again at the next step, and the steps go on equal.
    REQUIRE(succeeded(plain->load(*wholeA, diag)));
    REQUIRE(succeeded(tested->load(*wholeB, diag)));
    run(3);
    CHECK(stateBytesIn() == 2 * stateAfterFirst);
    run(4);
    CHECK(stateBytesIn() == 2 * stateAfterFirst);
    // The stage meshes' all-reduces went through the executors'
    // communicators; a pipeline of one device per stage has none.
    uint64_t collectiveBytes = 0;
    for (int64_t g = 0; g < collectives->mesh().numDevices(); ++g)
      collectiveBytes += collectives->endpoint(g).bytesSent();
    if (meshOf(c.mesh).numDevices() == 2)
      CHECK(collectiveBytes == 0);
    else
      CHECK(collectiveBytes > 0);
  }
}

} // namespace
} // namespace mgc::backend::testing
