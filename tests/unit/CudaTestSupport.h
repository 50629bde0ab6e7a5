// Helpers for the CUDA backend tests: skip (with the reason) where no CUDA
// device can be used, run a module on the CUDA executor, and compare with
// the CPU backend relative to a tensor's largest element.
#pragma once

#include "CpuTestSupport.h"

#if MGC_HAVE_CUDA
#include "SourcePath.h"
#include "backend/cuda/CudaCheck.h"
#include "backend/cuda/CudaDevice.h"
#include "backend/cuda/CudaExecutor.h"
#include "backend/cuda/CudaKernels.h"
#include "frontend/Frontend.h"
#include "ir/TargetModule.h"
#include "runtime/session/Pipeline.h"
#endif

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

namespace mgc::backend::testing {

#if MGC_HAVE_CUDA
// True, after a message saying why, where no CUDA device can be used: the
// calling test then returns and counts as passed.
inline bool skipWithoutCuda() {
  if (auto why = cuda::cudaUnavailableReason()) {
    MESSAGE("no CUDA device: " << *why);
    return true;
  }
  return false;
}

// The training step of samples/`file` compiled for the CUDA target (the
// session's pipeline), every op checked as CudaExecutor::create checks it
// first: with or without a device.
inline std::unique_ptr<ir::Module>
cudaTrainingStep(const char *file, frontend::ConstOverrides defines) {
  DiagnosticEngine diag;
  frontend::CompileOptions options;
  options.defines = std::move(defines);
  auto m = frontend::compileModelFile(
      mgc::test::sourceDir() + "/samples/" + file, options, diag);
  REQUIRE(m);
  m->attrs().set(ir::kTargetAttr, std::string(ir::kCudaTarget.name));
  REQUIRE(
      succeeded(session::runPipeline(*m, session::kTrainingPipeline, diag)));
  for (const auto &op : m->graph().ops()) {
    std::string why = cuda::cudaUnsupported(*op);
    INFO(std::string(file) << ": " << why);
    CHECK(why.empty());
  }
  return m;
}

// Runs `m` on the CUDA device and returns its results.
inline cpu::RunResult runCuda(const ir::Module &m, const ir::TensorMap &args,
                              cuda::CudaOptions options = {}) {
  auto exe = buildExecutable(cloneModule(m), cpu::scratchBytes);
  std::string text;
  llvm::raw_string_ostream os(text);
  DiagnosticEngine diag(os);
  auto ex = cuda::CudaExecutor::create(*exe, options, diag);
  INFO(os.str());
  REQUIRE(ex);
  auto r = ex->run(toTensors(args), diag);
  INFO(os.str());
  REQUIRE(r.succeeded());
  return std::move(*r);
}
#endif

// A seed for fresh random inputs, printed by the caller's INFO so that a
// failure can be reproduced.
inline uint64_t freshSeed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) | rd();
}

// |got - want| <= tol * max(largest |want|, tiny) for every element; NaN
// matches NaN, infinities must be equal. Returns the worst error relative
// to the largest element.
inline double compareRelativeToLargest(const runtime::Tensor &got,
                                       const runtime::Tensor &want, double tol,
                                       const std::string &what) {
  INFO(what);
  REQUIRE(got.type() == want.type());
  double largest = 0;
  for (int64_t i = 0; i < want.numel(); ++i)
    if (std::isfinite(want.get(i)))
      largest = std::max(largest, std::fabs(want.get(i)));
  double scale = std::max(largest, 1e-30);
  double worst = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    double g = got.get(i), w = want.get(i);
    if (!std::isfinite(w)) {
      bool same = std::isnan(w) ? std::isnan(g) : g == w;
      INFO("element " << i << ": got " << g << ", want " << w);
      CHECK(same);
      if (!same)
        return 2;
      continue;
    }
    double err = std::fabs(g - w) / scale;
    if (!(err <= tol)) {
      INFO("element " << i << ": got " << g << ", want " << w << " (largest "
                      << largest << ")");
      CHECK(err <= tol);
      return err;
    }
    worst = std::max(worst, err);
  }
  return worst;
}

} // namespace mgc::backend::testing
