// The in-process communicator: N threads, one endpoint each, as the devices
// of a mesh. Results are checked in the main thread against sums and joins
// computed here in coordinate order.
#include "MeshTestSupport.h"

#include "backend/cpu/InProcessCommunicator.h"
#include "runtime/Tensor.h"
#include "support/Random.h"

#include <doctest/doctest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

namespace mgc::backend::testing {
namespace {

using cpu::InProcessMesh;

struct Outcome {
  bool ok = true;
  std::string error;
};

// Runs body(device, endpoint) on one thread per device; returns what each
// device's last failing call said.
std::vector<Outcome> onEveryDevice(
    InProcessMesh &mesh,
    const std::function<LogicalResult(int64_t, Communicator &, std::string &)>
        &body) {
  int64_t n = mesh.mesh().numDevices();
  std::vector<Outcome> out(n);
  onDeviceThreads(n, [&](int64_t d) {
    out[d].ok = body(d, mesh.endpoint(d), out[d].error).succeeded();
  });
  return out;
}

void requireAllOk(const std::vector<Outcome> &outcomes) {
  for (size_t d = 0; d < outcomes.size(); ++d) {
    INFO("device " << d << ": " << outcomes[d].error);
    REQUIRE(outcomes[d].ok);
  }
}

// Deterministic test data of device `d`, call `call`.
float valueF(int64_t d, int64_t call, int64_t i) {
  return static_cast<float>(uniform01(7 + call, d, i) * 4 - 2);
}

TEST_CASE("communicator: all-reduce on dp=4 is the coordinate-order sum, "
          "bit-identical on every device") {
  InProcessMesh mesh(meshOf("dp=4"));
  const int64_t count = 1001;
  std::vector<std::vector<float>> in(4), out(4, std::vector<float>(count));
  for (int64_t d = 0; d < 4; ++d)
    for (int64_t i = 0; i < count; ++i)
      in[d].push_back(valueF(d, 0, i));
  requireAllOk(
      onEveryDevice(mesh, [&](int64_t d, Communicator &c, std::string &err) {
        CHECK(c.device() == d);
        return c.allReduce("dp", in[d].data(), out[d].data(), count,
                           ir::DType::F32, err);
      }));
  for (int64_t i = 0; i < count; ++i) {
    float want = in[0][i];
    for (int64_t d = 1; d < 4; ++d)
      want += in[d][i];
    for (int64_t d = 0; d < 4; ++d)
      REQUIRE(std::memcmp(&out[d][i], &want, sizeof(float)) == 0);
  }
  // In place: each device's result overwrites its operand.
  std::vector<std::vector<double>> io(4);
  for (int64_t d = 0; d < 4; ++d)
    for (int64_t i = 0; i < count; ++i)
      io[d].push_back(d * 1000.0 + i);
  requireAllOk(
      onEveryDevice(mesh, [&](int64_t d, Communicator &c, std::string &err) {
        return c.allReduce("dp", io[d].data(), io[d].data(), count,
                           ir::DType::F64, err);
      }));
  for (int64_t d = 0; d < 4; ++d)
    for (int64_t i = 0; i < count; ++i)
      REQUIRE(io[d][i] == 6000.0 + 4.0 * i);
}

TEST_CASE("communicator: groups of dp=2,tp=3 reduce along their own axis") {
  InProcessMesh mesh(meshOf("dp=2,tp=3"));
  ir::Mesh m = mesh.mesh();
  std::vector<std::vector<int64_t>> dp(6), tp(6);
  requireAllOk(onEveryDevice(mesh, [&](int64_t d, Communicator &c,
                                       std::string &err) {
    int64_t mine[2] = {d, 100 + d};
    dp[d].resize(2);
    tp[d].resize(2);
    if (c.allReduce("dp", mine, dp[d].data(), 2, ir::DType::I64, err).failed())
      return failure();
    return c.allReduce("tp", mine, tp[d].data(), 2, ir::DType::I64, err);
  }));
  for (int64_t d = 0; d < 6; ++d) {
    int64_t dpSum = 0, tpSum = 0;
    for (int64_t p : m.group(d, "dp"))
      dpSum += p;
    for (int64_t p : m.group(d, "tp"))
      tpSum += p;
    CHECK(m.group(d, "dp").size() == 2);
    CHECK(m.group(d, "tp").size() == 3);
    CHECK(dp[d] == std::vector<int64_t>{dpSum, 200 + dpSum});
    CHECK(tp[d] == std::vector<int64_t>{tpSum, 300 + tpSum});
  }
}

TEST_CASE("communicator: all-gather with uneven counts joins in coordinate "
          "order") {
  InProcessMesh mesh(meshOf("dp=4"));
  std::vector<int64_t> counts = {3, 0, 5, 2};
  std::vector<std::vector<int32_t>> in(4), out(4, std::vector<int32_t>(10, -1));
  for (int64_t d = 0; d < 4; ++d)
    for (int64_t i = 0; i < counts[d]; ++i)
      in[d].push_back(static_cast<int32_t>(d * 100 + i));
  requireAllOk(
      onEveryDevice(mesh, [&](int64_t d, Communicator &c, std::string &err) {
        return c.allGather("dp", in[d].data(), out[d].data(), counts,
                           ir::DType::I32, err);
      }));
  std::vector<int32_t> want;
  for (int64_t d = 0; d < 4; ++d)
    want.insert(want.end(), in[d].begin(), in[d].end());
  for (int64_t d = 0; d < 4; ++d)
    CHECK(out[d] == want);
}

TEST_CASE("communicator: reduce-scatter gives each device its part of the "
          "sum") {
  InProcessMesh mesh(meshOf("dp=2,tp=3"));
  ir::Mesh m = mesh.mesh();
  std::vector<int64_t> counts = {4, 1, 2};
  std::vector<std::vector<double>> in(6), out(6);
  for (int64_t d = 0; d < 6; ++d) {
    for (int64_t i = 0; i < 7; ++i)
      in[d].push_back(static_cast<double>(valueF(d, 1, i)));
    out[d].assign(counts[m.coords(d)[1]], 0.0);
  }
  requireAllOk(
      onEveryDevice(mesh, [&](int64_t d, Communicator &c, std::string &err) {
        return c.reduceScatter("tp", in[d].data(), out[d].data(), counts,
                               ir::DType::F64, err);
      }));
  for (int64_t d = 0; d < 6; ++d) {
    int64_t coord = m.coords(d)[1];
    int64_t at = 0;
    for (int64_t j = 0; j < coord; ++j)
      at += counts[j];
    std::vector<int64_t> group = m.group(d, "tp");
    for (int64_t i = 0; i < counts[coord]; ++i) {
      double want = in[group[0]][at + i];
      for (size_t j = 1; j < group.size(); ++j)
        want += in[group[j]][at + i];
      CHECK(out[d][i] == want);
    }
  }
}

TEST_CASE("communicator: all-to-all delivers each device's parts") {
  InProcessMesh mesh(meshOf("dp=4"));
  // Device j sends (j + 2 * k) % 3 elements to device k.
  auto amount = [](int64_t j, int64_t k) { return (j + 2 * k) % 3; };
  std::vector<std::vector<int64_t>> send(4), recv(4);
  std::vector<std::vector<float>> in(4), out(4);
  for (int64_t j = 0; j < 4; ++j)
    for (int64_t k = 0; k < 4; ++k) {
      send[j].push_back(amount(j, k));
      recv[j].push_back(amount(k, j));
      for (int64_t i = 0; i < amount(j, k); ++i)
        in[j].push_back(static_cast<float>(j * 100 + k * 10 + i));
    }
  for (int64_t k = 0; k < 4; ++k) {
    int64_t n = 0;
    for (int64_t j = 0; j < 4; ++j)
      n += recv[k][j];
    out[k].assign(n, -1.0f);
  }
  requireAllOk(
      onEveryDevice(mesh, [&](int64_t d, Communicator &c, std::string &err) {
        return c.allToAll("dp", in[d].data(), send[d], out[d].data(), recv[d],
                          ir::DType::F32, err);
      }));
  for (int64_t k = 0; k < 4; ++k) {
    std::vector<float> want;
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t i = 0; i < amount(j, k); ++i)
        want.push_back(static_cast<float>(j * 100 + k * 10 + i));
    CHECK(out[k] == want);
  }
}

TEST_CASE("communicator: many consecutive collectives on mixed axes do not "
          "mix") {
  InProcessMesh mesh(meshOf("dp=2,tp=3"));
  ir::Mesh m = mesh.mesh();
  const int64_t rounds = 300, count = 5;
  // results[d][r]: device d's result of round r.
  std::vector<std::vector<std::vector<double>>> results(
      6, std::vector<std::vector<double>>(rounds));
  auto input = [](int64_t d, int64_t r, int64_t i) {
    return static_cast<double>(d * 1000000 + r * 100 + i);
  };
  auto axisOf = [](int64_t r) { return r % 3 == 1 ? "dp" : "tp"; };
  requireAllOk(
      onEveryDevice(mesh, [&](int64_t d, Communicator &c, std::string &err) {
        for (int64_t r = 0; r < rounds; ++r) {
          std::vector<double> in(count);
          for (int64_t i = 0; i < count; ++i)
            in[i] = input(d, r, i);
          const char *axis = axisOf(r);
          int64_t size = static_cast<int64_t>(m.group(d, axis).size());
          std::vector<double> &out = results[d][r];
          LogicalResult ok = success();
          if (r % 2 == 0) {
            out.resize(count);
            ok = c.allReduce(axis, in.data(), out.data(), count, ir::DType::F64,
                             err);
          } else {
            out.resize(count * size);
            std::vector<int64_t> counts(size, count);
            ok = c.allGather(axis, in.data(), out.data(), counts,
                             ir::DType::F64, err);
          }
          if (ok.failed())
            return failure();
        }
        return success();
      }));
  for (int64_t d = 0; d < 6; ++d)
    for (int64_t r = 0; r < rounds; ++r) {
      std::vector<int64_t> group = m.group(d, axisOf(r));
      std::vector<double> want;
      if (r % 2 == 0) {
        want.assign(count, 0.0);
        for (int64_t p : group)
          for (int64_t i = 0; i < count; ++i)
            want[i] += input(p, r, i);
      } else {
        for (int64_t p : group)
          for (int64_t i = 0; i < count; ++i)
            want.push_back(input(p, r, i));
      }
      INFO("device " << d << " round " << r);
      REQUIRE(results[d][r] == want);
    }
}

TEST_CASE("communicator: abort releases the waiting devices with the "
          "reason") {
  InProcessMesh mesh(meshOf("dp=4"));
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    mesh.abort("device 3 failed: id 9 out of range");
  });
  std::vector<Outcome> outcomes =
      onEveryDevice(mesh, [&](int64_t d, Communicator &c, std::string &err) {
        if (d == 3) { // never arrives
          err = "failed itself";
          return failure();
        }
        float x = 1, y = 0;
        return c.allReduce("dp", &x, &y, 1, ir::DType::F32, err);
      });
  aborter.join();
  for (int64_t d = 0; d < 3; ++d) {
    CHECK_FALSE(outcomes[d].ok);
    CHECK(outcomes[d].error.find("device 3 failed: id 9 out of range") !=
          std::string::npos);
  }
  // Later calls fail at once, until reset.
  std::vector<Outcome> later =
      onEveryDevice(mesh, [&](int64_t, Communicator &c, std::string &err) {
        float x = 1, y = 0;
        return c.allReduce("dp", &x, &y, 1, ir::DType::F32, err);
      });
  for (const Outcome &o : later) {
    CHECK_FALSE(o.ok);
    CHECK(o.error.find("aborted") != std::string::npos);
  }
  mesh.reset();
  std::vector<float> sums(4);
  requireAllOk(
      onEveryDevice(mesh, [&](int64_t d, Communicator &c, std::string &err) {
        float x = static_cast<float>(d);
        return c.allReduce("dp", &x, &sums[d], 1, ir::DType::F32, err);
      }));
  CHECK(sums == std::vector<float>(4, 6.0f));
}

