// The ops of tensor parallelism over a vocabulary, by hand-computed values:
// the pieces of cross_entropy, the device versions of embedding and
// embedding_grad (ids outside the part give zeros), the maximum all-reduce
// of the in-process communicator, and the partial-maximum placement.
#include "InterpreterTestSupport.h"
#include "MeshTestSupport.h"

#include "backend/cpu/InProcessCommunicator.h"
#include "ir/Printer.h"
#include "ir/Sharding.h"
#include "ir/TextParser.h"
#include "ir/Verifier.h"
#include "passes/Reshard.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace mgc;
using namespace mgc::ir;
using namespace mgc::ir::testing;

namespace {

using Ints = std::vector<int64_t>;

Attrs partAttrs(Ints sizes, int64_t part) {
  return {{"axis", std::string("tp")}, {"sizes", sizes}, {"part", part}};
}

} // namespace

TEST_CASE("vocab ops: sum_exp, class_logit and the gradient from statistics") {
  InterpFixture f;
  Value *x = f.input("x", f64({2, 3}), {0, 1, 2, 5, 5, 5});
  Value *m = f.input("m", f64({2}), {2, 5});
  checkClose(f.eval(f.op(OpKind::SumExp, {x, m})).data,
             {std::exp(-2.0) + std::exp(-1.0) + 1, 3});
  Value *t = f.input("t", i32({2}), {1, 2});
  checkExact(f.eval(f.op(OpKind::ClassLogit, {x, t})).data, {1, 5});
  // Part 1 of [2, 1] holds class 2 only: position 0 (target 1) gives 0.
  Value *last = f.input("last", f64({2, 1}), {2, 5});
  checkExact(
      f.eval(f.op(OpKind::ClassLogit, {last, t}, partAttrs({2, 1}, 1))).data,
      {0, 5});
  // dy = 2 over 2 positions: scale 1; softmax row 1 is 1/3 each.
  Value *dy = f.input("dy", f64({}), {2});
  Value *s = f.input("s", f64({2}), {4, 3});
  checkClose(f.eval(f.op(OpKind::CrossEntropyGradStats, {dy, x, m, s, t})).data,
             {std::exp(-2.0) / 4, std::exp(-1.0) / 4 - 1, 0.25, 1.0 / 3,
              1.0 / 3, 1.0 / 3 - 1});
  checkClose(f.eval(f.op(OpKind::CrossEntropyGradStats, {dy, last, m, s, t},
                         partAttrs({2, 1}, 1)))
                 .data,
             {0.25, 1.0 / 3 - 1});
}

TEST_CASE("vocab ops: the pieces add up to cross_entropy and its gradient") {
  InterpFixture f;
  Value *logits = f.randomInput("logits", {3, 4, 7}, 5);
  Value *t = f.input("t", i32({3, 4}), {0, 6, 3, 2, 1, 1, 5, 4, 6, 0, 2, 3});
  Value *m = f.op(OpKind::Max, {logits}, {{"axes", Ints{-1}}});
  Value *s = f.op(OpKind::SumExp, {logits, m});
  Value *lse = f.op(OpKind::Add, {f.op(OpKind::Log, {s}), m});
  Value *perPos =
      f.op(OpKind::Sub, {lse, f.op(OpKind::ClassLogit, {logits, t})});
  Value *loss = f.op(OpKind::Mean, {perPos}, {{"axes", Ints{0, 1}}});
  Value *fused = f.op(OpKind::CrossEntropy, {logits, t});
  checkClose(f.eval(loss).data, f.eval(fused).data);
  Value *dy = f.input("dy", f64({}), {0.75});
  checkClose(
      f.eval(f.op(OpKind::CrossEntropyGradStats, {dy, logits, m, s, t})).data,
      f.eval(f.op(OpKind::CrossEntropyGrad, {dy, logits, t})).data);
}

