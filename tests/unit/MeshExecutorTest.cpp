// The mesh executor on hand-written device programs: results against the
// interpreter on the logical computation (dp, dp x tp, uneven parts),
// compute that overlaps a pending collective, an error on one device that
// stops every device and leaves the next run working, argument and program
// checks naming the device, the trace and its Chrome JSON, determinism.
#include "CpuTestSupport.h"

#include "backend/cpu/MeshExecutor.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstdio>
#include <set>
#include <unistd.h>

namespace mgc::backend::testing {
namespace {

using cpu::MeshExecutor;
using cpu::MeshOptions;
using cpu::NamedTensors;
using cpu::RunResult;

std::unique_ptr<ir::Module> parse(const std::string &text) {
  std::string out;
  llvm::raw_string_ostream os(out);
  DiagnosticEngine diag(os);
  auto m = ir::parseModuleText("mesh.mgir", text, diag);
  INFO(os.str());
  REQUIRE(m);
  return m;
}

std::unique_ptr<Executable> build(const std::string &text) {
  return buildExecutable(parse(text), cpu::scratchBytes);
}

ir::Mesh mesh(const char *text) {
  std::string error;
  auto m = ir::Mesh::parse(text, error);
  INFO(error);
  REQUIRE(m);
  return *m;
}

// A host tensor of `type` with values from `seed` in [-1, 1).
ir::HostTensor randomHost(const ir::TensorType &type, uint64_t seed) {
  ir::HostTensor t(type);
  for (size_t i = 0; i < t.data.size(); ++i)
    t.data[i] = ir::roundToDType(-1 + 2 * uniform01(seed, 7, i), type.dtype);
  return t;
}

ir::TensorType f32(std::vector<int64_t> shape) {
  return ir::TensorType{ir::DType::F32, std::move(shape)};
}

// Rows [r0, r0 + rows) and columns [c0, c0 + cols) of a 2-D tensor.
ir::HostTensor block(const ir::HostTensor &t, int64_t r0, int64_t rows,
                     int64_t c0, int64_t cols) {
  ir::HostTensor b(ir::TensorType{t.type.dtype, {rows, cols}});
  int64_t width = t.type.shape[1];
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      b.data[r * cols + c] = t.data[(r0 + r) * width + c0 + c];
  return b;
}
ir::HostTensor rows(const ir::HostTensor &t, int64_t r0, int64_t n) {
  return block(t, r0, n, 0, t.type.shape[1]);
}

ir::TensorMap interpret(const std::string &text, const ir::TensorMap &args) {
  auto m = parse(text);
  DiagnosticEngine diag;
  auto r = ir::interpret(*m, args, diag);
  REQUIRE(r.succeeded());
  return *r;
}

struct Runner {
  std::string out;
  llvm::raw_string_ostream os{out};
  DiagnosticEngine diag{os};
  std::unique_ptr<MeshExecutor> ex;

  Runner(const ir::Mesh &m, std::vector<const Executable *> programs,
         MeshOptions options = {}) {
    ex = MeshExecutor::create(m, std::move(programs), options, diag);
    INFO(os.str());
    REQUIRE(ex);
  }
  std::vector<RunResult> run(const std::vector<NamedTensors> &args) {
    auto r = ex->run(args, diag);
    INFO(os.str());
    REQUIRE(r.succeeded());
    REQUIRE(r->size() == args.size());
    return std::move(*r);
  }
  std::string errors() { return os.str(); }
};

// f32 sums of a few products in another order: 1e-5 of max(|value|, 1).
constexpr double kTol = 1e-5;

// ----- programs without communication --------------------------------------

TEST_CASE("Mesh executor: devices run a shared program on their own "
          "arguments") {
  auto exe = build(R"(module @dev {
  input %x : f32[2, 3]
  param %w : f32[3, 4] = zeros
  %h = matmul(%x, %w) : f32[2, 4]
  %t = tanh(%h) : f32[2, 4]
  output t = %t
  update %w = %w
})");
  ir::HostTensor w = randomHost(f32({3, 4}), 1);
  std::vector<ir::TensorMap> host(4);
  std::vector<NamedTensors> args;
  for (int d = 0; d < 4; ++d) {
    host[d] = {{"x", randomHost(f32({2, 3}), 10 + d)}, {"w", w}};
    args.push_back(toTensors(host[d]));
  }
  Runner r(mesh("dp=4"), {exe.get(), exe.get(), exe.get(), exe.get()});
  for (int step = 0; step < 2; ++step) {
    std::vector<RunResult> got = r.run(args);
    for (int d = 0; d < 4; ++d) {
      INFO("device " << d);
      ir::TensorMap want = interpret(R"(module @dev {
  input %x : f32[2, 3]
  param %w : f32[3, 4] = zeros
  %h = matmul(%x, %w) : f32[2, 4]
  %t = tanh(%h) : f32[2, 4]
  output t = %t
})",
                                     host[d]);
      compareTensors(got[d].outputs.at("t"), want.at("t"), kTol, "t");
      CHECK(bitIdentical(got[d].updates.at("w"), args[d].at("w")));
    }
    // Each device has its own arena: different arguments, different results.
    CHECK_FALSE(bitIdentical(got[0].outputs.at("t"), got[1].outputs.at("t")));
  }
}