TEST_CASE("communicator: devices that disagree on a call fail cleanly") {
  InProcessMesh mesh(meshOf("dp=2"));
  std::vector<float> buf(16, 1.0f), out0(16, 0.0f), out1(16, 0.0f);
  SUBCASE("different counts") {
    std::vector<Outcome> o =
        onEveryDevice(mesh, [&](int64_t d, Communicator &c, std::string &err) {
          return c.allReduce("dp", buf.data(), (d ? out1 : out0).data(),
                             d ? 5 : 4, ir::DType::F32, err);
        });
    for (const Outcome &x : o) {
      CHECK_FALSE(x.ok);
      CHECK(x.error.find("device 0 calls allReduce of f32, 4 elements") !=
            std::string::npos);
      CHECK(x.error.find("device 1 calls allReduce of f32, 5 elements") !=
            std::string::npos);
    }
  }
  SUBCASE("different kinds and dtypes") {
    std::vector<int64_t> counts = {2, 2};
    std::vector<Outcome> o = onEveryDevice(mesh, [&](int64_t d, Communicator &c,
                                                     std::string &err) {
      if (d == 0)
        return c.allGather("dp", buf.data(), out0.data(), counts,
                           ir::DType::F32, err);
      return c.allReduce("dp", buf.data(), out1.data(), 2, ir::DType::F64, err);
    });
    for (const Outcome &x : o) {
      CHECK_FALSE(x.ok);
      CHECK(x.error.find("allGather of f32, counts [2, 2]") !=
            std::string::npos);
      CHECK(x.error.find("device 1 calls allReduce of f64") !=
            std::string::npos);
    }
  }
  SUBCASE("all-to-all counts that do not pair up") {
    std::vector<int64_t> send0 = {1, 3}, recv0 = {1, 2};
    std::vector<int64_t> send1 = {2, 1}, recv1 = {2, 1}; // 0 sends 3, 1 wants 2
    std::vector<Outcome> o =
        onEveryDevice(mesh, [&](int64_t d, Communicator &c, std::string &err) {
          return c.allToAll("dp", buf.data(), d ? send1 : send0,
                            (d ? out1 : out0).data(), d ? recv1 : recv0,
                            ir::DType::F32, err);
        });
    for (const Outcome &x : o) {
      CHECK_FALSE(x.ok);
      CHECK(x.error.find("sends 3 elements to device 1, which expects 2") !=
            std::string::npos);
    }
  }
  SUBCASE("a count list of the wrong length") {
    std::vector<int64_t> three = {1, 1, 1};
    std::vector<Outcome> o =
        onEveryDevice(mesh, [&](int64_t d, Communicator &c, std::string &err) {
          return c.reduceScatter("dp", buf.data(), (d ? out1 : out0).data(),
                                 three, ir::DType::F32, err);
        });
    for (const Outcome &x : o) {
      CHECK_FALSE(x.ok);
      CHECK(x.error.find("expected one count per device") != std::string::npos);
    }
  }
  // Nothing was written, and the group still works.
  CHECK(out0 == std::vector<float>(16, 0.0f));
  CHECK(out1 == std::vector<float>(16, 0.0f));
  requireAllOk(
      onEveryDevice(mesh, [&](int64_t d, Communicator &c, std::string &err) {
        return c.allReduce("dp", buf.data(), (d ? out1 : out0).data(), 16,
                           ir::DType::F32, err);
      }));
  CHECK(out0 == std::vector<float>(16, 2.0f));
  CHECK(out1 == std::vector<float>(16, 2.0f));
}