TEST_CASE("vocab ops: embedding on a part of the rows masks the other ids") {
  InterpFixture f;
  // Rows 3..4 of a table of 5 (part 1 of [3, 2]).
  Value *table = f.input("table", f64({2, 2}), {30, 31, 40, 41});
  Value *ids = f.input("ids", i32({4}), {4, 0, 3, 2});
  checkExact(
      f.eval(f.op(OpKind::EmbeddingPart, {table, ids}, partAttrs({3, 2}, 1)))
          .data,
      {40, 41, 0, 0, 30, 31, 0, 0});
  Value *dy = f.input("dy", f64({4, 2}), {1, 2, 3, 4, 5, 6, 7, 8});
  Value *ids2 = f.input("ids2", i32({4}), {4, 0, 4, 3});
  HostTensor g =
      f.eval(f.op(OpKind::EmbeddingGradPart, {dy, ids2}, partAttrs({3, 2}, 1)));
  CHECK(g.type == f64({2, 2}));
  checkExact(g.data, {7, 8, 6, 8});
}

TEST_CASE("vocab ops: shape rules and errors of the part ops") {
  InterpFixture f;
  Value *table = f.input("table", f64({2, 2}), {1, 2, 3, 4});
  Value *ids = f.input("ids", i32({2}), {5, 0});
  Builder &b = f.builder;
  // The table's rows must be the device's part.
  ValueOrError wrong =
      b.create(OpKind::EmbeddingPart, {table, ids}, partAttrs({3, 2}, 0));
  CHECK_FALSE(wrong.ok());
  CHECK(contains(wrong.error, "holds part 3 of the rows"));
  // Uneven parts need the device's part.
  ValueOrError uneven =
      b.create(OpKind::EmbeddingPart, {table, ids}, partAttrs({3, 2}, -1));
  CHECK_FALSE(uneven.ok());
  CHECK(contains(uneven.error, "uneven parts"));
  ValueOrError grad = b.create(OpKind::EmbeddingGradPart,
                               {f.input("dy", f64({2, 3}), {1, 2, 3, 4, 5, 6}),
                                f.input("ids2", i32({2}), {4, 0})},
                               partAttrs({3, 2}, 0));
  REQUIRE(grad.ok());
  CHECK(grad.value->type() == f64({3, 3}));
  // An id outside the whole vocabulary is an error, not a zero row.
  Value *e = f.op(OpKind::EmbeddingPart, {table, ids}, partAttrs({2, 2}, 1));
  std::string why = f.evalError(e);
  INFO(why);
  CHECK(contains(why, "embedding_part id 5 is out of range [0, 4)"));
  // Even parts without `part`: only the runtime knows the device.
  InterpFixture g;
  Value *t2 = g.input("table", f64({2, 2}), {1, 2, 3, 4});
  Value *i2 = g.input("ids", i32({1}), {1});
  Value *even = g.op(OpKind::EmbeddingPart, {t2, i2}, partAttrs({2, 2}, -1));
  CHECK(contains(g.evalError(even), "needs attribute `part`"));
}

TEST_CASE("vocab ops: placements with partial maxima") {
  CHECK(Placement::partialMax().str() == "Pmax");
  REQUIRE(Placement::parse("Pmax"));
  CHECK(*Placement::parse("Pmax") == Placement::partialMax());
  CHECK(Placement::partialMax() != Placement::partial());
  CHECK(Placement::partialMax().isPartial());
  CHECK_FALSE(Placement::partialMax().isPartialSum());
  CHECK_FALSE(Placement::parse("Pmin"));
  MeshAxis tp{"tp", 4, {}};
  // All-reduced (to R, or then split locally): never scattered.
  CHECK(passes::axisReshardBytes(Placement::partialMax(),
                                 Placement::replicate(), tp,
                                 100) == doctest::Approx(150));
  CHECK(passes::axisReshardBytes(Placement::partialMax(), Placement::split(0),
                                 tp, 100) == doctest::Approx(150));
  CHECK(std::isinf(passes::axisReshardBytes(Placement::partialMax(),
                                            Placement::partial(), tp, 100)));
  CHECK(std::isinf(passes::axisReshardBytes(Placement::partial(),
                                            Placement::partialMax(), tp, 100)));
}

