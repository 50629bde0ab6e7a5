// The CUDA backend's parts that run without a device: the backend choice of
// sessions (cpu, cuda, auto) and its errors, the op support table, the
// out-of-memory check, the words of device errors and of failed CUDA calls.
// The device checks (CudaKernelTest, CudaTrainingTest) skip without one.
#include "CudaTestSupport.h"
#include "SourcePath.h"

#include "mgc/Session.h"

#include "ir/Builder.h"

namespace mgc::backend::testing {
namespace {

std::string sample(const char *file) {
  return mgc::test::sourceDir() + "/samples/" + file;
}

std::map<std::string, std::string> tinyMlp() {
  return {{"B", "4"}, {"D", "6"}, {"H", "8"}, {"C", "3"}};
}

TEST_CASE("cuda: an unknown backend is an error") {
  SessionOptions options;
  options.defines = tinyMlp();
  options.backend = "tpu";
  auto s = Session::create(sample("mlp.mg"), options);
  REQUIRE(!s);
  CHECK(s.status().message().find(
            "unknown backend 'tpu': expected cpu, cuda or auto") !=
        std::string::npos);
}

#if MGC_HAVE_CUDA

// Without a device, cuda is an error that says why and auto is the CPU;
// with one, both train and agree with the CPU on the first loss.
TEST_CASE("cuda: sessions choose their backend") {
  SessionOptions options;
  options.defines = tinyMlp();
  auto why = cuda::cudaUnavailableReason();
  auto feedAndStep = [](Session &s) {
    Tensor x = Tensor::fromFloats(
        {4, 6}, {0.1f,  -0.2f, 0.3f, 0.5f,  -0.4f, 0.2f, 0.7f,  0.1f,
                 -0.3f, 0.2f,  0.0f, 0.9f,  -0.5f, 0.3f, 0.1f,  0.2f,
                 0.4f,  -0.6f, 0.8f, -0.1f, 0.2f,  0.3f, -0.2f, 0.1f});
    Tensor y = Tensor::fromInts({4}, {0, 2, 1, 2});
    REQUIRE(s.feed("x", x));
    REQUIRE(s.feed("y", y));
    auto r = s.step();
    REQUIRE(r);
    return r->loss;
  };
  options.backend = "cpu";
  auto cpuSession = Session::create(sample("mlp.mg"), options);
  REQUIRE(cpuSession);
  double cpuLoss = feedAndStep(**cpuSession);

  options.backend = "auto";
  auto autoSession = Session::create(sample("mlp.mg"), options);
  REQUIRE(autoSession);
  double autoLoss = feedAndStep(**autoSession);
  if (why)
    CHECK(autoLoss == cpuLoss); // the CPU itself: bit-identical
  else
    CHECK(std::fabs(autoLoss - cpuLoss) <= 1e-5 * std::fabs(cpuLoss));

  options.backend = "cuda";
  auto cudaSession = Session::create(sample("mlp.mg"), options);
  if (why) {
    MESSAGE("no CUDA device: " << *why);
    REQUIRE(!cudaSession);
    CHECK(cudaSession.status().message().find("no CUDA device: " + *why) !=
          std::string::npos);
  } else {
    REQUIRE(cudaSession);
    CHECK(std::fabs(feedAndStep(**cudaSession) - cpuLoss) <=
          1e-5 * std::fabs(cpuLoss));
  }
}

// Every op of the table has a CUDA kernel; a new op must bring one.
TEST_CASE("cuda: every op of the table has a CUDA kernel") {
  for (const ir::OpInfo &info : ir::allOpInfos()) {
    INFO("op " << info.name.str());
    CHECK(bool(cuda::cudaKernelFor(info.kind)));
  }
}

// A communication op outside a mesh: named at create time, before any
// device is touched.
TEST_CASE("cuda: a communication op needs a communicator") {
  ir::Module m;
  ir::Builder b(m.graph());
  auto *x = m.graph().addInput("x", ir::TensorType(ir::DType::F32, {4}));
  auto r = b.create(ir::OpKind::AllReduce, {x}, {{"axis", std::string("dp")}});
  REQUIRE(r.ok());
  m.graph().addOutput("y", r.value);
  auto exe = buildExecutable(cloneModule(m), cpu::scratchBytes);
  std::string text;
  llvm::raw_string_ostream os(text);
  DiagnosticEngine diag(os);
  CHECK(!cuda::CudaExecutor::create(*exe, {}, diag));
  CHECK(os.str().find("op %0 (all_reduce) needs a communicator (a "
                      "multi-device run)") != std::string::npos);
}

TEST_CASE("cuda: out of memory is reported with what the plan needs") {
  std::string text;
  llvm::raw_string_ostream os(text);
  DiagnosticEngine diag(os);
  uint64_t gib = 1ull << 30;
  CHECK(succeeded(cuda::checkDeviceMemory("gpt", gib, 2 * gib, "GPU", diag)));
  CHECK(failed(cuda::checkDeviceMemory("gpt", 3 * gib + gib / 2, gib / 4,
                                       "NVIDIA H200", diag)));
  CHECK(os.str().find("out of memory: model 'gpt': the plan needs 3.50 GiB, "
                      "the device (NVIDIA H200) has 0.25 GiB free") !=
        std::string::npos);
}

// A plan far larger than any device: refused before anything runs.
TEST_CASE("cuda: a plan larger than the device is refused before a step") {
  if (skipWithoutCuda())
    return;
  ir::Module m;
  m.setName("huge");
  ir::Builder b(m.graph());
  // 2^38 floats: 1 TiB each for the argument and the result.
  auto *x = m.graph().addInput(
      "x", ir::TensorType(ir::DType::F32, {1 << 19, 1 << 19}));
  auto r = b.create(ir::OpKind::Exp, {x});
  REQUIRE(r.ok());
  m.graph().addOutput("y", r.value);
  auto exe = buildExecutable(cloneModule(m), cpu::scratchBytes);
  std::string text;
  llvm::raw_string_ostream os(text);
  DiagnosticEngine diag(os);
  CHECK(!cuda::CudaExecutor::create(*exe, {}, diag));
  INFO(os.str());
  // 2 TiB of arena and argument, plus the workspace.
  CHECK(os.str().find("out of memory: model 'huge': the plan needs 2048.0") !=
        std::string::npos);
  CHECK(os.str().find("free") != std::string::npos);
}

TEST_CASE("cuda: device errors and failed calls in words") {
  ir::Module m;
  ir::Builder b(m.graph());
  auto *table =
      m.graph().addInput("table", ir::TensorType(ir::DType::F32, {4, 2}));
  auto *ids = m.graph().addInput("ids", ir::TensorType(ir::DType::I32, {3}));
  auto r = b.create(ir::OpKind::Embedding, {table, ids});
  REQUIRE(r.ok());
  CHECK(cuda::describeDeviceError(*r.value->definingOp(), cuda::kIdOutOfRange,
                                  2, 9, 0) ==
        "embedding id 9 is out of range [0, 4) in element 2");
  CHECK(cuda::describeCudaFailure(
            "cudaMalloc(&p, n)", "/src/backend/cuda/CudaExecutor.cpp", 42,
            "cudaErrorMemoryAllocation", "out of memory") ==
        "cudaMalloc(&p, n) failed at backend/cuda/CudaExecutor.cpp:42: "
        "cudaErrorMemoryAllocation: out of memory");
}

#else

TEST_CASE("cuda: this build has no CUDA backend") {
  MESSAGE("no CUDA device: this build of mgc has no CUDA backend");
  SessionOptions options;
  options.defines = tinyMlp();
  options.backend = "cuda";
  auto s = Session::create(sample("mlp.mg"), options);
  REQUIRE(!s);
  CHECK(s.status().message().find("has no CUDA backend") != std::string::npos);
}

#endif

} // namespace
} // namespace mgc::backend::testing
