// Properties of the interpreter's ops on random inputs, and its errors.
#include "InterpreterTestSupport.h"

#include <cmath>

using namespace mgc::ir;
using namespace mgc::ir::testing;

TEST_CASE("interp: softmax rows sum to 1 and log_softmax is log(softmax)") {
  InterpFixture f;
  Value *x = f.randomInput("x", {3, 4, 5}, 11);
  for (int64_t axis : {0, 1, 2, -1}) {
    INFO("axis " << axis);
    HostTensor s = f.eval(f.op(OpKind::Softmax, {x}, {{"axis", axis}}));
    HostTensor l = f.eval(f.op(OpKind::LogSoftmax, {x}, {{"axis", axis}}));
    int64_t a = axis < 0 ? axis + 3 : axis;
    std::vector<int64_t> strides{20, 5, 1};
    int64_t dim = x->type().shape[a];
    // Sum along `axis` from every start position whose index there is 0.
    for (int64_t n = 0; n < 60; ++n) {
      if ((n / strides[a]) % dim != 0)
        continue;
      double sum = 0;
      for (int64_t j = 0; j < dim; ++j)
        sum += s.data[n + j * strides[a]];
      CHECK(std::fabs(sum - 1) < 1e-12);
    }
    for (size_t i = 0; i < s.data.size(); ++i)
      CHECK(std::fabs(l.data[i] - std::log(s.data[i])) < 1e-12);
  }
}

TEST_CASE("interp: softmax is stable for large logits") {
  InterpFixture f;
  Value *x = f.input("x", f64({2}), {1000, 1000});
  HostTensor s = f.eval(f.op(OpKind::Softmax, {x}));
  checkExact(s.data, {0.5, 0.5});
}

