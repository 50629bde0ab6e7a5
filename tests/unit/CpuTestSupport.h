// Helpers for the CPU backend tests: run a module on the CPU executor and on
// the interpreter with the same arguments, and compare the results.
#pragma once

#include "backend/Executable.h"
#include "backend/cpu/CpuExecutor.h"
#include "ir/Builder.h"
#include "ir/Interpreter.h"
#include "ir/Printer.h"
#include "ir/TextParser.h"

#include "support/Random.h"

#include "llvm/Support/raw_ostream.h"

#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <string>

namespace mgc::backend::testing {

// A copy of a module through its text form (an Executable takes its module).
inline std::unique_ptr<ir::Module> cloneModule(const ir::Module &m) {
  std::string text = ir::printModuleToString(m);
  DiagnosticEngine diag;
  auto copy = ir::parseModuleText("clone.mgir", text, diag);
  REQUIRE(copy);
  return copy;
}

// Arguments for every input, parameter and state of `m`: floats uniform in
// [lo, hi) from `seed`, integers in [0, intLimit).
inline ir::TensorMap randomArguments(const ir::Module &m, uint64_t seed,
                                     int64_t intLimit, double lo = -2,
                                     double hi = 2) {
  ir::TensorMap args;
  for (const auto &arg : m.graph().arguments()) {
    ir::HostTensor t(arg->type());
    for (size_t i = 0; i < t.data.size(); ++i) {
      double u = uniform01(seed, hashName(arg->name()), i);
      t.data[i] = ir::isInteger(t.type.dtype)
                      ? std::floor(u * static_cast<double>(intLimit))
                      : ir::roundToDType(lo + (hi - lo) * u, t.type.dtype);
    }
    args[arg->name()] = std::move(t);
  }
  return args;
}

inline cpu::NamedTensors toTensors(const ir::TensorMap &args) {
  cpu::NamedTensors out;
  for (const auto &[name, t] : args)
    out[name] = runtime::Tensor::fromHost(t);
  return out;
}

// Runs `m` on the CPU (with `threads` threads) and returns its outputs.
inline cpu::RunResult runCpu(const ir::Module &m, const ir::TensorMap &args,
                             unsigned threads = 2) {
  auto exe = buildExecutable(cloneModule(m), cpu::scratchBytes);
  std::string text;
  llvm::raw_string_ostream os(text);
  DiagnosticEngine diag(os);
  cpu::CpuOptions options;
  options.threads = threads;
  auto ex = cpu::CpuExecutor::create(*exe, options, diag);
  INFO(os.str());
  REQUIRE(ex);
  auto r = ex->run(toTensors(args), diag);
  INFO(os.str());
  REQUIRE(r.succeeded());
  return std::move(*r);
}

// |got - want| <= tol * max(|want|, 1) element by element; NaN matches NaN
// and infinities must be equal. Returns the worst ratio of the error to the
// allowed error (<= 1 passes).
inline double compareTensors(const runtime::Tensor &got,
                             const ir::HostTensor &want, double tol,
                             const std::string &what) {
  INFO(what);
  REQUIRE(got.type() == want.type);
  double worst = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    double g = got.get(i), w = want.data[i];
    if (std::isnan(w) || std::isinf(w)) {
      bool same = std::isnan(w) ? std::isnan(g) : g == w;
      if (!same) {
        INFO("element " << i << ": got " << g << ", want " << w);
        CHECK(same);
        return 2;
      }
      continue;
    }
    double diff = std::fabs(g - w);
    double ratio = diff == 0 ? 0 : diff / (tol * std::max(std::fabs(w), 1.0));
    if (!(ratio <= 1)) {
      INFO("element " << i << ": got " << g << ", want " << w);
      CHECK(ratio <= 1);
      return ratio;
    }
    worst = std::max(worst, ratio);
  }
  return worst;
}

// Compares every output of the CPU run with the interpreter's.
inline void compareWithInterpreter(const ir::Module &m,
                                   const ir::TensorMap &args, double tol,
                                   unsigned threads = 2) {
  DiagnosticEngine diag;
  ir::TensorMap updated;
  auto ref = ir::interpret(m, args, diag, &updated);
  REQUIRE(ref.succeeded());
  cpu::RunResult got = runCpu(m, args, threads);
  CHECK(got.outputs.size() == ref->size());
  for (const auto &[name, want] : *ref) {
    REQUIRE(got.outputs.count(name) == 1);
    compareTensors(got.outputs.at(name), want, tol, "output " + name);
  }
  CHECK(got.updates.size() == updated.size());
  for (const auto &[name, want] : updated) {
    REQUIRE(got.updates.count(name) == 1);
    compareTensors(got.updates.at(name), want, tol, "update of " + name);
  }
}

