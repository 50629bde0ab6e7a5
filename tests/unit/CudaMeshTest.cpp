// Meshes on one GPU. The one-GPU communicator against the in-process one,
// byte for byte, for every kind of call, dtype and several meshes; and
// training on a mesh simulated on the GPU against the same mesh on the
// CPU. Every test skips cleanly where no CUDA device can be used.
#include "CudaTestSupport.h"
#include "MeshTestSupport.h"

#include "backend/cpu/InProcessCommunicator.h"
#include "mgc/Session.h"
#include "support/Random.h"

#if MGC_HAVE_CUDA
#include "backend/cuda/CudaLocalMesh.h"

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
  return std::string(MGC_SOURCE_DIR) + "/samples/" + file;
}

using Bytes = std::vector<std::byte>;

// One call of a device: from its endpoint, input and output buffers (host
// or device memory alike).
using Call =
    std::function<LogicalResult(int64_t device, Communicator &, const void *in,
                                void *out, std::string &error)>;

// Runs `call` on every device of `meshText`, on the CPU communicator and on
// the one-GPU one, `rounds` times in a row (each round's result is the next
// one's input when `chain`), and checks that the results are the same
// bytes. inBytes/outBytes: per device.
void sameOnBoth(const char *meshText, const std::vector<Bytes> &inputs,
                const std::vector<size_t> &outBytes, const Call &call,
                int rounds = 1) {
  ir::Mesh mesh = meshOf(meshText);
  int64_t n = mesh.numDevices();
  // CPU.
  cpu::InProcessMesh host(mesh);
  std::vector<Bytes> want(n);
  std::vector<Bytes> hostIn = inputs;
  for (int r = 0; r < rounds; ++r) {
    std::vector<std::string> errors(n);
    std::vector<bool> ok(n);
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
  // One GPU.
  std::string why;
  auto gpu = cuda::CudaLocalMesh::create(mesh, why);
  INFO(why);
  REQUIRE(gpu);
  std::vector<void *> in(n), out(n);
  std::vector<cudaStream_t> streams(n);
  for (int64_t d = 0; d < n; ++d) {
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
    std::vector<bool> ok(n);
    onDeviceThreads(n, [&](int64_t d) {
      ok[d] = call(d, gpu->endpoint(d), in[d], out[d], errors[d]).succeeded();
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

TEST_CASE("cuda: the one-GPU communicator's send and recv") {
  if (skipWithoutCuda())
    return;
  std::vector<Bytes> in = {values(ir::DType::F32, 0, 9, 5),
                           values(ir::DType::F32, 1, 9, 5)};
  sameOnBoth(
      "dp=2", in, {9 * 4, 9 * 4},
      [&](int64_t d, Communicator &c, const void *i, void *o, std::string &e) {
        if (d == 0)
          return c.send(1, i, 9, ir::DType::F32, e).succeeded() &&
                         c.recv(1, o, 9, ir::DType::F32, e).succeeded()
                     ? success()
                     : failure();
        return c.recv(0, o, 9, ir::DType::F32, e).succeeded() &&
                       c.send(0, i, 9, ir::DType::F32, e).succeeded()
                   ? success()
                   : failure();
      });
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
  }
}

#endif

} // namespace
} // namespace mgc::backend::testing