TEST_CASE("Mesh executor: arguments are checked per device, naming it") {
  auto exe = build(R"(module @dev {
  input %x : f32[2]
  %y = neg(%x) : f32[2]
  output y = %y
})");
  Runner r(mesh("dp=2"), {exe.get(), exe.get()});
  NamedTensors good{{"x", runtime::Tensor(f32({2}))}};
  NamedTensors wrongType{{"x", runtime::Tensor(f32({3}))}};
  auto bad = r.ex->run({good, wrongType}, r.diag);
  CHECK(bad.failed());
  CHECK(r.errors().find("device 1: tensor 'x' has type f32[3]") !=
        std::string::npos);
  CHECK(r.errors().find("device 0") == std::string::npos);
  auto missing = r.ex->run({NamedTensors{}, good}, r.diag);
  CHECK(missing.failed());
  CHECK(r.errors().find("device 0: missing tensor for input 'x'") !=
        std::string::npos);
  auto count = r.ex->run({good}, r.diag);
  CHECK(count.failed());
  CHECK(r.errors().find("has 2 devices but arguments for 1") !=
        std::string::npos);
  // And a correct run still works.
  CHECK(r.run({good, good}).size() == 2);
}

TEST_CASE("Mesh executor: programs are checked against the mesh and each "
          "other") {
  auto a = build(R"(module @a {
  input %x : f32[2]
  %r = all_reduce(%x) {axis = "dp"} : f32[2]
  %g = all_gather(%r) {axis = "dp", dim = 0, sizes = [2, 2], part = -1} : f32[4]
  output g = %g
})");
  auto b = build(R"(module @b {
  input %x : f32[2]
  %g = all_gather(%x) {axis = "dp", dim = 0, sizes = [2, 2], part = -1} : f32[4]
  %r = all_reduce(%g) {axis = "dp"} : f32[4]
  output r = %r
})");
  auto c = build(R"(module @c {
  input %x : f32[2]
  %r = all_reduce(%x) {axis = "dp"} : f32[2]
  output r = %r
})");
  auto tp = build(R"(module @tp {
  input %x : f32[2]
  %r = all_reduce(%x) {axis = "tp"} : f32[2]
  output r = %r
})");
  std::string out;
  llvm::raw_string_ostream os(out);
  DiagnosticEngine diag(os);
  CHECK_FALSE(MeshExecutor::create(mesh("dp=2"), {a.get()}, {}, diag));
  CHECK(os.str().find("has 2 devices but 1 device programs") !=
        std::string::npos);
  CHECK_FALSE(MeshExecutor::create(mesh("dp=2"), {a.get(), b.get()}, {}, diag));
  CHECK(os.str().find("device 1: communication op 1 is all_gather on 'dp' "
                      "where device 0 has all_reduce on 'dp'") !=
        std::string::npos);
  CHECK_FALSE(MeshExecutor::create(mesh("dp=2"), {a.get(), c.get()}, {}, diag));
  CHECK(os.str().find("device 1: the program has 1 communication ops but "
                      "device 0's has 2") != std::string::npos);
  CHECK_FALSE(
      MeshExecutor::create(mesh("dp=2"), {tp.get(), tp.get()}, {}, diag));
  CHECK(os.str().find("device 0: op %0 (all_reduce on 'tp') communicates "
                      "over an axis that the mesh dp=2 does not have") !=
        std::string::npos);
  CHECK_FALSE(MeshExecutor::create(mesh("dp=2"), {a.get(), nullptr}, {}, diag));
  CHECK(os.str().find("device 1: no program") != std::string::npos);
}

} // namespace
} // namespace mgc::backend::testing
