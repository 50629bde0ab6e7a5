// Gradient checks: every differentiable op kind against central finite
// differences in float64, through autodiff and the interpreter.
#include "GradCheckSupport.h"

#include "passes/GradRules.h"

#include <cmath>
#include <map>

using namespace mgc;
using namespace mgc::gradcheck;
using Ints = std::vector<int64_t>;

namespace {

using Builder = std::function<void(GradCase &)>;

Attrs reduceAttrs(Ints axes, bool keepdims) {
  return Attrs{{"axes", axes}, {"keepdims", keepdims}};
}

Builder unary(OpKind kind, double lo = -2, double hi = 2, Attrs attrs = {}) {
  return [=](GradCase &c) {
    c.finish(c.op(kind, {c.param("x", {2, 3}, lo, hi)}, attrs));
  };
}

Builder binary(OpKind kind, double lo = -2, double hi = 2) {
  return [=](GradCase &c) {
    c.finish(c.op(kind, {c.param("a", {2, 3}), c.param("b", {2, 3}, lo, hi)}));
  };
}

// q k^T / sqrt(Dh), causal mask, softmax, @ v: the composed form the
// frontend lowers causal_attention to.
Value *composedAttention(GradCase &c, Value *q, Value *k, Value *v) {
  int64_t rank = q->type().rank();
  Ints perm;
  for (int64_t d = 0; d < rank; ++d)
    perm.push_back(d);
  std::swap(perm[rank - 1], perm[rank - 2]);
  Value *s =
      c.op(OpKind::Matmul, {q, c.op(OpKind::Transpose, {k}, {{"perm", perm}})});
  double scale = 1.0 / std::sqrt(double(q->type().shape.back()));
  Value *sc =
      c.op(OpKind::Broadcast, {c.b.constant(scale, DType::F64)},
           {{"shape", Ints(s->type().shape.begin(), s->type().shape.end())}});
  Value *p = c.op(OpKind::Softmax,
                  {c.op(OpKind::CausalMask, {c.op(OpKind::Mul, {s, sc})})});
  return c.op(OpKind::Matmul, {p, v});
}

// Every case: a name and how to build its graph.
const std::vector<std::pair<std::string, Builder>> &allCases() {
  static const std::vector<std::pair<std::string, Builder>> cases = {
      {"cast f32 -> f64",
       [](GradCase &c) {
         Value *x = c.param("x", {2, 3}, -2, 2, DType::F32);
         c.finish(c.op(OpKind::Cast, {x}, {{"dtype", std::string("f64")}}));
       }},
      {"cast to the same type",
       unary(OpKind::Cast, -2, 2, {{"dtype", std::string("f64")}})},
      {"add", binary(OpKind::Add)},
      {"sub", binary(OpKind::Sub)},
      {"mul", binary(OpKind::Mul)},
      {"div", binary(OpKind::Div, 0.5, 2)},
      {"neg", unary(OpKind::Neg)},
      {"exp", unary(OpKind::Exp)},
      {"log", unary(OpKind::Log, 0.5, 2.5)},
      {"sqrt", unary(OpKind::Sqrt, 0.5, 2.5)},
      {"rsqrt", unary(OpKind::Rsqrt, 0.5, 2.5)},
      {"tanh", unary(OpKind::Tanh)},
      {"relu", unary(OpKind::Relu)},
      {"gelu", unary(OpKind::Gelu, -3, 3)},
      {"sigmoid", unary(OpKind::Sigmoid, -3, 3)},
      {"sin", unary(OpKind::Sin, -4, 4)},
      {"cos", unary(OpKind::Cos, -4, 4)},
      // Away from 0, where |x| has no derivative (sign gives 0 there).
      {"abs", unary(OpKind::Abs, 0.2, 2)},
      {"abs of negatives", unary(OpKind::Abs, -2, -0.2)},
      {"softplus", unary(OpKind::Softplus, -6, 6)},
      {"pow of a positive base",
       [](GradCase &c) {
         c.finish(c.op(OpKind::Pow, {c.param("a", {2, 3}, 0.3, 2),
                                     c.param("b", {2, 3}, -2, 2)}));
       }},
      {"minimum", binary(OpKind::Minimum)},
      {"maximum", binary(OpKind::Maximum)},
      {"mode_select (the training step's choice: the train operand)",
       binary(OpKind::ModeSelect)},
      {"where",
       [](GradCase &c) {
         Value *cond = c.ints("c", {2, 3}, {1, 0, 0, 1, 1, 0});
         c.finish(c.op(OpKind::Where,
                       {cond, c.param("a", {2, 3}), c.param("b", {2, 3})}));
       }},
      {"where on a condition computed from a parameter (zero gradient)",
       [](GradCase &c) {
         Value *x = c.param("x", {2, 3}, -2, 2);
         Value *cond = c.op(OpKind::Sign, {c.op(OpKind::Relu, {x})});
         c.finish(c.op(OpKind::Where, {cond, x, c.param("b", {2, 3})}));
       }},
      {"sign (its gradient is zero)",
       [](GradCase &c) {
         Value *x = c.param("x", {2, 3}, 0.2, 2);
         c.finish(c.op(OpKind::Mul, {x, c.op(OpKind::Sign, {x})}));
       }},
      {"dropout p = 0.3",
       [](GradCase &c) {
         c.finish(c.op(OpKind::Dropout, {c.param("x", {4, 5})},
                       {{"p", 0.3}, {"seed", int64_t(11)}}));
       }},
      {"a value used several times",
       [](GradCase &c) {
         Value *x = c.param("x", {3, 2});
         Value *xx = c.op(OpKind::Mul, {x, x});
         c.finish(c.op(OpKind::Add, {xx, c.op(OpKind::Tanh, {x})}));
       }},
      {"softmax on the last axis", unary(OpKind::Softmax)},
      {"softmax on the first axis",
       [](GradCase &c) {
         c.finish(c.op(OpKind::Softmax, {c.param("x", {3, 2, 4})},
                       {{"axis", int64_t(0)}}));
       }},
      {"log_softmax on the last axis", unary(OpKind::LogSoftmax)},
      {"log_softmax on a middle axis",
       [](GradCase &c) {
         c.finish(c.op(OpKind::LogSoftmax, {c.param("x", {2, 3, 4})},
                       {{"axis", int64_t(1)}}));
       }},
      {"layernorm",
       [](GradCase &c) {
         c.finish(c.op(OpKind::Layernorm,
                       {c.param("x", {2, 3, 4}),
                        c.param("gamma", {4}, 0.5, 1.5), c.param("beta", {4})},
                       {{"eps", 1e-5}}));
       }},
      {"layernorm of a vector",
       [](GradCase &c) {
         c.finish(c.op(
             OpKind::Layernorm,
             {c.param("x", {5}), c.param("gamma", {5}), c.param("beta", {5})},
             {{"eps", 1e-3}}));
       }},
      {"rmsnorm",
       [](GradCase &c) {
         c.finish(
             c.op(OpKind::Rmsnorm,
                  {c.param("x", {2, 3, 4}), c.param("gamma", {4}, 0.5, 1.5)},
                  {{"eps", 1e-5}}));
       }},
      {"conv2d with stride, padding, dilation and groups",
       [](GradCase &c) {
         c.finish(c.op(OpKind::Conv2d,
                       {c.param("x", {2, 4, 6, 5}), c.param("w", {4, 2, 3, 2})},
                       {{"stride", Ints{2, 1}},
                        {"padding", Ints{1, 1}},
                        {"dilation", Ints{1, 2}},
                        {"groups", int64_t(2)}}));
       }},
      {"conv2d",
       [](GradCase &c) {
         c.finish(c.op(OpKind::Conv2d, {c.param("x", {1, 2, 4, 4}),
                                        c.param("w", {3, 2, 2, 2})}));
       }},
      {"max_pool2d",
       [](GradCase &c) {
         c.finish(c.op(OpKind::MaxPool2d, {c.param("x", {2, 2, 5, 5})},
                       {{"kernel", Ints{3, 3}},
                        {"stride", Ints{2, 2}},
                        {"padding", Ints{1, 1}}}));
       }},
      {"avg_pool2d counting padding",
       [](GradCase &c) {
         c.finish(c.op(OpKind::AvgPool2d, {c.param("x", {2, 2, 5, 4})},
                       {{"kernel", Ints{3, 2}},
                        {"stride", Ints{1, 2}},
                        {"padding", Ints{1, 1}}}));
       }},
      {"avg_pool2d not counting padding",
       [](GradCase &c) {
         c.finish(c.op(OpKind::AvgPool2d, {c.param("x", {2, 2, 5, 4})},
                       {{"kernel", Ints{3, 3}},
                        {"stride", Ints{2, 1}},
                        {"padding", Ints{1, 1}},
                        {"count_include_pad", false}}));
       }},
      {"rope, and rope backwards",
       [](GradCase &c) {
         Value *pos = c.ints("pos", {3}, {0, 5, 2});
         Value *x = c.param("x", {2, 3, 6});
         Value *turned = c.op(OpKind::Rope, {x, pos}, {{"theta", 50.0}});
         c.finish(c.op(OpKind::Rope, {c.op(OpKind::Mul, {turned, turned}), pos},
                       {{"theta", 50.0}, {"inverse", true}}));
       }},
      {"matmul",
       [](GradCase &c) {
         c.finish(c.op(OpKind::Matmul,
                       {c.param("a", {2, 3}), c.param("b", {3, 4})}));
       }},
      {"batched matmul",
       [](GradCase &c) {
         c.finish(c.op(OpKind::Matmul, {c.param("a", {2, 2, 3, 4}),
                                        c.param("b", {2, 2, 4, 3})}));
       }},
      {"matmul with a shared b",
       [](GradCase &c) {
         c.finish(c.op(OpKind::Matmul,
                       {c.param("a", {2, 3, 4}), c.param("b", {4, 5})}));
       }},
      {"matmul of a value with itself",
       [](GradCase &c) {
         Value *a = c.param("a", {3, 3});
         c.finish(c.op(OpKind::Matmul, {a, a}));
       }},
      {"embedding with repeated ids",
       [](GradCase &c) {
         Value *table = c.param("table", {5, 3});
         Value *ids = c.ints("ids", {2, 3}, {1, 4, 1, 0, 1, 4});
         c.finish(c.op(OpKind::Embedding, {table, ids}));
       }},
      {"reshape",
       [](GradCase &c) {
         c.finish(c.op(OpKind::Reshape, {c.param("x", {2, 3, 2})},
                       {{"shape", Ints{3, 4}}}));
       }},
      {"transpose",
       [](GradCase &c) {
         c.finish(c.op(OpKind::Transpose, {c.param("x", {2, 3, 4})},
                       {{"perm", Ints{2, 0, -2}}}));
       }},
      {"slice in the middle",
       [](GradCase &c) {
         c.finish(c.op(OpKind::Slice, {c.param("x", {3, 5})},
                       {{"axis", int64_t(-1)},
                        {"start", int64_t(1)},
                        {"end", int64_t(3)}}));
       }},
      {"slice at the ends",
       [](GradCase &c) {
         Value *x = c.param("x", {4, 2});
         Value *head = c.op(OpKind::Slice, {x},
                            {{"axis", int64_t(0)},
                             {"start", int64_t(0)},
                             {"end", int64_t(1)}});
         Value *tail = c.op(OpKind::Slice, {x},
                            {{"axis", int64_t(0)},
                             {"start", int64_t(3)},
                             {"end", int64_t(4)}});
         Value *all = c.op(OpKind::Slice, {x},
                           {{"axis", int64_t(0)},
                            {"start", int64_t(0)},
                            {"end", int64_t(4)}});
         Value *ends = c.op(OpKind::Mul, {head, tail});
         c.finish(c.op(OpKind::Concat, {ends, all}, {{"axis", int64_t(0)}}));
       }},
      {"concat",
       [](GradCase &c) {
         Value *a = c.param("a", {2, 1, 3}), *b = c.param("b", {2, 2, 3});
         c.finish(c.op(OpKind::Concat, {a, b, a}, {{"axis", int64_t(1)}}));
       }},
      {"broadcast of a vector, a column and a scalar",
       [](GradCase &c) {
         Value *row = c.op(OpKind::Broadcast, {c.param("row", {3})},
                           {{"shape", Ints{2, 3}}});
         Value *col = c.op(OpKind::Broadcast, {c.param("col", {2, 1})},
                           {{"shape", Ints{2, 3}}});
         Value *s = c.op(OpKind::Broadcast, {c.param("s", {})},
                         {{"shape", Ints{2, 3}}});
         c.finish(c.op(OpKind::Mul, {c.op(OpKind::Add, {row, col}), s}));
       }},
      {"broadcast with new leading axes",
       [](GradCase &c) {
         c.finish(c.op(OpKind::Broadcast, {c.param("x", {1, 3})},
                       {{"shape", Ints{2, 4, 3}}}));
       }},
      {"sum over one axis",
       [](GradCase &c) {
         c.finish(c.op(OpKind::Sum, {c.param("x", {2, 3, 4})},
                       reduceAttrs({1}, false)));
       }},
      {"sum with keepdims",
       [](GradCase &c) {
         c.finish(c.op(OpKind::Sum, {c.param("x", {2, 3, 4})},
                       reduceAttrs({0, -1}, true)));
       }},
      {"sum over no axes",
       [](GradCase &c) {
         c.finish(
             c.op(OpKind::Sum, {c.param("x", {2, 3})}, reduceAttrs({}, false)));
       }},
      {"mean over every axis",
       [](GradCase &c) {
         c.finish(c.op(OpKind::Mean, {c.param("x", {2, 3, 4})},
                       reduceAttrs({0, 1, 2}, false)));
       }},
      {"mean with keepdims",
       [](GradCase &c) {
         c.finish(c.op(OpKind::Mean, {c.param("x", {2, 3, 4})},
                       reduceAttrs({1}, true)));
       }},
      {"max over one axis",
       [](GradCase &c) {
         c.finish(c.op(OpKind::Max, {c.param("x", {2, 3, 4})},
                       reduceAttrs({2}, false)));
       }},
      {"max with keepdims",
       [](GradCase &c) {
         c.finish(c.op(OpKind::Max, {c.param("x", {2, 3, 4})},
                       reduceAttrs({0, 2}, true)));
       }},
      {"cross_entropy over several positions",
       [](GradCase &c) {
         Value *logits = c.param("logits", {2, 3, 5});
         Value *targets = c.ints("targets", {2, 3}, {0, 4, 2, 2, 1, 3});
         c.finish(c.op(OpKind::CrossEntropy, {logits, targets}));
       }},
      {"mse",
       [](GradCase &c) {
         c.finish(
             c.op(OpKind::Mse, {c.param("a", {3, 2}), c.param("b", {3, 2})}));
       }},
      {"causal_mask then softmax",
       [](GradCase &c) {
         c.finish(c.op(OpKind::Softmax,
                       {c.op(OpKind::CausalMask, {c.param("s", {2, 3, 3})})}));
       }},
      {"attention",
       [](GradCase &c) {
         c.finish(c.op(OpKind::Attention,
                       {c.param("q", {2, 3, 4}), c.param("k", {2, 3, 4}),
                        c.param("v", {2, 3, 4})}));
       }},
      {"attention of one head",
       [](GradCase &c) {
         Value *x = c.param("x", {4, 2});
         c.finish(c.op(OpKind::Attention, {x, c.param("k", {4, 2}), x}));
       }},
      {"composed attention",
       [](GradCase &c) {
         c.finish(composedAttention(c, c.param("q", {2, 2, 3, 4}),
                                    c.param("k", {2, 2, 3, 4}),
                                    c.param("v", {2, 2, 3, 4})));
       }},
  };
  return cases;
}

} // namespace