// One op case: a module whose inputs take a float dtype `f` (ids are i32),
// built op by op; shared by the CPU and CUDA kernel tests.
struct OpCase {
  ir::Module module;
  ir::Builder b{module.graph()};
  ir::DType f;
  explicit OpCase(ir::DType dtype) : f(dtype) {}

  ir::Value *x(const std::string &name, ir::Shape shape) {
    return module.graph().addInput(name, ir::TensorType(f, shape));
  }
  ir::Value *ids(const std::string &name, ir::Shape shape) {
    return module.graph().addInput(name,
                                   ir::TensorType(ir::DType::I32, shape));
  }
  ir::Value *op(ir::OpKind kind, llvm::ArrayRef<ir::Value *> operands,
                ir::Attrs attrs = {}) {
    ir::ValueOrError r = b.create(kind, operands, std::move(attrs));
    INFO(ir::opName(kind).str() << ": " << r.error);
    REQUIRE(r.ok());
    return r.value;
  }
  void out(const std::string &name, ir::Value *v) {
    module.graph().addOutput(name, v);
  }
};

// conv2d and the pools with stride, padding, dilation and groups all at
// work (x[2, 4, 7, 6], 3x3 windows, a [2, 6, 4, 6] conv2d result), and a
// second output with the default attributes.
inline ir::Value *buildWindowCase(ir::OpKind kind, OpCase &c) {
  using Ints = std::vector<int64_t>;
  using ir::OpKind;
  ir::Attrs conv{{"stride", Ints{2, 1}},
                 {"padding", Ints{1, 2}},
                 {"dilation", Ints{1, 2}},
                 {"groups", int64_t(2)}};
  ir::Attrs pool{{"kernel", Ints{3, 3}},
                 {"stride", Ints{2, 2}},
                 {"padding", Ints{1, 1}}};
  auto with = [](ir::Attrs a, const char *name, ir::AttrValue v) {
    a.set(name, std::move(v));
    return a;
  };
  switch (kind) {
  case OpKind::Conv2d:
    c.out("plain", c.op(kind, {c.x("x2", {3, 3, 5, 5}), c.x("w2", {4, 3, 3, 3})}));
    return c.op(kind, {c.x("x", {2, 4, 7, 6}), c.x("w", {6, 2, 3, 3})}, conv);
  case OpKind::Conv2dGradX:
    return c.op(kind, {c.x("dy", {2, 6, 4, 6}), c.x("w", {6, 2, 3, 3})},
                with(conv, "in_hw", Ints{7, 6}));
  case OpKind::Conv2dGradW:
    return c.op(kind, {c.x("dy", {2, 6, 4, 6}), c.x("x", {2, 4, 7, 6})},
                with(conv, "kernel", Ints{3, 3}));
  case OpKind::MaxPool2d:
    c.out("plain", c.op(kind, {c.x("x2", {2, 3, 4, 4})},
                        {{"kernel", Ints{2, 2}}, {"stride", Ints{2, 2}}}));
    return c.op(kind, {c.x("x", {2, 3, 7, 6})}, pool);
  case OpKind::AvgPool2d:
    c.out("counted", c.op(kind, {c.x("x2", {2, 3, 7, 6})}, pool));
    return c.op(kind, {c.x("x", {2, 3, 7, 6})},
                with(pool, "count_include_pad", false));
  case OpKind::MaxPool2dGrad:
    return c.op(kind, {c.x("dy", {2, 3, 4, 3}), c.x("x", {2, 3, 7, 6})}, pool);
  default:
    return c.op(kind, {c.x("dy", {2, 3, 4, 3})},
                with(with(pool, "in_hw", Ints{7, 6}), "count_include_pad",
                     false));
  }
}

inline bool bitIdentical(const runtime::Tensor &a, const runtime::Tensor &b) {
  return a.type() == b.type() &&
         (a.nbytes() == 0 || std::memcmp(a.data(), b.data(), a.nbytes()) == 0);
}

} // namespace mgc::backend::testing
