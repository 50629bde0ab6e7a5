// The MPI communicator against the in-process one. In this process MPI's
// world is one rank, so every device of a mesh is an endpoint of rank 0 and
// every message goes to itself; the code that builds each collective from
// point-to-point messages and adds the parts is the same as across
// processes (tests/lit/processes run it across them). Every collective
// must give, bit for bit, what the in-process communicator gives.
#include "MeshTestSupport.h"

#include "backend/cpu/InProcessCommunicator.h"
#include "ir/Interpreter.h"
#include "support/Random.h"

#include <doctest/doctest.h>

#if MGC_HAVE_MPI
#include "backend/mpi/MpiCommunicator.h"
#include "backend/mpi/MpiWorld.h"

#include <chrono>
#include <cstring>
#include <thread>

namespace mgc::backend::testing {
namespace {

// The MPI endpoints of every device of `mesh` (null when MPI's world here
// is not one process, as under mpirun: the test then says so and passes).
std::unique_ptr<CommunicatorSet> mpiMesh(const ir::Mesh &mesh,
                                         double timeoutSeconds = 60) {
  std::string error;
  ProcessGroup *world = mpi::world(error);
  if (!world) {
    // As the CUDA tests do without a device: say why, and pass.
    MESSAGE("skipped: MPI cannot be initialised here: " << error);
    return nullptr;
  }
  if (world->size() != 1) {
    MESSAGE("skipped: MPI's world here has " << world->size() << " ranks");
    return nullptr;
  }
  mpi::MpiSettings s;
  s.timeoutSeconds = timeoutSeconds;
  auto set = mpi::makeCommunicators(mesh, s, error);
  INFO(error);
  REQUIRE(set);
  return set;
}

// One thread per device runs body(device, endpoint); each device's error.
std::vector<std::string> onEveryDevice(
    CommunicatorSet &set,
    const std::function<LogicalResult(int64_t, Communicator &, std::string &)>
        &body) {
  int64_t n = set.mesh().numDevices();
  std::vector<std::string> errors(n);
  std::vector<int> ok(n, 0);
  onDeviceThreads(n, [&](int64_t d) {
    ok[d] = body(d, set.endpoint(d), errors[d]).succeeded();
  });
  for (int64_t d = 0; d < n; ++d)
    if (!ok[d] && errors[d].empty())
      errors[d] = "failed without a message";
  return errors;
}

void requireAllOk(const std::vector<std::string> &errors) {
  for (size_t d = 0; d < errors.size(); ++d) {
    INFO("device " << d << ": " << errors[d]);
    REQUIRE(errors[d].empty());
  }
}

// Deterministic bytes of `count` elements of `dtype` for device `d`: floats
// in [-2, 2) rounded to the type, integers in [-1000, 1000).
std::vector<std::byte> dataOf(ir::DType dtype, int64_t count, int64_t d,
                              int64_t call) {
  ir::TensorType type{dtype, {count}};
  ir::HostTensor h(type);
  for (int64_t i = 0; i < count; ++i) {
    double u = uniform01(31 + call, d, i) * 4 - 2;
    h.data[i] =
        ir::isInteger(dtype) ? std::floor(u * 500) : ir::roundToDType(u, dtype);
  }
  runtime::Tensor t = runtime::Tensor::fromHost(h);
  return std::vector<std::byte>(t.data(), t.data() + t.nbytes());
}

// Every collective once on `axis`, each device's results appended to
// `out[d]`: all-reduce (out of place and in place), all-reduce-max,
// all-gather, reduce-scatter and all-to-all with unequal counts.
void runEveryCollective(CommunicatorSet &set, llvm::StringRef axis,
                        ir::DType dtype,
                        std::vector<std::vector<std::byte>> &out) {
  size_t bytes = ir::dtypeBytes(dtype);
  const ir::Mesh &mesh = set.mesh();
  int64_t n = mesh.numDevices();
  out.assign(n, {});
  requireAllOk(onEveryDevice(
      set, [&](int64_t d, Communicator &c, std::string &err) -> LogicalResult {
        int64_t k = static_cast<int64_t>(mesh.group(d, axis).size());
        int64_t me = c.coord(axis);
        auto append = [&](const std::vector<std::byte> &v) {
          out[d].insert(out[d].end(), v.begin(), v.end());
        };
        // 1001 elements do not split evenly over any group of 2 to 6.
        const int64_t count = 1001;
        std::vector<std::byte> in = dataOf(dtype, count, d, 1),
                               sum(count * bytes);
        if (failed(c.allReduce(axis, in.data(), sum.data(), count, dtype, err)))
          return failure();
        append(sum);
        std::vector<std::byte> inPlace = dataOf(dtype, count, d, 2);
        if (failed(c.allReduce(axis, inPlace.data(), inPlace.data(), count,
                               dtype, err)))
          return failure();
        append(inPlace);
        std::vector<std::byte> max(count * bytes);
        if (failed(
                c.allReduceMax(axis, in.data(), max.data(), count, dtype, err)))
          return failure();
        append(max);
        std::vector<int64_t> counts;
        for (int64_t j = 0; j < k; ++j)
          counts.push_back(3 * j + 1);
        int64_t total = 0;
        for (int64_t x : counts)
          total += x;
        std::vector<std::byte> part = dataOf(dtype, counts[me], d, 3),
                               gathered(total * bytes);
        if (failed(c.allGather(axis, part.data(), gathered.data(), counts,
                               dtype, err)))
          return failure();
        append(gathered);
        std::vector<std::byte> whole = dataOf(dtype, total, d, 4),
                               scattered(counts[me] * bytes);
        if (failed(c.reduceScatter(axis, whole.data(), scattered.data(), counts,
                                   dtype, err)))
          return failure();
        append(scattered);
        // Device coordinate i sends i + j + 1 elements to coordinate j.
        std::vector<int64_t> send, recv;
        int64_t sendTotal = 0, recvTotal = 0;
        for (int64_t j = 0; j < k; ++j) {
          send.push_back(me + j + 1);
          recv.push_back(j + me + 1);
          sendTotal += send.back();
          recvTotal += recv.back();
        }
        std::vector<std::byte> a = dataOf(dtype, sendTotal, d, 5),
                               b(recvTotal * bytes);
        if (failed(
                c.allToAll(axis, a.data(), send, b.data(), recv, dtype, err)))
          return failure();
        append(b);
        return success();
      }));
}

TEST_CASE("MPI communicator: every collective is bit-identical to the "
          "in-process communicator, for every dtype and axis") {
  for (const char *text : {"dp=4", "dp=2,tp=3", "dp=3,tp=2"}) {
    ir::Mesh mesh = meshOf(text);
    auto mpiSet = mpiMesh(mesh);
    if (!mpiSet)
      return;
    cpu::InProcessMesh local(mesh);
    for (const ir::MeshAxis &axis : mesh.axes())
      for (ir::DType dtype : {ir::DType::F32, ir::DType::F64, ir::DType::BF16,
                              ir::DType::F16, ir::DType::I32, ir::DType::I64}) {
        INFO(text << " on " << axis.name << " in "
                  << ir::dtypeName(dtype).str());
        std::vector<std::vector<std::byte>> viaMpi, inProcess;
        runEveryCollective(*mpiSet, axis.name, dtype, viaMpi);
        runEveryCollective(local, axis.name, dtype, inProcess);
        for (size_t d = 0; d < viaMpi.size(); ++d) {
          INFO("device " << d);
          REQUIRE(viaMpi[d].size() == inProcess[d].size());
          CHECK(std::memcmp(viaMpi[d].data(), inProcess[d].data(),
                            viaMpi[d].size()) == 0);
        }
      }
    // The in-process communicator counts the bytes the MPI one sends.
    for (int64_t d = 0; d < mesh.numDevices(); ++d) {
      INFO(text << ", device " << d);
      CHECK(mpiSet->endpoint(d).bytesSent() > 0);
      CHECK(mpiSet->endpoint(d).bytesSent() == local.endpoint(d).bytesSent());
    }
  }
}

// Both communicators, for the tests that hold for each.
std::vector<std::unique_ptr<CommunicatorSet>> bothOf(const ir::Mesh &mesh,
                                                     double timeout = 60) {
  std::vector<std::unique_ptr<CommunicatorSet>> sets;
  sets.push_back(std::make_unique<cpu::InProcessMesh>(mesh));
  if (auto m = mpiMesh(mesh, timeout))
    sets.push_back(std::move(m));
  return sets;
}

TEST_CASE("communicators: send and recv meet in order between each pair") {
  for (auto &set : bothOf(meshOf("dp=3"))) {
    std::vector<std::vector<float>> got(3);
    requireAllOk(onEveryDevice(
        *set,
        [&](int64_t d, Communicator &c, std::string &err) -> LogicalResult {
          // 0 sends 1, 2 and 3 elements to 1; 1 forwards their sum to 2.
          if (d == 0) {
            for (int64_t k = 1; k <= 3; ++k) {
              std::vector<float> m(k, static_cast<float>(k));
              if (failed(c.send(1, m.data(), k, ir::DType::F32, err)))
                return failure();
            }
            return success();
          }
          if (d == 1) {
            float total = 0;
            for (int64_t k = 1; k <= 3; ++k) {
              std::vector<float> m(k);
              if (failed(c.recv(0, m.data(), k, ir::DType::F32, err)))
                return failure();
              for (float x : m)
                total += x;
              got[1].insert(got[1].end(), m.begin(), m.end());
            }
            return c.send(2, &total, 1, ir::DType::F32, err);
          }
          got[2].resize(1);
          return c.recv(1, got[2].data(), 1, ir::DType::F32, err);
        }));
    CHECK(got[1] == std::vector<float>{1, 2, 2, 3, 3, 3});
    CHECK(got[2] == std::vector<float>{14});
  }
}

TEST_CASE("communicators: a recv that does not fit its send, and bad peers, "
          "fail naming the device") {
  for (auto &set : bothOf(meshOf("dp=2"))) {
    std::vector<std::string> errors =
        onEveryDevice(*set, [&](int64_t d, Communicator &c, std::string &err) {
          std::vector<float> m(5, 1.0f);
          return d == 0 ? c.send(1, m.data(), 4, ir::DType::F32, err)
                        : c.recv(0, m.data(), 5, ir::DType::F32, err);
        });
    CHECK(errors[0].empty());
    INFO(errors[1]);
    CHECK(errors[1].find("recv from device 0") != std::string::npos);
    CHECK(errors[1].find("device 0") != std::string::npos);
    CHECK(errors[1].find(" sent ") != std::string::npos);
    float x = 0;
    std::string err;
    CHECK(set->endpoint(0).send(0, &x, 1, ir::DType::F32, err).failed());
    CHECK(err.find("a device cannot send to itself") != std::string::npos);
    CHECK(set->endpoint(0).recv(5, &x, 1, ir::DType::F32, err).failed());
    CHECK(err.find("device 5 is not in the mesh dp=2") != std::string::npos);
  }
}

TEST_CASE("communicators: abort unblocks a waiting recv and collective") {
  for (auto &set : bothOf(meshOf("dp=2"))) {
    std::string recvError, reduceError;
    std::thread waiter([&] {
      float x = 0;
      (void)set->endpoint(0).recv(1, &x, 1, ir::DType::F32, recvError);
      (void)set->endpoint(0).allReduce("dp", &x, &x, 1, ir::DType::F32,
                                       reduceError);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    set->abort("device 1 failed");
    waiter.join();
    CHECK(recvError.find("was aborted: device 1 failed") != std::string::npos);
    CHECK(reduceError.find("was aborted: device 1 failed") !=
          std::string::npos);
  }
}

TEST_CASE("MPI communicator: a peer that never sends times out, named") {
  auto set = mpiMesh(meshOf("dp=4"), /*timeoutSeconds=*/0.3);
  if (!set)
    return;
  float x = 1;
  std::string err;
  auto start = std::chrono::steady_clock::now();
  CHECK(set->endpoint(0)
            .allReduce("dp", &x, &x, 1, ir::DType::F32, err)
            .failed());
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  INFO(err);
  CHECK(err.find("allReduce on axis 'dp' (4 B) timed out after 0.3 s") !=
        std::string::npos);
  CHECK(err.find("nothing arrived from device 1 (rank 0), device 2 (rank 0), "
                 "device 3 (rank 0)") != std::string::npos);
  CHECK(seconds < 5);
}

TEST_CASE("MPI communicator: a message its peer never takes times out, "
          "naming the peer") {
  auto set = mpiMesh(meshOf("dp=2"), /*timeoutSeconds=*/0.3);
  if (!set)
    return;
  // Large enough that MPI waits for the receive (no eager copy).
  std::vector<float> x(size_t(4) << 20, 1.0f);
  std::string err;
  CHECK(set->endpoint(0)
            .send(1, x.data(), static_cast<int64_t>(x.size()), ir::DType::F32,
                  err)
            .failed());
  INFO(err);
  CHECK(err.find("timed out after 0.3 s (--comm-timeout): its messages to "
                 "device 1 (rank 0) were never taken") != std::string::npos);
}

TEST_CASE("MPI communicator: a rank that did not run itself says so when it "
          "times out") {
  mpi::WaitOutcome w;
  w.ok = false;
  w.timedOut = true;
  CHECK(mpi::stalledNote(w, 10) == "");
  w.longestGapSeconds = 0.5; // polls a little late: no note
  CHECK(mpi::stalledNote(w, 10) == "");
  w.longestGapSeconds = 6;
  CHECK(mpi::stalledNote(w, 10) ==
        "; but this rank itself did not run for 6 s of the wait (stopped, or "
        "starved of CPU), so the ranks named may have given up on it first");
  w.longestGapSeconds = 0;
  w.continuedSecondsAgo = 2.5;
  CHECK(mpi::stalledNote(w, 10) ==
        "; but this rank was stopped and continued 2.5 s ago, so the ranks "
        "named may have given up on it while it was stopped");
}

} // namespace
} // namespace mgc::backend::testing

#else
TEST_CASE("MPI communicator: not built" * doctest::skip()) {}
#endif