TEST_CASE("gradcheck: every op kind has a gradient rule or a reason") {
  std::set<OpKind> checked;
  for (const auto &[name, build] : allCases()) {
    GradCase c;
    build(c);
    std::set<OpKind> k = c.kinds();
    checked.insert(k.begin(), k.end());
  }
  for (const OpInfo &info : allOpInfos()) {
    INFO("op " << info.name.str());
    const passes::GradRuleInfo &rule = passes::gradRuleInfo(info.kind);
    CHECK(rule.kind == info.kind);
    if (rule.rule) {
      CHECK(rule.reason.empty());
      // Every differentiable op appears in a gradient check below.
      CHECK(checked.count(info.kind) == 1);
    } else {
      CHECK(!rule.reason.empty());
    }
  }
  // The ops a language user writes are differentiable, except constants
  // and index tensors (no operands).
  for (const OpInfo &info : allOpInfos())
    if (!info.has(kInternal) && info.kind != OpKind::Constant &&
        info.kind != OpKind::Iota) {
      INFO("op " << info.name.str());
      CHECK(passes::isDifferentiable(info.kind));
    }
}

TEST_CASE("gradcheck: every op against finite differences") {
  for (const auto &[name, build] : allCases()) {
    INFO("case: " << name);
    GradCase c;
    build(c);
    differentiateOrFail(c.module);
    size_t n = compareWithFiniteDifferences(c.module, c.module, c.args);
    CHECK(n > 0);
  }
}

TEST_CASE("gradcheck: the comparison catches a wrong gradient") {
  // The same check with one gradient element off by 1e-4 relative must
  // fail: the tolerance is tight enough to see a wrong rule.
  CHECK(gradClose(0.5, 0.5 + 1e-9, 1.0));
  CHECK(!gradClose(0.5, 0.5 * (1 + 1e-4), 1.0));
  CHECK(!gradClose(0.0, 1e-6, 1.0));
  // A gradient rule that dropped the factor 2 of d(x^2)/dx would be caught.
  GradCase c;
  Value *x = c.param("x", {3});
  c.finish(c.op(OpKind::Mul, {x, x}));
  differentiateOrFail(c.module);
  TensorMap grads = evaluate(c.module, c.args);
  const HostTensor &g = grads.at("grad.x");
  const HostTensor &w = c.args.at("weights");
  for (size_t i = 0; i < 3; ++i) {
    double xi = c.args.at("x").data[i];
    CHECK(std::fabs(g.data[i] - 2 * xi * w.data[i]) <= 1e-12);
    CHECK(!gradClose(xi * w.data[i], 2 * xi * w.data[i], 1.0));
  }
}
