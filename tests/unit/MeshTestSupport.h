// Helpers of the mesh and communication tests: device programs from IR
// text, meshes, slices of host tensors, a runner that keeps the
// diagnostics, and one thread per device.
#pragma once

#include "CpuTestSupport.h"

#include "backend/cpu/MeshExecutor.h"

#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace mgc::backend::testing {

using cpu::MeshExecutor;
using cpu::MeshOptions;
using cpu::NamedTensors;
using cpu::RunResult;

inline std::unique_ptr<ir::Module> parse(const std::string &text) {
  std::string out;
  llvm::raw_string_ostream os(out);
  DiagnosticEngine diag(os);
  auto m = ir::parseModuleText("mesh.mgir", text, diag);
  INFO(os.str());
  REQUIRE(m);
  return m;
}

inline std::unique_ptr<Executable> build(const std::string &text) {
  return buildExecutable(parse(text), cpu::scratchBytes);
}

inline ir::Mesh meshOf(const char *text) {
  std::string error;
  auto m = ir::Mesh::parse(text, error);
  INFO(error);
  REQUIRE(m);
  return *m;
}

// A host tensor of `type` with values from `seed` in [-1, 1).
inline ir::HostTensor randomHost(const ir::TensorType &type, uint64_t seed) {
  ir::HostTensor t(type);
  for (size_t i = 0; i < t.data.size(); ++i)
    t.data[i] = ir::roundToDType(-1 + 2 * uniform01(seed, 7, i), type.dtype);
  return t;
}

inline ir::TensorType f32(std::vector<int64_t> shape) {
  return ir::TensorType{ir::DType::F32, std::move(shape)};
}

// Rows [r0, r0 + rows) and columns [c0, c0 + cols) of a 2-D tensor.
inline ir::HostTensor block(const ir::HostTensor &t, int64_t r0, int64_t rows,
                            int64_t c0, int64_t cols) {
  ir::HostTensor b(ir::TensorType{t.type.dtype, {rows, cols}});
  int64_t width = t.type.shape[1];
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      b.data[r * cols + c] = t.data[(r0 + r) * width + c0 + c];
  return b;
}
inline ir::HostTensor rows(const ir::HostTensor &t, int64_t r0, int64_t n) {
  return block(t, r0, n, 0, t.type.shape[1]);
}

inline ir::TensorMap interpret(const std::string &text,
                               const ir::TensorMap &args) {
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

// Runs body(d) for every device d of `n`, each on its own thread, and
// waits for all of them.
inline void onDeviceThreads(int64_t n,
                            const std::function<void(int64_t)> &body) {
  std::vector<std::thread> threads;
  for (int64_t d = 0; d < n; ++d)
    threads.emplace_back([&body, d] { body(d); });
  for (std::thread &t : threads)
    t.join();
}

// f32 sums of a few products in another order: 1e-5 of max(|value|, 1).
inline constexpr double kTol = 1e-5;

} // namespace mgc::backend::testing
