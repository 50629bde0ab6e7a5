// Helpers for the interpreter tests: build a small graph with ir::Builder,
// feed it tensors, evaluate one value, capture diagnostics as text.
#pragma once

#include "ir/Builder.h"
#include "ir/Interpreter.h"

#include "support/Random.h"

#include "llvm/Support/raw_ostream.h"

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

namespace mgc::ir::testing {

struct InterpFixture {
  Module module;
  Builder builder{module.graph()};
  TensorMap args;
  std::string diagText;
  llvm::raw_string_ostream diagStream{diagText};
  DiagnosticEngine diag{diagStream};

  Value *input(const std::string &name, TensorType type,
               std::vector<double> data) {
    Value *v = module.graph().addInput(name, type);
    args[name] = HostTensor(type, std::move(data));
    return v;
  }
  Value *param(const std::string &name, TensorType type,
               std::vector<double> data) {
    Value *v = module.graph().addParam(name, type, Init{});
    args[name] = HostTensor(type, std::move(data));
    return v;
  }
  // An f64 input of the given shape filled with seeded values in [-2, 2).
  Value *randomInput(const std::string &name, Shape shape, uint64_t seed,
                     DType dtype = DType::F64) {
    TensorType type(dtype, shape);
    std::vector<double> data(static_cast<size_t>(type.size()));
    for (size_t i = 0; i < data.size(); ++i)
      data[i] = 4 * uniform01(seed, hashName(name), i) - 2;
    return input(name, type, std::move(data));
  }
  Value *op(OpKind kind, llvm::ArrayRef<Value *> operands, Attrs attrs = {}) {
    ValueOrError r = builder.create(kind, operands, std::move(attrs));
    INFO("creating " << opName(kind).str() << ": " << r.error);
    REQUIRE(r.ok());
    return r.value;
  }
  // Evaluates the graph with `v` as its only output.
  FailureOr<TensorMap> run(Value *v) {
    module.graph().outputs().clear();
    module.graph().addOutput("out", v);
    return interpret(module, args, diag);
  }
  // Evaluates `v`; the evaluation must succeed without diagnostics.
  HostTensor eval(Value *v) {
    FailureOr<TensorMap> r = run(v);
    INFO(diagStream.str());
    REQUIRE(r.succeeded());
    CHECK(diag.errorCount() == 0);
    REQUIRE(r->count("out") == 1);
    HostTensor t = r->at("out");
    CHECK(t.type == v->type());
    CHECK(static_cast<int64_t>(t.data.size()) == t.type.size());
    return t;
  }
  // Evaluates `v`, expects failure, and returns the diagnostics.
  std::string evalError(Value *v) {
    FailureOr<TensorMap> r = run(v);
    CHECK(r.failed());
    CHECK(diag.errorCount() > 0);
    return diagStream.str();
  }
};

inline void checkClose(const std::vector<double> &actual,
                       const std::vector<double> &expected,
                       double tol = 1e-12) {
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    INFO("element " << i << ": " << actual[i] << " vs " << expected[i]);
    if (std::isinf(expected[i]))
      CHECK(actual[i] == expected[i]);
    else
      CHECK(std::fabs(actual[i] - expected[i]) <=
            tol * std::max(1.0, std::fabs(expected[i])));
  }
}

inline void checkExact(const std::vector<double> &actual,
                       const std::vector<double> &expected) {
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    INFO("element " << i);
    CHECK(actual[i] == expected[i]);
  }
}

inline bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

inline TensorType f64(Shape shape) { return TensorType(DType::F64, shape); }
inline TensorType f32(Shape shape) { return TensorType(DType::F32, shape); }
inline TensorType i32(Shape shape) { return TensorType(DType::I32, shape); }

} // namespace mgc::ir::testing
