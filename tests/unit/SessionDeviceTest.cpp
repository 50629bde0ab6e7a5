// What a session does with a device, checked without one: sessions on
// --backend cuda run on a test executor (HostDevice) that keeps every
// argument's "device" copy in host memory of its own, runs the CPU
// executor on those copies and counts each byte that crosses between them
// and the session. Against a CPU session: the same losses and parameters
// bit for bit; after the first step only the batch goes in and the scalars
// and the step counter come out; a parameter read fetches the device's
// values; a parameter set on the host goes in again; with a CUDA Graph the
// next batch is handed over during a step.
#include "CpuTestSupport.h"
#include "HostDevice.h"
#include "SessionTestSupport.h"

#include "backend/DeviceExecutor.h"
#include "runtime/session/DeviceExecutors.h"

namespace mgc::backend::testing {
namespace {

using session_test::sample;

// Sessions made while it lives run on --backend cuda on HostDevice.
struct OnHostDevice {
  OnHostDevice() {
    session::setDeviceExecutorFactoryForTests(
        [](const Executable &exe, bool graph, DiagnosticEngine &diag) {
          return HostDevice::create(exe, graph, diag);
        });
  }
  ~OnHostDevice() { session::setDeviceExecutorFactoryForTests({}); }
};

SessionOptions tinyGpt(bool graph) {
  SessionOptions o;
  o.defines = {{"V", "32"}, {"T", "8"}, {"D", "16"},
               {"H", "2"},  {"L", "2"}, {"B", "2"}};
  o.seed = 4;
  o.cudaGraph = graph;
  return o;
}

// Batch k: token ids below 8 (the positions' range and the vocabulary's).
std::map<std::string, Tensor> batchOf(const Session &s, int k) {
  std::map<std::string, Tensor> out;
  for (const TensorInfo &info : s.inputs()) {
    Tensor t = Tensor::zeros(info.dtype, info.shape);
    for (int64_t i = 0; i < t.numel(); ++i)
      reinterpret_cast<int32_t *>(t.data())[i] =
          static_cast<int32_t>((i * 7 + k * 3 + info.name.size()) % 8);
    out.emplace(info.name, std::move(t));
  }
  return out;
}

uint64_t bytesOf(const std::map<std::string, Tensor> &batch) {
  uint64_t n = 0;
  for (const auto &[name, t] : batch)
    n += t.nbytes();
  return n;
}

void requireSameParameters(const Session &a, const Session &b) {
  for (const TensorInfo &p : a.parameters()) {
    INFO("parameter " << p.name);
    auto x = a.parameter(p.name), y = b.parameter(p.name);
    REQUIRE(x);
    REQUIRE(y);
    REQUIRE(x->nbytes() == y->nbytes());
    CHECK(std::memcmp(x->data(), y->data(), x->nbytes()) == 0);
  }
}

TEST_CASE("session on a device: the state stays there, the batch goes in, "
          "scalars come out, with the CPU's bits") {
  OnHostDevice onDevice;
  SessionOptions options = tinyGpt(false);
  auto cpuSession = Session::create(sample("gpt.mg"), options);
  options.backend = "cuda";
  auto deviceSession = Session::create(sample("gpt.mg"), options);
  REQUIRE(cpuSession);
  INFO((deviceSession ? "" : deviceSession.status().message()));
  REQUIRE(deviceSession);
  Session &cpu = **cpuSession;
  Session &dev = **deviceSession;
  CHECK(dev.backendName() == "cuda");
  uint64_t stateBytes = 0;
  for (const TensorInfo &p : dev.parameters())
    stateBytes += dev.parameter(p.name)->nbytes();
  for (int k = 0; k < 4; ++k) {
    INFO("step " << k + 1);
    std::map<std::string, Tensor> batch = batchOf(cpu, k);
    for (const auto &[name, t] : batch) {
      REQUIRE(cpu.feed(name, t));
      REQUIRE(dev.feed(name, t));
    }
    if (k == 2) {
      // A parameter set on the host: the next step copies the state in.
      auto w = cpu.parameter("wte");
      REQUIRE(w);
      REQUIRE(cpu.setParameter("wte", *w));
      REQUIRE(dev.setParameter("wte", *w));
    }
    auto a = cpu.step(), b = dev.step();
    REQUIRE(a);
    REQUIRE(b);
    CHECK(a->loss == b->loss);
    CHECK(a->metrics == b->metrics);
    CHECK(a->step == b->step);
    REQUIRE(b->transfersMeasured);
    CHECK(a->hostToDeviceBytes == 0);
    if (k == 0 || k == 2) {
      // Everything: the parameters and optimizer state too.
      CHECK(b->hostToDeviceBytes > bytesOf(batch) + stateBytes);
    } else {
      CHECK(b->hostToDeviceBytes == bytesOf(batch));
    }
    // loss, lr, grad_norm and the step counter, 4 bytes each: no logits.
    CHECK(b->deviceToHostBytes == 4 * 4);
  }
  // A read fetches the device's values.
  requireSameParameters(cpu, dev);
}

TEST_CASE("session on a device: with a CUDA Graph the next batch goes in "
          "during the step, with the same losses") {
  OnHostDevice onDevice;
  SessionOptions options = tinyGpt(true);
  options.backend = "cuda";
  auto deviceSession = Session::create(sample("gpt.mg"), options);
  SessionOptions plainOptions = tinyGpt(false);
  auto cpuSession = Session::create(sample("gpt.mg"), plainOptions);
  REQUIRE(cpuSession);
  INFO((deviceSession ? "" : deviceSession.status().message()));
  REQUIRE(deviceSession);
  Session &cpu = **cpuSession;
  Session &dev = **deviceSession;
  for (const auto &[name, t] : batchOf(cpu, 0))
    REQUIRE(dev.feed(name, t));
  for (int k = 0; k < 3; ++k) {
    INFO("step " << k + 1);
    for (const auto &[name, t] : batchOf(cpu, k))
      REQUIRE(cpu.feed(name, t));
    std::map<std::string, Tensor> next = batchOf(cpu, k + 1);
    for (const auto &[name, t] : next)
      REQUIRE(dev.feedNext(name, t));
    auto a = cpu.step(), b = dev.step();
    REQUIRE(a);
    REQUIRE(b);
    CHECK(a->loss == b->loss);
    // This step's batch went in during the last one (or, the first time,
    // with the state); the next one goes in now.
    if (k > 0)
      CHECK(b->hostToDeviceBytes == bytesOf(next));
  }
  requireSameParameters(cpu, dev);
}

TEST_CASE("session on a device: checkpoints move to the CPU and back with "
          "the same bits") {
  OnHostDevice onDevice;
  session_test::TempDir dir("device-checkpoint");
  SessionOptions options = tinyGpt(false);
  auto cpuSession = Session::create(sample("gpt.mg"), options);
  options.backend = "cuda";
  auto deviceSession = Session::create(sample("gpt.mg"), options);
  REQUIRE(cpuSession);
  REQUIRE(deviceSession);
  Session &cpu = **cpuSession;
  Session &dev = **deviceSession;
  auto stepBoth = [&](Session &a, Session &b, int k) {
    for (const auto &[name, t] : batchOf(a, k)) {
      REQUIRE(a.feed(name, t));
      REQUIRE(b.feed(name, t));
    }
    auto x = a.step(), y = b.step();
    REQUIRE(x);
    REQUIRE(y);
    CHECK(x->loss == y->loss);
  };
  for (int k = 0; k < 2; ++k)
    stepBoth(cpu, dev, k);
  // Saved from the device (its state fetched), resumed on a fresh CPU
  // session; saved from the CPU, resumed on a fresh device session.
  REQUIRE(dev.saveCheckpoint(dir.file("dev.ckpt")));
  REQUIRE(cpu.saveCheckpoint(dir.file("cpu.ckpt")));
  SessionOptions cpuOptions = tinyGpt(false);
  auto fromDevice = Session::create(sample("gpt.mg"), cpuOptions);
  auto fromCpu = Session::create(sample("gpt.mg"), options);
  REQUIRE(fromDevice);
  REQUIRE(fromCpu);
  REQUIRE((*fromDevice)->loadCheckpoint(dir.file("dev.ckpt")));
  REQUIRE((*fromCpu)->loadCheckpoint(dir.file("cpu.ckpt")));
  requireSameParameters(cpu, **fromDevice);
  for (int k = 2; k < 4; ++k) {
    stepBoth(cpu, **fromCpu, k);
    stepBoth(dev, **fromDevice, k);
  }
  requireSameParameters(cpu, **fromCpu);
  requireSameParameters(dev, **fromDevice);
}

} // namespace
} // namespace mgc::backend::testing