TEST_CASE("vocab ops: reshard makes partial maxima whole with all_reduce_max") {
  Module m;
  Graph &g = m.graph();
  Value *x = g.addInput("x", f32({4, 6}));
  Mesh mesh = backend::testing::meshOf("dp=2,tp=2");
  x->setSharding(
      {{"dp", Placement::split(0)}, {"tp", Placement::partialMax()}});
  Builder b(g);
  std::string error;
  Value *r = passes::reshard(
      b, x, {{"dp", Placement::split(0)}, {"tp", Placement::split(1)}}, mesh,
      error);
  INFO(error);
  REQUIRE(r);
  Op *split = r->definingOp();
  REQUIRE(split);
  CHECK(split->kind() == OpKind::LocalSplit);
  Op *max = split->operand(0)->definingOp();
  REQUIRE(max);
  CHECK(max->kind() == OpKind::AllReduceMax);
  CHECK(max->attrs().getString("axis") == "tp");
  CHECK(max->result()->sharding().str() == "{dp=S0, tp=R}");
  // Partial maxima never become partial sums.
  CHECK_FALSE(passes::reshard(
      b, x, {{"dp", Placement::split(0)}, {"tp", Placement::partial()}}, mesh,
      error));
  CHECK(contains(error, "partial sums"));
}

TEST_CASE("vocab ops: the in-process all-reduce of maxima") {
  backend::cpu::InProcessMesh mesh(backend::testing::meshOf("dp=3"));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<std::vector<double>> in = {
      {1, -5, 0, 2}, {3, -7, nan, 2}, {2, -6, 9, -1}};
  std::vector<std::vector<double>> out(3, std::vector<double>(4));
  std::vector<std::vector<int32_t>> ints = {{1, -5}, {3, -7}, {2, -6}};
  std::vector<std::vector<int32_t>> intsOut(3, std::vector<int32_t>(2));
  std::vector<std::string> errors(3);
  backend::testing::onDeviceThreads(3, [&](int64_t d) {
    backend::Communicator &c = mesh.endpoint(d);
    if (c.allReduceMax("dp", in[d].data(), out[d].data(), 4, ir::DType::F64,
                       errors[d])
            .failed())
      return;
    (void)c.allReduceMax("dp", ints[d].data(), intsOut[d].data(), 2,
                         ir::DType::I32, errors[d]);
  });
  for (int64_t d = 0; d < 3; ++d) {
    INFO("device " << d << ": " << errors[d]);
    CHECK(errors[d].empty());
    CHECK(out[d][0] == 3);
    CHECK(out[d][1] == -5);
    CHECK(std::isnan(out[d][2]));
    CHECK(out[d][3] == 2);
    CHECK(intsOut[d] == std::vector<int32_t>{3, -5});
  }
}

TEST_CASE("vocab ops: partial maxima in the IR text and the verifier") {
  const char *text = R"(module @m attributes {mesh = "tp=2"} {
  input %x : i32[4, 6] {tp=S1}
  input %f : f32[4, 6] {tp=S1}
  %0 = max(%x) {axes = [1], keepdims = false} : i32[4] {tp=Pmax}
  %1 = all_reduce_max(%0) {axis = "tp"} : i32[4] {tp=R}
  %2 = max(%f) {axes = [1], keepdims = false} : f32[4] {tp=Pmax}
  output y = %1
  output z = %2
}
)";
  std::string diagText;
  llvm::raw_string_ostream os(diagText);
  DiagnosticEngine diag(os);
  std::unique_ptr<Module> m = parseModuleText("t.mgir", text, diag);
  INFO(os.str());
  REQUIRE(m);
  // Partial maxima of integers are exact: the verifier accepts them.
  CHECK(succeeded(verify(*m, diag)));
  CHECK(printModuleToString(*m) == text);
  // Partial sums of integers are not (the parser verifies what it reads).
  std::string sums = text;
  sums.replace(sums.find("i32[4] {tp=Pmax}"), 16, "i32[4] {tp=P}");
  CHECK_FALSE(parseModuleText("t.mgir", sums, diag));
  CHECK(contains(os.str(), "of type i32[4] cannot be partial sums on axis "
                           "'tp'"));
}
