// Helpers for the gradient checks: build a small graph whose loss is
// sum(op(params) * fixed random weights), run autodiff, and compare every
// gradient element with central finite differences through the float64
// interpreter.
#pragma once

#include "ir/Builder.h"
#include "ir/Interpreter.h"
#include "ir/Verifier.h"
#include "passes/Autodiff.h"
#include "support/Random.h"

#include "llvm/Support/raw_ostream.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <string>
#include <vector>

namespace mgc::gradcheck {

using namespace mgc::ir;

// Finite-difference step and tolerances: central differences in float64
// have a truncation error of order h^2 and a rounding error of order
// 1e-16 * |L| / h, far below these.
constexpr double kStep = 1e-6;
constexpr double kRelTol = 1e-6;
constexpr double kAbsTol = 1e-8;

// Whether an analytic gradient matches a finite difference, with the
// absolute floor scaled by the size of the loss (its rounding error).
inline bool gradClose(double analytic, double numeric, double lossScale) {
  double scale = std::max(std::fabs(analytic), std::fabs(numeric));
  return std::fabs(analytic - numeric) <=
         kRelTol * scale + kAbsTol * std::max(1.0, std::fabs(lossScale));
}

inline std::vector<double> randomValues(size_t n, uint64_t seed,
                                        llvm::StringRef name, double lo,
                                        double hi) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = lo + (hi - lo) * uniform01(seed, hashName(name), i);
  return v;
}

// Evaluates `module` on `args`; REQUIREs success.
inline TensorMap evaluate(const Module &module, const TensorMap &args) {
  std::string text;
  llvm::raw_string_ostream os(text);
  DiagnosticEngine diag(os);
  FailureOr<TensorMap> r = interpret(module, args, diag);
  os.flush();
  INFO(text);
  REQUIRE(r.succeeded());
  return *r;
}

inline double lossOf(const Module &module, const TensorMap &args) {
  const Output *loss = module.graph().lossOutput();
  REQUIRE(loss);
  return evaluate(module, args).at(loss->name).data.at(0);
}

// Runs autodiff on `module` in place; REQUIREs success, no diagnostics and
// a module that verifies.
inline void differentiateOrFail(Module &module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  DiagnosticEngine diag(os);
  bool ok = succeeded(passes::differentiate(module, diag)) &&
            succeeded(verify(module, diag));
  os.flush();
  INFO(text);
  REQUIRE(ok);
  CHECK(text.empty());
}

// Compares grad.<p> of the differentiated module with finite differences of
// the loss of the forward module, for the given elements of each parameter
// (all elements when `pick` is empty). Returns the number of elements
// compared.
inline size_t compareWithFiniteDifferences(
    const Module &forward, const Module &differentiated, const TensorMap &args,
    const std::function<std::vector<size_t>(const Value &)> &pick = {}) {
  TensorMap grads = evaluate(differentiated, args);
  double loss = lossOf(forward, args);
  REQUIRE(std::isfinite(loss));
  size_t compared = 0;
  for (Value *p : forward.graph().params()) {
    std::string gradName = passes::gradOutputName(p->name());
    REQUIRE(grads.count(gradName) == 1);
    const HostTensor &g = grads.at(gradName);
    CHECK(g.type == p->type());
    std::vector<size_t> elements;
    if (pick) {
      elements = pick(*p);
    } else {
      for (size_t i = 0; i < static_cast<size_t>(p->type().size()); ++i)
        elements.push_back(i);
    }
    for (size_t i : elements) {
      TensorMap shifted = args;
      double &x = shifted.at(p->name()).data.at(i);
      double x0 = x;
      x = x0 + kStep;
      double plus = lossOf(forward, shifted);
      x = x0 - kStep;
      double minus = lossOf(forward, shifted);
      double numeric = (plus - minus) / (2 * kStep);
      INFO("d loss / d " << p->name() << "[" << i << "]: autodiff " << g.data[i]
                         << ", finite differences " << numeric);
      CHECK(gradClose(g.data[i], numeric, loss));
      ++compared;
    }
  }
  return compared;
}

// A small graph under test: parameters (the differentiated operands) and
// integer inputs, one op or a few, then loss = sum(y * w) for a fixed random
// input w of y's type, so that every element of y matters.
struct GradCase {
  Module module{"gradcheck"};
  Builder b{module.graph()};
  TensorMap args;
  uint64_t seed = 7;

  Value *param(const std::string &name, Shape shape, double lo = -2,
               double hi = 2, DType dtype = DType::F64) {
    TensorType type(dtype, shape);
    Value *v = module.graph().addParam(name, type, Init{});
    args[name] = HostTensor(type, randomValues(static_cast<size_t>(type.size()),
                                               seed, name, lo, hi));
    return v;
  }
  Value *ints(const std::string &name, Shape shape, std::vector<double> data) {
    TensorType type(DType::I32, shape);
    Value *v = module.graph().addInput(name, type);
    args[name] = HostTensor(type, std::move(data));
    return v;
  }
  Value *op(OpKind kind, llvm::ArrayRef<Value *> operands, Attrs attrs = {}) {
    ValueOrError r = b.create(kind, operands, std::move(attrs));
    INFO("creating " << opName(kind).str() << ": " << r.error);
    REQUIRE(r.ok());
    return r.value;
  }
  // loss = sum(y * w) over every axis.
  void finish(Value *y) {
    TensorType wt(y->type().dtype, y->type().shape);
    Value *w = module.graph().addInput("weights", wt);
    args["weights"] = HostTensor(
        wt, randomValues(static_cast<size_t>(wt.size()), seed + 1, "w", -1, 1));
    std::vector<int64_t> all;
    for (int64_t d = 0; d < y->type().rank(); ++d)
      all.push_back(d);
    Value *loss = op(OpKind::Sum, {op(OpKind::Mul, {y, w})},
                     {{"axes", all}, {"keepdims", false}});
    module.graph().addOutput("loss", loss, true);
  }
  std::set<OpKind> kinds() const {
    std::set<OpKind> k;
    for (const auto &o : module.graph().ops())
      k.insert(o->kind());
    return k;
  }
};

} // namespace mgc::gradcheck