TEST_CASE("interp: attention equals causal_mask + softmax + matmul") {
  InterpFixture f;
  const int64_t b = 2, h = 3, t = 5, dh = 4;
  Value *q = f.randomInput("q", {b, h, t, dh}, 1);
  Value *k = f.randomInput("k", {b, h, t, dh}, 2);
  Value *v = f.randomInput("v", {b, h, t, dh}, 3);
  HostTensor fused = f.eval(f.op(OpKind::Attention, {q, k, v}));

  Value *kt = f.op(OpKind::Transpose, {k},
                   {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
  Value *scores = f.op(OpKind::Matmul, {q, kt});
  Value *scale = f.op(OpKind::Broadcast,
                      {f.builder.constant(std::sqrt(double(dh)), DType::F64)},
                      {{"shape", std::vector<int64_t>{b, h, t, t}}});
  Value *scaled = f.op(OpKind::Div, {scores, scale});
  Value *p = f.op(OpKind::Softmax, {f.op(OpKind::CausalMask, {scaled})});
  HostTensor composed = f.eval(f.op(OpKind::Matmul, {p, v}));
  checkClose(fused.data, composed.data, 1e-12);
}

TEST_CASE("interp: layernorm output has mean 0 and variance 1") {
  InterpFixture f;
  const int64_t rows = 6, d = 32;
  Value *x = f.randomInput("x", {rows, d}, 5);
  Value *g = f.input("g", f64({d}), std::vector<double>(d, 1.0));
  Value *b = f.input("b", f64({d}), std::vector<double>(d, 0.0));
  double eps = 1e-5;
  HostTensor y = f.eval(f.op(OpKind::Layernorm, {x, g, b}, {{"eps", eps}}));
  const std::vector<double> &in = f.args.at("x").data;
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0, inMean = 0, inVar = 0;
    for (int64_t j = 0; j < d; ++j) {
      mean += y.data[r * d + j] / d;
      inMean += in[r * d + j] / d;
    }
    for (int64_t j = 0; j < d; ++j) {
      var += std::pow(y.data[r * d + j] - mean, 2) / d;
      inVar += std::pow(in[r * d + j] - inMean, 2) / d;
    }
    CHECK(std::fabs(mean) < 1e-12);
    // Exactly 1 but for eps: var(y) = var(x) / (var(x) + eps).
    CHECK(std::fabs(var - inVar / (inVar + eps)) < 1e-12);
    CHECK(std::fabs(var - 1) < 1e-4);
  }
}

TEST_CASE("interp: dropout keeps about 1-p, is deterministic per seed") {
  const int64_t n = 10000;
  const double p = 0.3;
  auto run = [&](int64_t seed) {
    InterpFixture f;
    Value *x = f.input("x", f64({100, 100}), std::vector<double>(n, 1.0));
    return f.eval(f.op(OpKind::Dropout, {x}, {{"p", p}, {"seed", seed}}));
  };
  HostTensor a = run(42), again = run(42), other = run(43);
  int64_t kept = 0;
  for (double v : a.data) {
    CHECK((v == 0.0 || std::fabs(v - 1 / (1 - p)) < 1e-15));
    kept += v != 0.0;
  }
  // Binomial(10000, 0.7): standard deviation ~46; allow 5 of them.
  CHECK(std::abs(kept - 7000) < 230);
  checkExact(again.data, a.data);
  CHECK(other.data != a.data);
}

TEST_CASE("interp: argument errors name the tensor") {
  auto build = [](InterpFixture &f) {
    Value *x = f.module.graph().addInput("x", f32({4, 3}));
    Value *w = f.module.graph().addParam("w", f32({3}), Init{});
    Value *wb =
        f.op(OpKind::Broadcast, {w}, {{"shape", std::vector<int64_t>{4, 3}}});
    return f.op(OpKind::Add, {x, wb});
  };
  SUBCASE("missing") {
    InterpFixture f;
    Value *y = build(f);
    f.args["w"] = HostTensor(f32({3}));
    std::string err = f.evalError(y);
    CHECK(contains(err, "error: missing tensor for input 'x'"));
  }
  SUBCASE("missing parameter") {
    InterpFixture f;
    Value *y = build(f);
    f.args["x"] = HostTensor(f32({4, 3}));
    CHECK(contains(f.evalError(y), "missing tensor for parameter 'w'"));
  }
  SUBCASE("wrong type") {
    InterpFixture f;
    Value *y = build(f);
    f.args["x"] = HostTensor(f32({2, 3}));
    f.args["w"] = HostTensor(f32({3}));
    CHECK(contains(
        f.evalError(y),
        "tensor 'x' has type f32[2, 3] but the model expects f32[4, 3]"));
  }
  SUBCASE("wrong dtype") {
    InterpFixture f;
    Value *y = build(f);
    f.args["x"] = HostTensor(f32({4, 3}));
    f.args["w"] = HostTensor(f64({3}));
    CHECK(contains(f.evalError(y),
                   "tensor 'w' has type f64[3] but the model expects f32[3]"));
  }
  SUBCASE("extra") {
    InterpFixture f;
    Value *y = build(f);
    f.args["x"] = HostTensor(f32({4, 3}));
    f.args["w"] = HostTensor(f32({3}));
    f.args["bias"] = HostTensor(f32({3}));
    CHECK(contains(f.evalError(y),
                   "tensor 'bias' is not an input or parameter of the model"));
  }
  SUBCASE("wrong number of values") {
    InterpFixture f;
    Value *y = build(f);
    f.args["x"] = HostTensor(f32({4, 3}), {1, 2, 3});
    f.args["w"] = HostTensor(f32({3}));
    CHECK(contains(f.evalError(y),
                   "tensor 'x' has 3 values but its type f32[4, 3] needs 12"));
  }
  SUBCASE("all problems are reported") {
    InterpFixture f;
    Value *y = build(f);
    f.args["w"] = HostTensor(f32({4}));
    f.args["z"] = HostTensor(f32({4}));
    f.evalError(y);
    CHECK(f.diag.errorCount() == 3);
  }
}

TEST_CASE("interp: integer arguments must hold integers of their dtype") {
  InterpFixture f;
  Value *ids = f.input("ids", i32({3}), {1, 2.5, 3});
  Value *table = f.param("table", f64({4, 2}), std::vector<double>(8, 0.0));
  std::string err = f.evalError(f.op(OpKind::Embedding, {table, ids}));
  CHECK(contains(err, "tensor 'ids' holds 2.5 in element 1, which is not an "
                      "i32 value"));
  InterpFixture g;
  Value *big = g.input("big", i32({1}), {3e9});
  CHECK(contains(g.evalError(g.op(OpKind::Neg, {big})),
                 "tensor 'big' holds 3000000000 in element 0"));
}

TEST_CASE("interp: ids and targets out of range name the op and tensor") {
  InterpFixture f;
  f.builder.setLoc(mgc::Loc::make("model.mg", 7, 9));
  Value *table = f.param("wte", f64({50, 2}), std::vector<double>(100, 0.0));
  Value *ids = f.input("ids", i32({5}), {0, 49, 3, 57, 1});
  std::string err = f.evalError(f.op(OpKind::Embedding, {table, ids}));
  CHECK(contains(err, "model.mg:7:9: error: embedding id 57 is out of range "
                      "[0, 50) in element 3 of input 'ids'"));

  InterpFixture g;
  Value *logits = g.randomInput("logits", {2, 3}, 1);
  Value *y = g.input("y", i32({2}), {2, -1});
  CHECK(contains(g.evalError(g.op(OpKind::CrossEntropy, {logits, y})),
                 "cross_entropy target -1 is out of range [0, 3) in element 1 "
                 "of input 'y'"));

  // Ids computed inside the graph are named by the op that made them.
  InterpFixture h;
  Value *t = h.param("t", f64({4, 2}), std::vector<double>(8, 0.0));
  Value *x = h.input("x", f64({2}), {1.5, 4.25});
  h.builder.setLoc(mgc::Loc::make("model.mg", 3, 1));
  Value *c = h.op(OpKind::Cast, {x}, {{"dtype", std::string("i32")}});
  h.builder.setLoc(mgc::Loc::make("model.mg", 4, 1));
  std::string err2 = h.evalError(h.op(OpKind::Embedding, {t, c}));
  CHECK(contains(err2, "model.mg:4:1: error: embedding id 4 is out of range "
                       "[0, 4) in element 1 of the result of cast at "
                       "model.mg:3:1"));
}

TEST_CASE("interp: numeric errors of integer ops") {
  InterpFixture f;
  Value *x = f.input("x", f64({2}), {1, std::nan("")});
  CHECK(contains(
      f.evalError(f.op(OpKind::Cast, {x}, {{"dtype", std::string("i64")}})),
      "cast of nan to i64 is out of range in element 1 of input 'x'"));
  InterpFixture g;
  Value *big = g.input("big", f64({1}), {3e9});
  CHECK(contains(
      g.evalError(g.op(OpKind::Cast, {big}, {{"dtype", std::string("i32")}})),
      "cast of 3000000000 to i32 is out of range"));
  InterpFixture h;
  Value *a = h.input("a", i32({2}), {1, 2});
  Value *b = h.input("b", i32({2}), {1, 0});
  CHECK(contains(h.evalError(h.op(OpKind::Div, {a, b})),
                 "integer division by zero in element 1 of input 'b'"));
}

TEST_CASE("interp: an unverified module is reported, not a crash") {
  SUBCASE("wrong declared result type") {
    InterpFixture f;
    Value *x = f.input("x", f64({2, 3}), std::vector<double>(6, 1.0));
    Op *op = f.module.graph().createOp(OpKind::Neg, {x}, {}, f64({4, 4}));
    CHECK(contains(f.evalError(op->result()),
                   "op %0 (neg) declares result type f64[4, 4] but its "
                   "operands give f64[2, 3]"));
  }
  SUBCASE("operand defined later") {
    InterpFixture f;
    Value *x = f.input("x", f64({2}), {1, 2});
    Op *first = f.module.graph().createOp(OpKind::Neg, {x}, {}, f64({2}));
    Op *second = f.module.graph().createOp(OpKind::Neg, {x}, {}, f64({2}));
    first->setOperand(0, second->result());
    CHECK(contains(f.evalError(first->result()),
                   "op %0 (neg) uses operand 0 before it is defined"));
  }
  SUBCASE("missing attribute") {
    InterpFixture f;
    Value *x = f.input("x", f64({2}), {1, 2});
    Op *op = f.module.graph().createOp(OpKind::Softmax, {x}, {}, f64({2}));
    CHECK(contains(f.evalError(op->result()), "needs attribute 'axis'"));
  }
}

TEST_CASE("interp: empty tensors and results that are not outputs") {
  InterpFixture f;
  Value *x = f.input("x", f64({0, 3}), {});
  Value *s = f.op(OpKind::Softmax, {x});
  Value *m = f.op(OpKind::Matmul, {s, f.randomInput("w", {3, 2}, 1)});
  HostTensor r = f.eval(m);
  CHECK(r.data.empty());
  // Several outputs, one of them an argument, one an intermediate value.
  InterpFixture g;
  Value *a = g.input("a", f64({2}), {1, 2});
  Value *e = g.op(OpKind::Exp, {a});
  Value *n = g.op(OpKind::Neg, {e});
  g.op(OpKind::Sqrt, {n}); // dead
  g.module.graph().addOutput("a", a);
  g.module.graph().addOutput("e", e);
  g.module.graph().addOutput("n", n);
  auto out = interpret(g.module, g.args, g.diag);
  REQUIRE(out.succeeded());
  checkExact(out->at("a").data, {1, 2});
  checkExact(out->at("e").data, {std::exp(1.0), std::exp(2.0)});
  checkExact(out->at("n").data, {-std::exp(1.0), -std::exp(2.0)});
}
