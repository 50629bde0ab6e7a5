// The mesh runner with devices that keep their parameters and state, as
// CUDA's do (DeviceMesh::keepState), without a GPU: a test mesh wraps the
// CPU's simulated devices, holds each device's state in memory of its own
// and counts every byte that crosses into and out of it. Against the plain
// CPU mesh: the same losses bit for bit, no state bytes after the first
// step, only scalars out, a gather and a checkpoint's parts fetched from
// the devices, and a load copied in again.
#include "MeshTestSupport.h"
#include "SourcePath.h"

#include "frontend/Frontend.h"
#include "passes/Optimizer.h"
#include "runtime/session/MeshRunner.h"
#include "runtime/session/MeshStep.h"

#include <set>

namespace mgc::backend::testing {
namespace {

// Simulated CPU devices that keep the parameters and state "on the device":
// in held_, copied from the arguments only when not current, updated in
// place, read back by readState(). Every byte in and out is counted.
class KeepingMesh final : public DeviceMesh {
public:
  KeepingMesh(std::unique_ptr<DeviceMesh> inner,
              std::vector<const Executable *> programs)
      : inner_(std::move(inner)), programs_(std::move(programs)) {}

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
    current_.assign(n, 0);
    persistent_.assign(n, {});
    for (size_t k = 0; k < n; ++k)
      for (const auto &arg :
           programs_[static_cast<size_t>(inner_->localDevices()[k])]
               ->module->graph()
               .arguments())
        if (arg->isPersistent())
          persistent_[k].insert(arg->name());
    return true;
  }
  void stateChanged() override { current_.assign(current_.size(), 0); }
  FailureOr<runtime::Tensor> readState(size_t k, const std::string &name,
                                       DiagnosticEngine &diag) override {
    auto it = held_[k].find(name);
    if (!current_[k] || it == held_[k].end()) {
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
    size_t n = arguments.size();
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
    // The inputs come in; the state only when not current.
    std::vector<NamedTensors> args(n);
    for (size_t k = 0; k < n; ++k)
      for (const auto &[name, t] : arguments[k]) {
        if (!persistent_[k].count(name)) {
          bytesIn += t.nbytes();
          args[k].emplace(name, t);
        } else if (!current_[k]) {
          bytesIn += t.nbytes();
          stateBytesIn += t.nbytes();
          held_[k].insert_or_assign(name, t);
        }
      }
    // The held state is lent to the run and updated in place.
    std::vector<UpdateTargets> into(n);
    for (size_t k = 0; k < n; ++k) {
      for (auto &[name, t] : held_[k])
        args[k].emplace(name, std::move(t));
      for (const std::string &name : persistent_[k])
        into[k].emplace(name, &args[k].at(name));
    }
    auto ran = inner_->run(args, diag, context, &into);
    for (size_t k = 0; k < n; ++k)
      for (auto &[name, t] : held_[k])
        t = std::move(args[k].at(name));
    if (ran.failed())
      return failure();
    current_.assign(n, 1);
    // Only the scalars come out; updates stay.
    std::vector<RunResult> out(n);
    for (size_t k = 0; k < n; ++k)
      for (auto &[name, t] : (*ran)[k].outputs)
        if (t.numel() == 1) {
          bytesOut += t.nbytes();
          out[k].outputs.emplace(name, std::move(t));
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
  bool keep_ = false;
  std::vector<NamedTensors> held_;
  std::vector<char> current_;
  std::vector<std::set<std::string>> persistent_;
};

struct Runner {
  std::unique_ptr<session::MeshRunner> runner;
  KeepingMesh *keeping = nullptr; // the test mesh, when it is one
};

Runner makeRunner(const ir::Module &model, const char *meshText, bool keep) {
  DiagnosticEngine diag;
  SessionOptions options;
  auto config = session::meshConfig(meshOf(meshText), model, options, diag);
  REQUIRE(config.succeeded());
  auto step = session::buildMeshStep(model, *config, diag);
  REQUIRE(step.succeeded());
  cpu::MeshOptions cpuOptions;
  session::MeshDevices devices = session::cpuMeshDevices(cpuOptions);
  Runner r;
  if (keep) {
    auto plain = devices.make;
    devices.make = [plain,
                    &r](const ir::Mesh &mesh,
                        std::vector<const Executable *> programs,
                        const CommunicatorFactory &communicators,
                        DiagnosticEngine &d) -> std::unique_ptr<DeviceMesh> {
      auto inner = plain(mesh, programs, communicators, d);
      if (!inner)
        return nullptr;
      auto mesh_ =
          std::make_unique<KeepingMesh>(std::move(inner), std::move(programs));
      r.keeping = mesh_.get();
      return mesh_;
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

TEST_CASE("mesh runner: devices that keep their state move only the batch "
          "and scalars, with the plain mesh's results") {
  DiagnosticEngine diag;
  frontend::CompileOptions compile;
  compile.defines = {{"V", "32"}, {"T", "8"}, {"D", "16"},
                     {"H", "2"},  {"L", "2"}, {"B", "4"}};
  auto model = frontend::compileModelFile(
      mgc::test::sourceDir() + "/samples/gpt.mg", compile, diag);
  REQUIRE(model);
  for (const char *mesh : {"dp=2", "dp=2,tp=2"}) {
    INFO(mesh);
    Runner plain = makeRunner(*model, mesh, false);
    Runner kept = makeRunner(*model, mesh, true);
    REQUIRE(kept.keeping);
    KeepingMesh &k = *kept.keeping;
    uint64_t batchBytes = 0;
    auto run = [&](int step) {
      NamedTensors inputs = inputsOf(*model, step);
      auto a = plain.runner->run(inputs, diag);
      uint64_t before = k.bytesIn;
      auto b = kept.runner->run(inputs, diag);
      REQUIRE(a.succeeded());
      REQUIRE(b.succeeded());
      // What the runner reports: the plain mesh's devices copy nothing,
      // the kept ones what the test mesh counted.
      REQUIRE(plain.runner->lastTransfers());
      CHECK(plain.runner->lastTransfers()->hostToDevice == 0);
      CHECK(plain.runner->lastTransfers()->deviceToHost == 0);
      REQUIRE(kept.runner->lastTransfers());
      CHECK(kept.runner->lastTransfers()->hostToDevice == k.bytesIn - before);
      // The test mesh's count includes the step counter's readState.
      CHECK(kept.runner->lastTransfers()->deviceToHost ==
            k.sinceRun.deviceToHost);
      CHECK(sameTensors(a->outputs, b->outputs));
      // The step counter, read from the devices.
      CHECK(sameTensors(a->updates, b->updates));
      return k.bytesIn - before;
    };
    uint64_t first = run(0);
    CHECK(k.stateBytesIn > 0);
    uint64_t stateAfterFirst = k.stateBytesIn;
    for (int step = 1; step < 3; ++step) {
      uint64_t outBefore = k.bytesOut;
      batchBytes = run(step);
      CHECK(k.stateBytesIn == stateAfterFirst);
      // The scalar outputs of each device (loss, lr, grad_norm) and the
      // step counter: a few bytes, nothing of the parameters.
      CHECK(k.bytesOut - outBefore > 0);
      CHECK(k.bytesOut - outBefore <= 64 * 4);
    }
    CHECK(batchBytes < first);
    // A gather fetches the devices' state: the plain mesh's bits.
    uint64_t outBefore = k.bytesOut;
    auto wholeA = plain.runner->gather(diag);
    auto wholeB = kept.runner->gather(diag);
    REQUIRE(wholeA.succeeded());
    REQUIRE(wholeB.succeeded());
    CHECK(sameTensors(*wholeA, *wholeB));
    CHECK(k.bytesOut - outBefore >= stateAfterFirst);
    // So do a checkpoint's parts.
    REQUIRE(succeeded(kept.runner->syncState(diag)));
    CHECK(kept.runner->localSlabs().size() ==
          plain.runner->localSlabs().size());
    // A load goes in again at the next step, and the steps go on equal.
    REQUIRE(succeeded(plain.runner->load(*wholeA, diag)));
    REQUIRE(succeeded(kept.runner->load(*wholeB, diag)));
    run(3);
    CHECK(k.stateBytesIn == 2 * stateAfterFirst);
    run(4);
    CHECK(k.stateBytesIn == 2 * stateAfterFirst);
  }
}

} // namespace
} // namespace mgc::backend::testing