TEST_CASE("communicator: an axis the mesh lacks is an error") {
  InProcessMesh mesh(meshOf("dp=2"));
  float x = 1, y = 0;
  std::string err;
  CHECK(mesh.endpoint(0)
            .allReduce("tp", &x, &y, 1, ir::DType::F32, err)
            .failed());
  CHECK(err.find("has no such axis") != std::string::npos);
  CHECK(mesh.endpoint(1).coord("dp") == 1);
  CHECK(mesh.endpoint(1).coord("tp") == 0);
}

TEST_CASE("communicator: bf16 sums in f32 and rounds once") {
  InProcessMesh mesh(meshOf("dp=4"));
  // 1 + 3 * 2^-8: adding in bf16 step by step would stay at 1 (each 2^-8
  // is half an ulp and rounds to even); in f32 the sum is a tie between
  // 1 + 2^-7 and 1 + 2^-6, which rounds to the even 1 + 2^-6.
  float values[4] = {1.0f, 0x1p-8f, 0x1p-8f, 0x1p-8f};
  std::vector<uint16_t> out(4);
  requireAllOk(
      onEveryDevice(mesh, [&](int64_t d, Communicator &c, std::string &err) {
        uint16_t in = runtime::floatToBF16(values[d]);
        return c.allReduce("dp", &in, &out[d], 1, ir::DType::BF16, err);
      }));
  for (uint16_t bits : out)
    CHECK(runtime::bf16ToFloat(bits) == 1.015625f);
  // f16 likewise: 2048 + 1 + 1 is 2050 in f32; step by step in f16 (ulp 2
  // at 2048) each +1 would round back to 2048.
  float halves[4] = {2048.0f, 1.0f, 1.0f, 0.0f};
  requireAllOk(
      onEveryDevice(mesh, [&](int64_t d, Communicator &c, std::string &err) {
        uint16_t in = runtime::floatToF16(halves[d]);
        return c.allReduce("dp", &in, &out[d], 1, ir::DType::F16, err);
      }));
  for (uint16_t bits : out)
    CHECK(runtime::f16ToFloat(bits) == 2050.0f);
}

} // namespace
} // namespace mgc::backend::testing
