// Meshes on GPUs. The one-GPU communicator and the NCCL one (with one
// rank; across GPUs where there are several) against the in-process one,
// byte for byte, for every kind of call, dtype and several meshes; and
// training on a mesh simulated on the GPU (or on a GPU per device) against
// the same mesh on the CPU. Every test skips cleanly where no CUDA device
// can be used.
#include "CudaTestSupport.h"
#include "MeshTestSupport.h"
#include "SourcePath.h"

#include "backend/cpu/InProcessCommunicator.h"
#include "mgc/Session.h"
#include "support/Random.h"

#if MGC_HAVE_CUDA
#include "backend/cuda/CudaDevice.h"
#include "backend/cuda/CudaLocalMesh.h"
#include "backend/cuda/NcclMesh.h"

#include <cuda_runtime_api.h>
#endif

#include <doctest/doctest.h>

#include <cstring>
#include <functional>
#include <vector>

namespace mgc::backend::testing {
namespace {

#if MGC_HAVE_CUDA

std::string sample(const char *file) {
  return mgc::test::sourceDir() + "/samples/" + file;
}

using Bytes = std::vector<std::byte>;

// One call of a device: from its endpoint, input and output buffers (host
// or device memory alike).
using Call =
    std::function<LogicalResult(int64_t device, Communicator &, const void *in,
                                void *out, std::string &error)>;

// The stream communicators under test: the one-GPU one (every device on
// GPU 0), or NCCL's (device d on GPU d).
struct GpuComms {
  std::function<std::unique_ptr<CommunicatorSet>(const ir::Mesh &,
                                                 std::string &)>
      make = [](const ir::Mesh &mesh, std::string &why) {
        return std::unique_ptr<CommunicatorSet>(
            cuda::CudaLocalMesh::create(mesh, why));
      };
  bool gpuPerDevice = false;
};

GpuComms ncclComms() {
  GpuComms c;
  c.make = [](const ir::Mesh &mesh, std::string &why) {
    return std::unique_ptr<CommunicatorSet>(
        cuda::NcclMesh::create(mesh, {}, why));
  };
  c.gpuPerDevice = true;
  return c;
}

// Runs `call` on every device of `meshText`, on the CPU communicator and on
// the GPU's, `rounds` times in a row (each round's result is the next
// one's input), and checks that the results are the same bytes.
// inputs/outBytes: per device.
void sameOnBoth(const char *meshText, const std::vector<Bytes> &inputs,
                const std::vector<size_t> &outBytes, const Call &call,
                int rounds = 1, const GpuComms &comms = {}) {
  ir::Mesh mesh = meshOf(meshText);
  int64_t n = mesh.numDevices();
  // CPU.
  cpu::InProcessMesh host(mesh);
  std::vector<Bytes> want(n);
  std::vector<Bytes> hostIn = inputs;
  for (int r = 0; r < rounds; ++r) {
    std::vector<std::string> errors(n);
    // One byte each: a std::vector<bool> packs them into shared words, and
    // the device threads write them at once.
    std::vector<char> ok(n);
    for (int64_t d = 0; d < n; ++d)
      want[d].assign(outBytes[d], std::byte{0});
    onDeviceThreads(n, [&](int64_t d) {
      ok[d] =
          call(d, host.endpoint(d), hostIn[d].data(), want[d].data(), errors[d])
              .succeeded();
    });
    for (int64_t d = 0; d < n; ++d) {
      INFO("cpu device " << d << ": " << errors[d]);
      REQUIRE(ok[d]);
    }
    if (r + 1 < rounds)
      for (int64_t d = 0; d < n; ++d)
        std::memcpy(hostIn[d].data(), want[d].data(),
                    std::min(hostIn[d].size(), want[d].size()));
  }
  // The GPU (or GPUs).
  std::string why;
  auto gpu = comms.make(mesh, why);
  INFO(why);
  REQUIRE(gpu);
  auto onGpuOf = [&](int64_t d) {
    REQUIRE(cudaSetDevice(comms.gpuPerDevice ? static_cast<int>(d) : 0) ==
            cudaSuccess);
  };
  std::vector<void *> in(n), out(n);
  std::vector<cudaStream_t> streams(n);
  for (int64_t d = 0; d < n; ++d) {
    onGpuOf(d);
    REQUIRE(cudaMalloc(&in[d], std::max<size_t>(1, inputs[d].size())) ==
            cudaSuccess);
    REQUIRE(cudaMalloc(&out[d], std::max<size_t>(1, outBytes[d])) ==
            cudaSuccess);
    REQUIRE(cudaMemcpy(in[d], inputs[d].data(), inputs[d].size(),
                       cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(cudaStreamCreateWithFlags(&streams[d], cudaStreamNonBlocking) ==
            cudaSuccess);
    gpu->endpoint(d).setStream(streams[d]);
  }
  for (int r = 0; r < rounds; ++r) {
    std::vector<std::string> errors(n);
    // One byte each: a std::vector<bool> packs them into shared words, and
    // the device threads write them at once.
    std::vector<char> ok(n);
    onDeviceThreads(n, [&](int64_t d) {
      ok[d] = cudaSetDevice(comms.gpuPerDevice ? static_cast<int>(d) : 0) ==
                  cudaSuccess &&
              call(d, gpu->endpoint(d), in[d], out[d], errors[d]).succeeded();
      if (ok[d] && r + 1 < rounds)
        ok[d] = cudaMemcpyAsync(
                    in[d], out[d], std::min(inputs[d].size(), outBytes[d]),
                    cudaMemcpyDeviceToDevice, streams[d]) == cudaSuccess;
    });
    for (int64_t d = 0; d < n; ++d) {
      INFO("gpu device " << d << ": " << errors[d]);
      REQUIRE(ok[d]);
    }
  }
  for (int64_t d = 0; d < n; ++d) {
    onGpuOf(d);
    REQUIRE(cudaStreamSynchronize(streams[d]) == cudaSuccess);
    Bytes got(outBytes[d]);
    REQUIRE(cudaMemcpy(got.data(), out[d], got.size(),
                       cudaMemcpyDeviceToHost) == cudaSuccess);
    INFO("device " << d);
    CHECK(got == want[d]);
    cudaFree(in[d]);
    cudaFree(out[d]);
    cudaStreamDestroy(streams[d]);
  }
}

// `count` elements of `dtype` for device d: values in [-2, 2), with equal
// values among them (and a NaN, for the maxima), as bytes.
Bytes values(ir::DType dtype, int64_t d, int64_t count, uint64_t seed,
             bool withNaN = false) {
  Bytes b(count * ir::dtypeBytes(dtype));
  for (int64_t i = 0; i < count; ++i) {
    double v = uniform01(seed, d, i) * 4 - 2;
    if (i % 97 == 5)
      v = 0.5; // the same on every device
    if (withNaN && i % 211 == 7 && d == 1)
      v = std::nan(""); // a sum's NaN bits differ between processors
    std::byte *at = b.data() + i * ir::dtypeBytes(dtype);
    switch (dtype) {
    case ir::DType::F32: {
      float f = static_cast<float>(v);
      std::memcpy(at, &f, 4);
      break;
    }
    case ir::DType::F64:
      std::memcpy(at, &v, 8);
      break;
    case ir::DType::BF16:
    case ir::DType::F16: {
      // bf16: a float's upper half; f16: any bits of a finite half.
      float f = static_cast<float>(v);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      uint16_t h = dtype == ir::DType::BF16
                       ? static_cast<uint16_t>(bits >> 16)
                       : static_cast<uint16_t>(0x3000 + (i * 131 + d) % 0x3000);
      std::memcpy(at, &h, 2);
      break;
    }
    case ir::DType::I32: {
      int32_t x = static_cast<int32_t>(uniform01(seed, d, i) * 4e9 - 2e9);
      std::memcpy(at, &x, 4);
      break;
    }
    case ir::DType::I64: {
      int64_t x = static_cast<int64_t>(uniform01(seed, d, i) * 4e12 - 2e12);
      std::memcpy(at, &x, 8);
      break;
    }
    }
  }
  return b;
}

const ir::DType kAllTypes[] = {ir::DType::F32, ir::DType::BF16, ir::DType::F16,
                               ir::DType::F64, ir::DType::I32,  ir::DType::I64};

TEST_CASE("cuda: the one-GPU communicator's all-reduces give the CPU's bits") {
  if (skipWithoutCuda())
    return;
  for (const char *mesh : {"dp=2", "dp=3", "dp=2,tp=2"})
    for (ir::DType dtype : kAllTypes)
      for (bool max : {false, true}) {
        INFO(mesh << " " << ir::dtypeName(dtype).str() << (max ? " max" : ""));
        int64_t n = meshOf(mesh).numDevices(), count = 1001;
        std::vector<Bytes> in;
        for (int64_t d = 0; d < n; ++d)
          in.push_back(values(dtype, d, count, 11, max));
        std::vector<size_t> out(n, in[0].size());
        // Both axes in turn where there are two, three rounds chained.
        sameOnBoth(
            mesh, in, out,
            [&](int64_t, Communicator &c, const void *i, void *o,
                std::string &e) {
              for (const ir::MeshAxis &axis : c.mesh().axes()) {
                LogicalResult r =
                    max ? c.allReduceMax(axis.name, i, o, count, dtype, e)
                        : c.allReduce(axis.name, i, o, count, dtype, e);
                if (failed(r))
                  return r;
                i = o; // the second axis reduces the first's result
              }
              return success();
            },
            3);
      }
}

TEST_CASE("cuda: the one-GPU communicator's gathers, scatters and "
          "all-to-all give the CPU's bits") {
  if (skipWithoutCuda())
    return;
  const std::vector<int64_t> counts = {5, 0, 7};
  int64_t all = 12;
  size_t bytes = 4;
  std::vector<Bytes> gatherIn, wholeIn;
  for (int64_t d = 0; d < 3; ++d) {
    gatherIn.push_back(values(ir::DType::F32, d, counts[d], 3));
    wholeIn.push_back(values(ir::DType::F32, d, all, 4));
  }
  sameOnBoth(
      "tp=3", gatherIn, std::vector<size_t>(3, all * bytes),
      [&](int64_t, Communicator &c, const void *i, void *o, std::string &e) {
        return c.allGather("tp", i, o, counts, ir::DType::F32, e);
      });
  std::vector<size_t> scattered;
  for (int64_t n : counts)
    scattered.push_back(n * bytes);
  sameOnBoth(
      "tp=3", wholeIn, scattered,
      [&](int64_t, Communicator &c, const void *i, void *o, std::string &e) {
        return c.reduceScatter("tp", i, o, counts, ir::DType::F32, e);
      });
  // Device d sends `counts` and receives from each j its counts[d]...
  // here every device sends counts[j] elements to device j, so device d
  // receives counts[d] from each.
  std::vector<size_t> received;
  for (int64_t d = 0; d < 3; ++d)
    received.push_back(3 * counts[d] * bytes);
  sameOnBoth(
      "tp=3", wholeIn, received,
      [&](int64_t d, Communicator &c, const void *i, void *o, std::string &e) {
        std::vector<int64_t> recv(3, counts[d]);
        return c.allToAll("tp", i, counts, o, recv, ir::DType::F32, e);
      });
}

// Device 0 sends `count` f32 to device 1 and receives as many back;
// device 1 receives first (under NCCL a send waits for its recv).
Call pingPong(int64_t count) {
  return [count](int64_t d, Communicator &c, const void *i, void *o,
                 std::string &e) -> LogicalResult {
    int64_t peer = 1 - d;
    if (d == 0)
      return succeeded(c.send(peer, i, count, ir::DType::F32, e)) &&
                     succeeded(c.recv(peer, o, count, ir::DType::F32, e))
                 ? success()
                 : failure();
    return succeeded(c.recv(peer, o, count, ir::DType::F32, e)) &&
                   succeeded(c.send(peer, i, count, ir::DType::F32, e))
               ? success()
               : failure();
  };
}

TEST_CASE("cuda: the one-GPU communicator's send and recv") {
  if (skipWithoutCuda())
    return;
  std::vector<Bytes> in = {values(ir::DType::F32, 0, 9, 5),
                           values(ir::DType::F32, 1, 9, 5)};
  sameOnBoth("dp=2", in, {9 * 4, 9 * 4}, pingPong(9));
}

// The GPUs this process sees (0 where CUDA cannot be used).
int gpuCount() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

// Every collective once on `meshText` (one axis, "tp"), through NCCL,
// against the CPU: the sums' bits are the CPU's (the plan of
// backend/PeerPlan.h), whatever NCCL's own algorithms would do.
void ncclMatchesCpu(const char *meshText) {
  ir::Mesh mesh = meshOf(meshText);
  int64_t n = mesh.numDevices();
  for (ir::DType dtype : kAllTypes)
    for (bool max : {false, true}) {
      INFO(meshText << " " << ir::dtypeName(dtype).str()
                    << (max ? " max" : ""));
      int64_t count = 1001;
      std::vector<Bytes> in;
      for (int64_t d = 0; d < n; ++d)
        in.push_back(values(dtype, d, count, 13, max));
      sameOnBoth(
          meshText, in, std::vector<size_t>(n, in[0].size()),
          [&](int64_t, Communicator &c, const void *i, void *o,
              std::string &e) {
            return max ? c.allReduceMax("tp", i, o, count, dtype, e)
                       : c.allReduce("tp", i, o, count, dtype, e);
          },
          2, ncclComms());
    }
  std::vector<int64_t> counts;
  int64_t all = 0;
  for (int64_t d = 0; d < n; ++d) {
    counts.push_back(d % 2 ? 0 : 2 * d + 3); // some parts empty
    all += counts.back();
  }
  std::vector<Bytes> part, whole;
  std::vector<size_t> scattered, received;
  for (int64_t d = 0; d < n; ++d) {
    part.push_back(values(ir::DType::F32, d, counts[d], 3));
    whole.push_back(values(ir::DType::F32, d, all, 4));
    scattered.push_back(counts[d] * 4);
    received.push_back(n * counts[d] * 4);
  }
  sameOnBoth(
      meshText, part, std::vector<size_t>(n, all * 4),
      [&](int64_t, Communicator &c, const void *i, void *o, std::string &e) {
        return c.allGather("tp", i, o, counts, ir::DType::F32, e);
      },
      1, ncclComms());
  sameOnBoth(
      meshText, whole, scattered,
      [&](int64_t, Communicator &c, const void *i, void *o, std::string &e) {
        return c.reduceScatter("tp", i, o, counts, ir::DType::F32, e);
      },
      1, ncclComms());
  sameOnBoth(
      meshText, whole, received,
      [&](int64_t d, Communicator &c, const void *i, void *o, std::string &e) {
        std::vector<int64_t> recv(n, counts[d]);
        return c.allToAll("tp", i, counts, o, recv, ir::DType::F32, e);
      },
      1, ncclComms());
}

TEST_CASE("cuda: each process's devices take its block of the node's "
          "GPUs") {
  // One GPU per process: GPU = local rank.
  CHECK(cuda::firstGpuOfRank(0, 1, 8) == 0);
  CHECK(cuda::firstGpuOfRank(5, 1, 8) == 5);
  // Two devices per process: ranks 0..3 take 0-1, 2-3, 4-5, 6-7.
  CHECK(cuda::firstGpuOfRank(3, 2, 8) == 6);
  // A process that sees only its own GPUs (CUDA_VISIBLE_DEVICES per rank).
  CHECK(cuda::firstGpuOfRank(3, 1, 1) == 0);
  CHECK(cuda::firstGpuOfRank(2, 2, 2) == 0);
  // Too few GPUs otherwise: the block past the end, which NcclMesh refuses
  // naming the GPUs.
  CHECK(cuda::firstGpuOfRank(3, 2, 4) == 6);
}

TEST_CASE("cuda: the NCCL communicator without a GPU is a clear error") {
  if (cuda::cudaAvailable())
    return; // the tests below run it
  std::string why;
  auto set = cuda::NcclMesh::create(meshOf("dp=2"), {}, why);
  CHECK(!set);
  INFO(why);
  // Either NCCL cannot be loaded or no GPU can be counted: said in words.
  CHECK((why.find("NCCL") != std::string::npos ||
         why.find("cudaGetDeviceCount") != std::string::npos));
}

TEST_CASE("cuda: the NCCL communicator with one rank") {
  if (skipWithoutCuda())
    return;
  ncclMatchesCpu("tp=1");
}

TEST_CASE("cuda: the NCCL communicator across the GPUs gives the CPU's "
          "bits") {
  if (skipWithoutCuda())
    return;
  int gpus = gpuCount();
  if (gpus < 2) {
    MESSAGE("skipped: NCCL across GPUs needs two or more, this process sees "
            << gpus);
    return;
  }
  for (const char *mesh : {"tp=2", "tp=3", "tp=4"})
    if (meshOf(mesh).numDevices() <= gpus)
      ncclMatchesCpu(mesh);
  std::vector<Bytes> in = {values(ir::DType::F32, 0, 9, 5),
                           values(ir::DType::F32, 1, 9, 5)};
  sameOnBoth("dp=2", in, {9 * 4, 9 * 4}, pingPong(9), 1, ncclComms());
}

// Three steps of the MLP on `mesh`, on the CPU and on the GPU: the losses
// agree to f32 rounding (the collectives are the same bits; the kernels are
// not).
std::vector<double> mlpLosses(const std::string &backend,
                              const SessionOptions &base) {
  SessionOptions options = base;
  options.backend = backend;
  options.defines = {{"B", "8"}, {"D", "6"}, {"H", "8"}, {"C", "3"}};
  auto s = Session::create(sample("mlp.mg"), options);
  INFO(backend << ": " << (s ? std::string() : s.status().message()));
  REQUIRE(s);
  std::vector<double> losses;
  for (int step = 0; step < 3; ++step) {
    std::vector<float> x;
    std::vector<int> y;
    for (int i = 0; i < 8 * 6; ++i)
      x.push_back(static_cast<float>(uniform01(step, 1, i) * 2 - 1));
    for (int i = 0; i < 8; ++i)
      y.push_back((i + step) % 3);
    REQUIRE((*s)->feed("x", Tensor::fromFloats({8, 6}, x)));
    REQUIRE((*s)->feed("y", Tensor::fromInts({8}, y)));
    auto r = (*s)->step();
    INFO((r ? std::string() : r.status().message()));
    REQUIRE(r);
    losses.push_back(r->loss);
  }
  return losses;
}

TEST_CASE("cuda: the MLP on meshes simulated on one GPU trains as on the "
          "CPU") {
  if (skipWithoutCuda())
    return;
  struct Case {
    const char *mesh;
    int zero, accumulate;
  };
  for (Case c :
       {Case{"dp=2", 0, 1}, Case{"tp=2", 0, 1}, Case{"dp=2,tp=2", 0, 1},
        Case{"dp=4", 1, 1}, Case{"dp=2", 2, 1}, Case{"dp=2", 0, 2}}) {
    INFO(c.mesh << " zero " << c.zero << " accumulate " << c.accumulate);
    SessionOptions options;
    options.mesh = c.mesh;
    options.zero = c.zero;
    options.accumulate = c.accumulate;
    std::vector<double> cpu = mlpLosses("cpu", options);
    std::vector<double> gpu = mlpLosses("cuda", options);
    for (size_t i = 0; i < cpu.size(); ++i)
      CHECK(std::fabs(gpu[i] - cpu[i]) <=
            1e-5 * std::max(1.0, std::fabs(cpu[i])));
    // A GPU per device, over NCCL, gives the bits of the simulated mesh.
    if (meshOf(c.mesh).numDevices() <= gpuCount() && gpuCount() >= 2) {
      options.gpuPerDevice = true;
      CHECK(mlpLosses("cuda", options) == gpu);
    }
  }
}

#endif

} // namespace
} // namespace mgc::backend::testing
