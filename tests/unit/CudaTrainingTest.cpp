// A few training steps of the samples (MLP and a tiny GPT) on the CUDA
// backend against the CPU backend through sessions: the same losses at
// every step and the same parameters after, within 1e-4 of each tensor's
// largest element (AdamW scales small differences of tiny gradients).
// Also forward runs and CUDA Graph replay. Skips without a device.
#include "CudaTestSupport.h"
#include "SourcePath.h"

#include "mgc/Session.h"

#include <cstdio>
#include <unistd.h>

namespace mgc::backend::testing {
namespace {

#if MGC_HAVE_CUDA

std::string sample(const char *file) {
  return mgc::test::sourceDir() + "/samples/" + file;
}

// Random inputs for every input of the session: floats in [-1, 1), integers
// in [0, intLimit).
std::map<std::string, Tensor> batch(const Session &s, uint64_t seed,
                                    int64_t intLimit) {
  std::map<std::string, Tensor> out;
  for (const TensorInfo &info : s.inputs()) {
    Tensor t = Tensor::zeros(info.dtype, info.shape);
    for (int64_t i = 0; i < t.numel(); ++i) {
      double u = uniform01(seed, hashName(info.name), static_cast<uint64_t>(i));
      if (info.dtype == DType::I32)
        reinterpret_cast<int32_t *>(t.data())[i] =
            static_cast<int32_t>(u * static_cast<double>(intLimit));
      else if (info.dtype == DType::F32)
        reinterpret_cast<float *>(t.data())[i] = static_cast<float>(2 * u - 1);
    }
    out.emplace(info.name, std::move(t));
  }
  return out;
}

double maxAbs(const std::vector<float> &v) {
  double m = 0;
  for (float x : v)
    m = std::max(m, static_cast<double>(std::fabs(x)));
  return m;
}

void trainBoth(const char *model, std::map<std::string, std::string> defines,
               int64_t intLimit, int steps, bool graph) {
  SessionOptions options;
  options.defines = std::move(defines);
  options.seed = 3;
  auto cpuSession = Session::create(sample(model), options);
  REQUIRE(cpuSession);
  options.backend = "cuda";
  options.cudaGraph = graph;
  auto cudaSession = Session::create(sample(model), options);
  INFO((cudaSession ? "" : cudaSession.status().message()));
  REQUIRE(cudaSession);
  Session &cpu = **cpuSession, &gpu = **cudaSession;
  uint64_t seed = freshSeed();
  INFO(model << ", data seed " << seed << (graph ? ", CUDA Graph" : ""));
  for (int step = 0; step < steps; ++step) {
    for (auto &[name, t] : batch(cpu, seed + step, intLimit)) {
      REQUIRE(cpu.feed(name, t));
      REQUIRE(gpu.feed(name, t));
    }
    auto a = cpu.step(), b = gpu.step();
    REQUIRE(a);
    INFO((b ? "" : b.status().message()));
    REQUIRE(b);
    INFO("step " << step + 1);
    CHECK(b->step == a->step);
    // Parameters and state stay on the device after the first step: the
    // batch goes in, the scalars, the step counter and the error record
    // come out (no logits, no parameters).
    REQUIRE(b->transfersMeasured);
    if (step > 0) {
      uint64_t batchBytes = 0;
      for (const TensorInfo &info : gpu.inputs()) {
        uint64_t n = 1;
        for (int64_t d : info.shape)
          n *= static_cast<uint64_t>(d);
        batchBytes += n * 4; // every input here is f32 or i32
      }
      CHECK(b->hostToDeviceBytes == batchBytes);
      CHECK(b->deviceToHostBytes > 0);
      CHECK(b->deviceToHostBytes <= 256);
    }
    CHECK(a->transfersMeasured);
    CHECK(a->hostToDeviceBytes == 0);
    CHECK(std::fabs(b->loss - a->loss) <=
          1e-5 * std::max(1.0, std::fabs(a->loss)));
  }
  for (const TensorInfo &p : cpu.parameters()) {
    INFO("parameter " << p.name);
    std::vector<float> want = cpu.parameter(p.name)->toFloats();
    std::vector<float> got = gpu.parameter(p.name)->toFloats();
    REQUIRE(got.size() == want.size());
    double scale = std::max(maxAbs(want), 1e-30), worst = 0;
    for (size_t i = 0; i < want.size(); ++i)
      worst = std::max(worst, std::fabs(double(got[i]) - want[i]) / scale);
    CHECK(worst <= 1e-4);
  }
  // Forward on the device too.
  auto fa = cpu.forward(), fb = gpu.forward();
  REQUIRE(fa);
  REQUIRE(fb);
  for (const auto &[name, t] : *fa) {
    INFO("forward output " << name);
    std::vector<float> want = t.toFloats(), got = fb->at(name).toFloats();
    double scale = std::max(maxAbs(want), 1e-30), worst = 0;
    for (size_t i = 0; i < want.size(); ++i)
      worst = std::max(worst, std::fabs(double(got[i]) - want[i]) / scale);
    CHECK(worst <= 1e-4);
  }
}

TEST_CASE("cuda: MLP training steps match the CPU backend") {
  if (skipWithoutCuda())
    return;
  trainBoth("mlp.mg", {{"B", "16"}, {"D", "40"}, {"H", "64"}, {"C", "5"}}, 5, 4,
            false);
  trainBoth("mlp.mg", {{"B", "16"}, {"D", "40"}, {"H", "64"}, {"C", "5"}}, 5, 3,
            true);
}

TEST_CASE("cuda: GPT training steps match the CPU backend") {
  if (skipWithoutCuda())
    return;
  // Integer inputs below T index the vocabulary, the targets and positions.
  std::map<std::string, std::string> tiny = {
      {"V", "64"}, {"T", "8"}, {"D", "16"}, {"H", "2"}, {"L", "2"}, {"B", "2"}};
  trainBoth("gpt.mg", tiny, 8, 3, false);
  trainBoth("gpt.mg", tiny, 8, 3, true);
}

// Pipelines with their devices simulated on one GPU: the CPU's losses to
// f32 rounding, and after the first step no parameter or optimizer state
// crosses to the GPU (the stage programs share the update programs' device
// buffers; tests/unit/StateKeepingMeshTest.cpp checks the same logic on
// host memory, bit for bit).
TEST_CASE("cuda: GPT pipelines on one GPU train as on the CPU") {
  if (skipWithoutCuda())
    return;
  struct Case {
    const char *mesh, *schedule;
    int virtualStages;
  };
  for (const Case &c :
       {Case{"pp=2", "1f1b", 1}, Case{"pp=2,dp=2", "gpipe", 1},
        Case{"pp=2,tp=2", "zb-h1", 1}, Case{"pp=2", "interleaved", 2}}) {
    INFO(c.mesh << " " << c.schedule);
    SessionOptions options;
    options.defines = {{"V", "64"}, {"T", "8"}, {"D", "16"},
                       {"H", "2"},  {"L", "4"}, {"B", "8"}};
    options.seed = 3;
    options.mesh = c.mesh;
    options.accumulate = 4;
    options.schedule = c.schedule;
    options.virtualStages = c.virtualStages;
    auto cpu = Session::create(sample("gpt.mg"), options);
    REQUIRE(cpu);
    options.backend = "cuda";
    auto gpu = Session::create(sample("gpt.mg"), options);
    INFO((gpu ? "" : gpu.status().message()));
    REQUIRE(gpu);
    uint64_t parameterBytes = 0;
    for (const TensorInfo &p : (*cpu)->parameters()) {
      uint64_t n = 4;
      for (int64_t d : p.shape)
        n *= static_cast<uint64_t>(d);
      parameterBytes += n;
    }
    for (int step = 0; step < 3; ++step) {
      for (auto &[name, t] : batch(**cpu, 11 + step, 8)) {
        REQUIRE((*cpu)->feed(name, t));
        REQUIRE((*gpu)->feed(name, t));
      }
      auto a = (*cpu)->step(), b = (*gpu)->step();
      REQUIRE(a);
      INFO((b ? "" : b.status().message()));
      REQUIRE(b);
      CHECK(std::fabs(b->loss - a->loss) <=
            1e-5 * std::max(1.0, std::fabs(a->loss)));
      REQUIRE(b->transfersMeasured);
      INFO("step " << step + 1 << ": " << b->hostToDeviceBytes << " B in");
      if (step > 0)
        CHECK(b->hostToDeviceBytes < parameterBytes);
    }
  }
}

// With a CUDA Graph, batches handed over early (Session::feedNext) are
// copied in on the side stream; the steps equal those of batches fed before
// each step, bit for bit, also when a feed() replaces a handed-over batch.
TEST_CASE("cuda: a graph session with batches handed over early") {
  if (skipWithoutCuda())
    return;
  SessionOptions options;
  options.defines = {{"V", "64"}, {"T", "8"}, {"D", "16"},
                     {"H", "2"},  {"L", "2"}, {"B", "2"}};
  options.seed = 7;
  options.backend = "cuda";
  options.cudaGraph = true;
  auto plain = Session::create(sample("gpt.mg"), options);
  auto early = Session::create(sample("gpt.mg"), options);
  REQUIRE(plain);
  REQUIRE(early);
  uint64_t seed = freshSeed();
  INFO("data seed " << seed);
  // plain: batches 0, 1, 2, 9, 4 fed before their steps; early: batch k+1
  // handed over during step k, batch 3 replaced by 9 before step 3.
  std::vector<uint64_t> order = {0, 1, 2, 9, 4};
  for (uint64_t k : order) {
    for (auto &[name, t] : batch(**plain, seed + k, 8))
      REQUIRE((*plain)->feed(name, t));
    REQUIRE((*plain)->step());
  }
  for (auto &[name, t] : batch(**early, seed, 8))
    REQUIRE((*early)->feed(name, t));
  for (uint64_t k = 0; k < order.size(); ++k) {
    if (k == 3)
      for (auto &[name, t] : batch(**early, seed + 9, 8))
        REQUIRE((*early)->feed(name, t));
    if (k + 1 < order.size())
      for (auto &[name, t] : batch(**early, seed + k + 1, 8))
        REQUIRE((*early)->feedNext(name, t));
    auto r = (*early)->step();
    INFO((r ? "" : r.status().message()));
    REQUIRE(r);
  }
  for (const TensorInfo &p : (*plain)->parameters()) {
    INFO("parameter " << p.name);
    std::vector<float> a = (*plain)->parameter(p.name)->toFloats();
    std::vector<float> b = (*early)->parameter(p.name)->toFloats();
    CHECK(a == b);
  }
}

// The state a session keeps on the device is what its checkpoints save and
// what setParameter replaces.
TEST_CASE("cuda: checkpoints and setParameter see the device state") {
  if (skipWithoutCuda())
    return;
  SessionOptions options;
  options.defines = {{"B", "8"}, {"D", "12"}, {"H", "16"}, {"C", "4"}};
  options.seed = 5;
  auto cpu = Session::create(sample("mlp.mg"), options);
  options.backend = "cuda";
  auto gpu = Session::create(sample("mlp.mg"), options);
  REQUIRE(cpu);
  REQUIRE(gpu);
  auto stepBoth = [&](uint64_t seed) {
    for (auto &[name, t] : batch(**cpu, seed, 4)) {
      REQUIRE((*cpu)->feed(name, t));
      REQUIRE((*gpu)->feed(name, t));
    }
    auto a = (*cpu)->step(), b = (*gpu)->step();
    REQUIRE(a);
    REQUIRE(b);
    CHECK(std::fabs(a->loss - b->loss) <= 1e-5 * std::max(1.0, a->loss));
  };
  stepBoth(1);
  stepBoth(2);
  std::string path =
      "/tmp/mgc-cuda-ckpt-" + std::to_string(::getpid()) + ".safetensors";
  REQUIRE((*gpu)->saveCheckpoint(path));
  options.backend = "cpu";
  auto restored = Session::create(sample("mlp.mg"), options);
  REQUIRE(restored);
  REQUIRE((*restored)->loadCheckpoint(path));
  std::remove(path.c_str());
  CHECK((*restored)->stepCount() == 2);
  for (const TensorInfo &p : (*cpu)->parameters()) {
    INFO("parameter " << p.name);
    std::vector<float> want = (*cpu)->parameter(p.name)->toFloats();
    std::vector<float> got = (*restored)->parameter(p.name)->toFloats();
    double scale = std::max(maxAbs(want), 1e-30), worst = 0;
    for (size_t i = 0; i < want.size(); ++i)
      worst = std::max(worst, std::fabs(double(got[i]) - want[i]) / scale);
    CHECK(worst <= 1e-4);
  }
  // A parameter set on the host reaches the device at the next step.
  TensorInfo w1 = (*cpu)->parameters().front();
  Tensor zeros = Tensor::zeros(w1.dtype, w1.shape);
  REQUIRE((*cpu)->setParameter(w1.name, zeros));
  REQUIRE((*gpu)->setParameter(w1.name, zeros));
  stepBoth(3);
}

#endif

} // namespace
} // namespace mgc::backend::testing
