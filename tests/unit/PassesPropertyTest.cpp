// Property test of the passes: on many seeded random graphs (elementwise
// arithmetic, constants, broadcasts, transposes, reshapes, duplicated and
// dead ops), every pipeline keeps the module valid and the reference
// interpreter's outputs unchanged.
#include "ir/Builder.h"
#include "ir/Interpreter.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/PassManager.h"
#include "support/Random.h"

#include "llvm/Support/raw_ostream.h"

#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

using namespace mgc;
using namespace mgc::ir;

namespace {

class RandomGraph {
public:
  explicit RandomGraph(uint64_t seed) : seed_(seed) {}

  // Builds the module and the argument tensors.
  void build(Module &m, TensorMap &args) {
    Graph &g = m.graph();
    Builder b(g);
    const TensorType mat(DType::F64, {2, 3});
    for (const char *name : {"x", "y"}) {
      Value *v = g.addInput(name, mat);
      std::vector<double> data;
      for (int i = 0; i < 6; ++i)
        data.push_back(4 * next01() - 2);
      args[name] = HostTensor(mat, data);
      pool_.push_back(v);
    }
    unsigned numOps = 8 + pick(24);
    for (unsigned i = 0; i < numOps; ++i)
      addRandomOp(b);
    // A few outputs, from anywhere (dead ops remain for dce).
    unsigned numOutputs = 1 + pick(3);
    for (unsigned i = 0; i < numOutputs; ++i)
      g.addOutput("out" + std::to_string(i), pool_[pick(pool_.size())]);
  }

private:
  double next01() { return uniform01(seed_, 7, counter_++); }
  unsigned pick(size_t n) { return static_cast<unsigned>(next01() * n); }

  Value *constant(Builder &b) {
    static const double values[] = {0.0, 1.0, 2.0, -1.0, 0.5, 3.0};
    return b.constant(values[pick(6)], DType::F64);
  }
  // A value of the given type from the pool, or a (broadcast) constant.
  Value *operandOfType(Builder &b, const TensorType &t) {
    std::vector<Value *> candidates;
    for (Value *v : pool_)
      if (v->type() == t)
        candidates.push_back(v);
    if (!candidates.empty() && next01() < 0.75)
      return candidates[pick(candidates.size())];
    Value *c = constant(b);
    if (t.isScalar())
      return c;
    return b
        .create(OpKind::Broadcast, {c},
                Attrs{{"shape",
                       std::vector<int64_t>(t.shape.begin(), t.shape.end())}})
        .value;
  }

  void addRandomOp(Builder &b) {
    Value *a = pool_[pick(pool_.size())];
    Value *result = nullptr;
    switch (pick(9)) {
    case 0:
    case 1:
    case 2: {
      static const OpKind binary[] = {OpKind::Add, OpKind::Sub, OpKind::Mul,
                                      OpKind::Div};
      OpKind kind = binary[pick(4)];
      Value *other = operandOfType(b, a->type());
      bool swap = next01() < 0.5;
      result = b.create(kind, {swap ? other : a, swap ? a : other}).value;
      break;
    }
    case 3: {
      static const OpKind unary[] = {OpKind::Neg, OpKind::Tanh, OpKind::Relu,
                                     OpKind::Sigmoid, OpKind::Neg};
      result = b.create(unary[pick(5)], {a}).value;
      break;
    }
    case 4:
      if (a->type().rank() == 2)
        result = b.create(OpKind::Transpose, {a},
                          Attrs{{"perm", std::vector<int64_t>{1, 0}}})
                     .value;
      break;
    case 5: {
      static const std::vector<int64_t> shapes[] = {{6}, {2, 3}, {3, 2}};
      if (a->type().size() == 6)
        result =
            b.create(OpKind::Reshape, {a}, Attrs{{"shape", shapes[pick(3)]}})
                .value;
      break;
    }
    case 6: {
      // Scalar arithmetic on constants, for the folder.
      Value *c1 = constant(b), *c2 = constant(b);
      static const OpKind kinds[] = {OpKind::Add, OpKind::Mul, OpKind::Sub,
                                     OpKind::Div};
      result = b.create(kinds[pick(4)], {c1, c2}).value;
      break;
    }
    case 7:
      if (a->type().isScalar() || a->type().rank() == 1)
        result = b.create(OpKind::Broadcast, {a},
                          Attrs{{"shape", std::vector<int64_t>{2, 6}}})
                     .value;
      if (a->type().isScalar() && next01() < 0.5)
        result = b.create(OpKind::Broadcast, {a},
                          Attrs{{"shape", std::vector<int64_t>{2, 3}}})
                     .value;
      break;
    case 8:
      // Duplicate an existing op, for cse.
      if (Op *op = a->definingOp()) {
        std::vector<Value *> operands(op->operands().begin(),
                                      op->operands().end());
        result = b.create(op->kind(), operands, op->attrs()).value;
      }
      break;
    }
    if (result)
      pool_.push_back(result);
  }

  uint64_t seed_;
  uint64_t counter_ = 0;
  std::vector<Value *> pool_;
};

bool sameNumbers(const std::vector<double> &a, const std::vector<double> &b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i]))))
      return false;
  return true;
}

} // namespace

TEST_CASE("passes keep random graphs valid and their values unchanged") {
  const char *pipelines[] = {"canonicalize", "cse", "dce",
                             "canonicalize,cse,dce",
                             "cse,canonicalize,dce,cse"};
  unsigned simplified = 0;
  for (uint64_t seed = 1; seed <= 150; ++seed) {
    for (const char *pipeline : pipelines) {
      CAPTURE(seed);
      CAPTURE(pipeline);
      Module m("random");
      TensorMap args;
      RandomGraph(seed).build(m, args);
      std::string diagText;
      llvm::raw_string_ostream diagStream(diagText);
      DiagnosticEngine diag(diagStream);
      REQUIRE(succeeded(verify(m, diag)));
      auto before = interpret(m, args, diag);
      REQUIRE(before);
      size_t opsBefore = m.graph().numOps();

      passes::PassManager pm({}, llvm::nulls());
      REQUIRE(succeeded(pm.parsePipeline(pipeline, diag)));
      std::string input = printModuleToString(m);
      CAPTURE(input);
      REQUIRE(succeeded(pm.run(m, diag))); // verifies after each pass
      CAPTURE(diagStream.str());
      auto after = interpret(m, args, diag);
      REQUIRE(after);
      for (const auto &[name, tensor] : *before) {
        CAPTURE(name);
        REQUIRE(after->count(name));
        CHECK(after->at(name).type == tensor.type);
        CHECK(sameNumbers(after->at(name).data, tensor.data));
      }
      simplified += m.graph().numOps() < opsBefore;
      // A second run of the same pipeline finds nothing more to do.
      std::string once = printModuleToString(m);
      passes::PassManager again({}, llvm::nulls());
      REQUIRE(succeeded(again.parsePipeline(pipeline, diag)));
      REQUIRE(succeeded(again.run(m, diag)));
      CHECK(printModuleToString(m) == once);
    }
  }
  // The generator is only useful if the passes have work to do.
  CHECK(simplified > 300);
}
