// The sharding rules against the interpreter: for a representative op of
// every kind and every signature its rule lists on axes of size 2, 3 and
// weighted 2, each device computes the localized op on its parts, and the
// parts combined by the result placement equal the logical op.
#include "ShardingTestSupport.h"

#include "ir/Builder.h"
#include "ir/Interpreter.h"
#include "support/Random.h"

#include "llvm/Support/raw_ostream.h"

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

using namespace mgc;
using namespace mgc::ir;
using mgc::passes::legalSignatures;
using mgc::passes::localizeOp;
using mgc::passes::ShardingSignature;
using namespace mgc::shardtest;

namespace {

// One logical op whose operands are all inputs of its module, with their
// data.
struct Case {
  std::string name;
  Module module;
  Builder builder{module.graph()};
  TensorMap args;
  uint64_t seed = 1;
  Op *op = nullptr;

  Value *input(TensorType type, std::vector<double> data) {
    std::string n = "x" + std::to_string(args.size());
    Value *v = module.graph().addInput(n, type);
    args[n] = HostTensor(type, std::move(data));
    return v;
  }
  // Uniform in [lo, hi).
  Value *rand(Shape shape, double lo = -2, double hi = 2) {
    TensorType type(DType::F64, shape);
    std::vector<double> data(static_cast<size_t>(type.size()));
    uint64_t stream = hashName(name) + args.size();
    for (size_t i = 0; i < data.size(); ++i)
      data[i] = lo + (hi - lo) * uniform01(seed, stream, i);
    return input(type, std::move(data));
  }
  Value *positive(Shape shape) { return rand(shape, 0.5, 2.5); }
  // Integers in [0, bound): valid ids or class targets.
  Value *ids(Shape shape, int64_t bound) {
    TensorType type(DType::I64, shape);
    std::vector<double> data(static_cast<size_t>(type.size()));
    uint64_t stream = hashName(name) + args.size();
    for (size_t i = 0; i < data.size(); ++i)
      data[i] = static_cast<double>(randomBits(seed, stream, i) %
                                    static_cast<uint64_t>(bound));
    return input(type, std::move(data));
  }
  // Whole numbers in [lo, hi) as f64: ties between two such tensors.
  Value *wholes(Shape shape, int64_t lo, int64_t hi) {
    std::vector<double> data(
        static_cast<size_t>(TensorType(DType::F64, shape).size()));
    uint64_t stream = hashName(name) + args.size();
    for (size_t i = 0; i < data.size(); ++i)
      data[i] = static_cast<double>(lo) +
                static_cast<double>(randomBits(seed, stream, i) %
                                    static_cast<uint64_t>(hi - lo));
    return input(TensorType(DType::F64, shape), std::move(data));
  }
  // Integers in [lo, hi).
  Value *intsIn(Shape shape, int64_t lo, int64_t hi) {
    Value *v = ids(shape, hi - lo);
    for (double &x : args.at(v->name()).data)
      x += static_cast<double>(lo);
    return v;
  }
  void make(OpKind kind, llvm::ArrayRef<Value *> operands, Attrs attrs = {}) {
    ValueOrError r = builder.create(kind, operands, std::move(attrs));
    INFO(name << ": " << r.error);
    REQUIRE(r.ok());
    op = r.value->definingOp();
  }
};

// Evaluates the single output "out" of `m`.
HostTensor evalOut(Module &m, Value *v, const TensorMap &args) {
  m.graph().outputs().clear();
  m.graph().addOutput("out", v);
  std::string text;
  llvm::raw_string_ostream os(text);
  DiagnosticEngine diag(os);
  FailureOr<TensorMap> r = interpret(m, args, diag);
  INFO(os.str());
  REQUIRE(r.succeeded());
  return r->at("out");
}

// The result of `kind` on data, by the interpreter (for operands that must
// be consistent, such as y = max(x) of max_grad).
HostTensor evalOp(OpKind kind, const std::vector<HostTensor> &operands,
                  Attrs attrs = {}) {
  Module m;
  Builder b(m.graph());
  TensorMap args;
  std::vector<Value *> vs;
  for (size_t i = 0; i < operands.size(); ++i) {
    std::string n = "a" + std::to_string(i);
    vs.push_back(m.graph().addInput(n, operands[i].type));
    args[n] = operands[i];
  }
  ValueOrError r = b.create(kind, vs, std::move(attrs));
  REQUIRE(r.ok());
  return evalOut(m, r.value, args);
}

using CaseFn = std::function<void(Case &)>;

struct CaseDef {
  std::string name;
  CaseFn build;
};

Attrs shapeAttr(const char *name, Ints v) { return {{name, v}}; }

std::vector<CaseDef> caseDefs() {
  std::vector<CaseDef> defs;
  auto add = [&](std::string name, CaseFn fn) {
    defs.push_back({std::move(name), std::move(fn)});
  };
  add("constant", [](Case &c) {
    c.make(OpKind::Constant, {},
           {{"value", 2.5}, {"dtype", std::string("f64")}});
  });
  for (const char *dt : {"f64", "f32", "i64"})
    add(std::string("cast to ") + dt, [dt](Case &c) {
      c.make(OpKind::Cast, {c.rand({5, 4}, -40, 40)},
             {{"dtype", std::string(dt)}});
    });
  for (OpKind k : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Minimum,
                   OpKind::Maximum, OpKind::ReluGrad, OpKind::GeluGrad,
                   OpKind::SigmoidGrad, OpKind::TanhGrad})
    add(opName(k).str(), [k](Case &c) {
      c.make(k, {c.rand({5, 4}), c.rand({5, 4})});
    });
  add("div", [](Case &c) {
    c.make(OpKind::Div, {c.rand({5, 4}), c.positive({5, 4})});
  });
  for (OpKind k : {OpKind::Neg, OpKind::Exp, OpKind::Tanh, OpKind::Relu,
                   OpKind::Gelu, OpKind::Sigmoid, OpKind::Cos})
    add(opName(k).str(), [k](Case &c) { c.make(k, {c.rand({4, 3, 5})}); });
  for (OpKind k : {OpKind::Sin, OpKind::Abs, OpKind::Sign, OpKind::Softplus})
    add(opName(k).str(), [k](Case &c) { c.make(k, {c.rand({4, 3, 5})}); });
  add("pow", [](Case &c) {
    c.make(OpKind::Pow, {c.positive({5, 4}), c.rand({5, 4})});
  });
  add("mode_select", [](Case &c) {
    c.make(OpKind::ModeSelect, {c.rand({5, 4}), c.rand({5, 4})});
  });
  add("where", [](Case &c) {
    c.make(OpKind::Where,
           {c.intsIn({5, 4}, 0, 2), c.rand({5, 4}), c.rand({5, 4})});
  });
  add("iota", [](Case &c) {
    c.make(OpKind::Iota, {},
           {{"shape", Ints{5, 4}},
            {"axis", int64_t(1)},
            {"dtype", std::string("f64")}});
  });
  for (bool isMax : {false, true})
    add(isMax ? "minmax_grad maximum" : "minmax_grad", [isMax](Case &c) {
      c.make(OpKind::MinMaxGrad,
             {c.rand({5, 4}), c.wholes({5, 4}, -2, 2), c.wholes({5, 4}, -2, 2)},
             {{"maximum", isMax}});
    });
  for (OpKind k : {OpKind::Log, OpKind::Sqrt, OpKind::Rsqrt})
    add(opName(k).str(), [k](Case &c) { c.make(k, {c.positive({5, 4})}); });
  // Integer arithmetic: a truncating division or mean is not linear.
  for (OpKind k : {OpKind::Add, OpKind::Mul, OpKind::Div})
    add(opName(k).str() + " i64", [k](Case &c) {
      c.make(k, {c.intsIn({5, 4}, -50, 50), c.intsIn({5, 4}, 1, 7)});
    });
  for (OpKind k : {OpKind::Sum, OpKind::Mean})
    add(opName(k).str() + " i64", [k](Case &c) {
      c.make(k, {c.intsIn({5, 4}, -50, 50)},
             {{"axes", Ints{1}}, {"keepdims", false}});
    });
  add("neg scalar", [](Case &c) { c.make(OpKind::Neg, {c.rand({})}); });
  add("dropout", [](Case &c) {
    c.make(OpKind::Dropout, {c.rand({5, 4})},
           {{"p", 0.25}, {"seed", int64_t(7)}});
  });
  for (OpKind k : {OpKind::Softmax, OpKind::LogSoftmax})
    for (int64_t axis : {-1, 0})
      add(opName(k).str() + " axis " + std::to_string(axis),
          [k, axis](Case &c) {
            c.make(k, {c.rand({5, 6})}, {{"axis", axis}});
          });
  for (OpKind k : {OpKind::SoftmaxGrad, OpKind::LogSoftmaxGrad})
    for (int64_t axis : {-1, 1})
      add(opName(k).str() + " axis " + std::to_string(axis),
          [k, axis](Case &c) {
            c.make(k, {c.rand({4, 5, 6}), c.rand({4, 5, 6}, 0.05, 0.9)},
                   {{"axis", axis}});
          });
  add("layernorm", [](Case &c) {
    c.make(OpKind::Layernorm, {c.rand({4, 5, 6}), c.rand({6}), c.rand({6})},
           {{"eps", 1e-5}});
  });
  add("rmsnorm", [](Case &c) {
    c.make(OpKind::Rmsnorm, {c.rand({4, 5, 6}), c.rand({6})}, {{"eps", 1e-5}});
  });
  add("rope", [](Case &c) {
    c.make(OpKind::Rope, {c.rand({4, 2, 6, 8}), c.ids({6}, 40)},
           {{"theta", 10000.0}});
  });
  add("rmsnorm_grad_x", [](Case &c) {
    c.make(OpKind::RmsnormGradX, {c.rand({5, 6}), c.rand({5, 6}), c.rand({6})},
           {{"eps", 1e-5}});
  });
  add("layernorm_grad_x", [](Case &c) {
    c.make(OpKind::LayernormGradX,
           {c.rand({5, 6}), c.rand({5, 6}), c.rand({6})}, {{"eps", 1e-5}});
  });
  // Images [N, C, H, W]: the batch, the output channels and the input
  // channels split; grouped convolutions split by whole groups.
  const Attrs pad1{{"padding", Ints{1, 1}}};
  const Attrs grouped{{"stride", Ints{2, 1}},
                      {"padding", Ints{1, 0}},
                      {"groups", int64_t(3)}};
  const Attrs pool{{"kernel", Ints{3, 3}},
                   {"stride", Ints{2, 2}},
                   {"padding", Ints{1, 1}}};
  auto with = [](Attrs a, const char *name, AttrValue v) {
    a.set(name, std::move(v));
    return a;
  };
  add("conv2d", [=](Case &c) {
    c.make(OpKind::Conv2d, {c.rand({4, 6, 5, 5}), c.rand({6, 6, 3, 3})}, pad1);
  });
  add("conv2d grouped", [=](Case &c) {
    c.make(OpKind::Conv2d, {c.rand({2, 6, 5, 4}), c.rand({6, 2, 3, 3})},
           grouped);
  });
  add("conv2d_grad_x", [=](Case &c) {
    c.make(OpKind::Conv2dGradX, {c.rand({4, 6, 5, 5}), c.rand({6, 6, 3, 3})},
           with(pad1, "in_hw", Ints{5, 5}));
  });
  add("conv2d_grad_x grouped", [=](Case &c) {
    c.make(OpKind::Conv2dGradX, {c.rand({2, 6, 3, 2}), c.rand({6, 2, 3, 3})},
           with(grouped, "in_hw", Ints{5, 4}));
  });
  add("conv2d_grad_w", [=](Case &c) {
    c.make(OpKind::Conv2dGradW, {c.rand({4, 6, 5, 5}), c.rand({4, 6, 5, 5})},
           with(pad1, "kernel", Ints{3, 3}));
  });
  add("conv2d_grad_w grouped", [=](Case &c) {
    c.make(OpKind::Conv2dGradW, {c.rand({2, 6, 3, 2}), c.rand({2, 6, 5, 4})},
           with(grouped, "kernel", Ints{3, 3}));
  });
  add("max_pool2d", [=](Case &c) {
    c.make(OpKind::MaxPool2d, {c.rand({4, 6, 5, 5})}, pool);
  });
  add("avg_pool2d", [=](Case &c) {
    c.make(OpKind::AvgPool2d, {c.rand({4, 6, 5, 5})}, pool);
  });
  add("max_pool2d_grad", [=](Case &c) {
    c.make(OpKind::MaxPool2dGrad, {c.rand({4, 6, 3, 3}), c.rand({4, 6, 5, 5})},
           pool);
  });
  add("avg_pool2d_grad", [=](Case &c) {
    c.make(OpKind::AvgPool2dGrad, {c.rand({4, 6, 3, 3})},
           with(pool, "in_hw", Ints{5, 5}));
  });
  add("matmul 2d", [](Case &c) {
    c.make(OpKind::Matmul, {c.rand({5, 6}), c.rand({6, 7})});
  });
  add("matmul 3d @ 2d", [](Case &c) {
    c.make(OpKind::Matmul, {c.rand({4, 5, 6}), c.rand({6, 3})});
  });
  add("matmul batched", [](Case &c) {
    c.make(OpKind::Matmul, {c.rand({4, 3, 5, 6}), c.rand({4, 3, 6, 2})});
  });
  add("embedding", [](Case &c) {
    c.make(OpKind::Embedding, {c.rand({7, 4}), c.ids({4, 5}, 7)});
  });
  add("embedding_grad", [](Case &c) {
    c.make(OpKind::EmbeddingGrad, {c.rand({4, 5, 3}), c.ids({4, 5}, 7)},
           {{"rows", int64_t(7)}});
  });
  add("reshape merge", [](Case &c) {
    c.make(OpKind::Reshape, {c.rand({4, 6})}, shapeAttr("shape", {24}));
  });
  add("reshape split", [](Case &c) {
    c.make(OpKind::Reshape, {c.rand({24})}, shapeAttr("shape", {4, 6}));
  });
  add("reshape regroup", [](Case &c) {
    c.make(OpKind::Reshape, {c.rand({6, 4, 5})},
           shapeAttr("shape", {3, 2, 20}));
  });
  add("reshape ones", [](Case &c) {
    c.make(OpKind::Reshape, {c.rand({4, 1, 6})}, shapeAttr("shape", {4, 6, 1}));
  });
  add("reshape heads", [](Case &c) {
    c.make(OpKind::Reshape, {c.rand({4, 5, 6})},
           shapeAttr("shape", {4, 5, 3, 2}));
  });
  add("transpose", [](Case &c) {
    c.make(OpKind::Transpose, {c.rand({4, 5, 6})},
           shapeAttr("perm", {2, 0, 1}));
  });
  add("slice", [](Case &c) {
    c.make(OpKind::Slice, {c.rand({5, 6})},
           {{"axis", int64_t(1)}, {"start", int64_t(1)}, {"end", int64_t(4)}});
  });
  for (int64_t axis : {0, 1})
    add("concat axis " + std::to_string(axis), [axis](Case &c) {
      c.make(OpKind::Concat, {c.rand({5, 4}), c.rand({5, 4}), c.rand({5, 4})},
             {{"axis", axis}});
    });
  add("broadcast row", [](Case &c) {
    c.make(OpKind::Broadcast, {c.rand({6})}, shapeAttr("shape", {5, 6}));
  });
  add("broadcast column", [](Case &c) {
    c.make(OpKind::Broadcast, {c.rand({5, 1})}, shapeAttr("shape", {5, 6}));
  });
  add("broadcast rank 3", [](Case &c) {
    c.make(OpKind::Broadcast, {c.rand({1, 6})}, shapeAttr("shape", {4, 5, 6}));
  });
  add("broadcast scalar", [](Case &c) {
    c.make(OpKind::Broadcast, {c.rand({})}, shapeAttr("shape", {4, 5}));
  });
  for (OpKind k : {OpKind::Sum, OpKind::Mean, OpKind::Max})
    for (bool keep : {false, true}) {
      add(opName(k).str() + " axes [1]" + (keep ? " keepdims" : ""),
          [k, keep](Case &c) {
            c.make(k, {c.rand({4, 5, 6})},
                   {{"axes", Ints{1}}, {"keepdims", keep}});
          });
      add(opName(k).str() + " axes [0, 2]" + (keep ? " keepdims" : ""),
          [k, keep](Case &c) {
            c.make(k, {c.rand({4, 5, 6})},
                   {{"axes", Ints{0, -1}}, {"keepdims", keep}});
          });
    }
  add("cross_entropy", [](Case &c) {
    c.make(OpKind::CrossEntropy, {c.rand({4, 5, 6}), c.ids({4, 5}, 6)});
  });
  add("cross_entropy_grad", [](Case &c) {
    c.make(OpKind::CrossEntropyGrad,
           {c.rand({}), c.rand({5, 6}), c.ids({5}, 6)});
  });
  add("sum_exp", [](Case &c) {
    c.make(OpKind::SumExp, {c.rand({4, 5, 6}), c.rand({4, 5})});
  });
  add("class_logit", [](Case &c) {
    c.make(OpKind::ClassLogit, {c.rand({4, 5, 7}), c.ids({4, 5}, 7)});
  });
  add("cross_entropy_grad_stats", [](Case &c) {
    c.make(OpKind::CrossEntropyGradStats,
           {c.rand({}), c.rand({5, 7}), c.rand({5}), c.positive({5}),
            c.ids({5}, 7)});
  });
  add("max i64", [](Case &c) {
    c.make(OpKind::Max, {c.intsIn({5, 4}, -50, 50)},
           {{"axes", Ints{1}}, {"keepdims", false}});
  });
  add("mse", [](Case &c) {
    c.make(OpKind::Mse, {c.rand({5, 4}), c.rand({5, 4})});
  });
  add("causal_mask", [](Case &c) {
    c.make(OpKind::CausalMask, {c.rand({4, 3, 5, 5})});
  });
  add("causal_mask_grad", [](Case &c) {
    c.make(OpKind::CausalMaskGrad, {c.rand({4, 3, 5, 5})});
  });
  add("attention", [](Case &c) {
    c.make(OpKind::Attention,
           {c.rand({4, 3, 5, 2}), c.rand({4, 3, 5, 2}), c.rand({4, 3, 5, 2})});
  });
  add("attention_grad", [](Case &c) {
    c.make(OpKind::AttentionGrad,
           {c.rand({4, 3, 5, 2}), c.rand({4, 3, 5, 2}), c.rand({4, 3, 5, 2}),
            c.rand({4, 3, 5, 2}), c.rand({4, 3, 5, 2})});
  });
  // Grouped-query cross attention with a padding mask over the keys, and
  // causal attention with a mask per head (which splits with the heads).
  add("attention grouped, cross, masked", [](Case &c) {
    c.make(OpKind::Attention,
           {c.rand({4, 4, 5, 2}), c.rand({4, 2, 3, 2}), c.rand({4, 2, 3, 2}),
            c.rand({4, 1, 1, 3})},
           {{"causal", false}});
  });
  add("attention causal, mask per head", [](Case &c) {
    c.make(OpKind::Attention,
           {c.rand({2, 4, 3, 2}), c.rand({2, 4, 5, 2}), c.rand({2, 4, 5, 2}),
            c.rand({4, 3, 5})});
  });
  add("attention_grad grouped, cross, masked", [](Case &c) {
    c.make(OpKind::AttentionGrad,
           {c.rand({4, 4, 5, 2}), c.rand({4, 2, 3, 2}), c.rand({4, 2, 3, 2}),
            c.rand({4, 4, 5, 2}), c.rand({4, 4, 5, 2}), c.rand({4, 1, 1, 3})},
           {{"causal", false}});
  });
  add("attention_grad causal, mask per head", [](Case &c) {
    c.make(OpKind::AttentionGrad,
           {c.rand({2, 4, 3, 2}), c.rand({2, 4, 5, 2}), c.rand({2, 4, 5, 2}),
            c.rand({2, 4, 3, 2}), c.rand({2, 4, 3, 2}), c.rand({4, 3, 5})});
  });
  for (bool keep : {false, true})
    add(std::string("max_grad") + (keep ? " keepdims" : ""), [keep](Case &c) {
      Attrs attrs{{"axes", Ints{1}}, {"keepdims", keep}};
      Value *x = c.rand({4, 5, 6});
      HostTensor y = evalOp(OpKind::Max, {c.args.at(x->name())}, attrs);
      Value *dy = c.rand(y.type.shape);
      Value *yv = c.input(y.type, y.data);
      c.make(OpKind::MaxGrad, {dy, x, yv}, attrs);
    });
  return defs;
}

// Rows of `t` along `dim`: [offset, offset + size).
HostTensor sliceDim(const HostTensor &t, int64_t dim, int64_t offset,
                    int64_t size) {
  TensorType type = t.type;
  type.shape[dim] = size;
  int64_t outer = 1, inner = 1, n = t.type.shape[dim];
  for (int64_t d = 0; d < dim; ++d)
    outer *= t.type.shape[d];
  for (int64_t d = dim + 1; d < t.type.rank(); ++d)
    inner *= t.type.shape[d];
  HostTensor out(type);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < size * inner; ++i)
      out.data[o * size * inner + i] = t.data[(o * n + offset) * inner + i];
  return out;
}

HostTensor concatDim(const std::vector<HostTensor> &parts, int64_t dim) {
  TensorType type = parts.front().type;
  type.shape[dim] = 0;
  for (const HostTensor &p : parts)
    type.shape[dim] += p.type.shape[dim];
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d)
    outer *= type.shape[d];
  for (int64_t d = dim + 1; d < type.rank(); ++d)
    inner *= type.shape[d];
  HostTensor out(type);
  size_t k = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (const HostTensor &p : parts) {
      int64_t chunk = p.type.shape[dim] * inner;
      for (int64_t i = 0; i < chunk; ++i)
        out.data[k++] = p.data[o * chunk + i];
    }
  return out;
}

// Partial values that add up to `t` over `n` devices: random ones for all
// but device 0, which holds the rest.
std::vector<HostTensor> partialParts(const HostTensor &t, int64_t n,
                                     uint64_t stream) {
  std::vector<HostTensor> parts(n, HostTensor(t.type));
  parts[0] = t;
  for (int64_t k = 1; k < n; ++k)
    for (size_t i = 0; i < t.data.size(); ++i) {
      double r = 6 * uniform01(99, stream + k, i) - 3;
      if (isInteger(t.type.dtype))
        r = std::round(r);
      parts[k].data[i] = r;
      parts[0].data[i] -= r;
    }
  return parts;
}

// Partial maxima of `t` over `n` devices: device 0 holds `t`, the others
// values below it (at most the same), so the maximum over devices is `t`.
std::vector<HostTensor> partialMaxParts(const HostTensor &t, int64_t n,
                                        uint64_t stream) {
  std::vector<HostTensor> parts(n, t);
  for (int64_t k = 1; k < n; ++k)
    for (size_t i = 0; i < t.data.size(); ++i) {
      double r = 3 * uniform01(77, stream + k, i);
      if (isInteger(t.type.dtype))
        r = std::round(r);
      parts[k].data[i] -= r;
    }
  return parts;
}

// Whether `actual` equals `expected` to a relative 1e-9; the first
// difference in `why`.
// `tolerance` relative to max(1, |expected|): 1e-9 for signatures that are
// exact up to the interpreter's f64 sums.
bool close(const HostTensor &actual, const HostTensor &expected,
           std::string &why, double tolerance = 1e-9) {
  if (actual.type != expected.type) {
    why = "type " + actual.type.str() + " vs " + expected.type.str();
    return false;
  }
  for (size_t i = 0; i < actual.data.size(); ++i) {
    double a = actual.data[i], e = expected.data[i];
    if (a == e)
      continue;
    if (!(std::fabs(a - e) <= tolerance * std::max(1.0, std::fabs(e)))) {
      why = "element " + std::to_string(i) + ": " + std::to_string(a) + " vs " +
            std::to_string(e);
      return false;
    }
  }
  return true;
}

const MeshAxis kAxes[] = {{"tp", 2, {}}, {"tp", 3, {}}, {"tp", 2, {3, 1}}};

std::string axisStr(const MeshAxis &a) { return Mesh({a}).str(); }

// Runs `sig` of the case's op on every device of `axis` and compares the
// combined result with `expected`. Returns false with a message if not.
bool checkSignature(Case &c, const MeshAxis &axis, const ShardingSignature &sig,
                    const HostTensor &expected, std::string &why) {
  const Op &op = *c.op;
  Mesh mesh({axis});
  auto sharding = [&](Placement p) { return Sharding{{axis.name, p}}; };
  // No device gets an empty part of a split dimension.
  auto emptyPart = [&](Placement p, const TensorType &t) {
    if (!p.isSplit())
      return false;
    if (p.dim < 0 || p.dim >= t.rank())
      return true;
    for (int64_t size : splitSizes(t.shape[p.dim], axis))
      if (size <= 0)
        return true;
    return false;
  };
  if (emptyPart(sig.result, op.type())) {
    why = "the result split has an empty part or no such dimension";
    return false;
  }
  for (unsigned i = 0; i < sig.operands.size() && i < op.numOperands(); ++i)
    if (emptyPart(sig.operands[i], op.operand(i)->type())) {
      why = "the split of operand " + std::to_string(i) +
            " has an empty part or no such dimension";
      return false;
    }
  if (sig.operands.size() != op.numOperands()) {
    why = "signature has " + std::to_string(sig.operands.size()) + " operands";
    return false;
  }
  // Partial parts of each partial operand, drawn once for all devices.
  std::vector<std::vector<HostTensor>> partials(op.numOperands());
  for (unsigned i = 0; i < op.numOperands(); ++i)
    if (sig.operands[i].isPartialMax())
      partials[i] = partialMaxParts(c.args.at(op.operand(i)->name()), axis.size,
                                    hashName(c.name) + 17 * i);
    else if (sig.operands[i].isPartial())
      partials[i] = partialParts(c.args.at(op.operand(i)->name()), axis.size,
                                 hashName(c.name) + 17 * i);

  std::vector<HostTensor> results;
  for (int64_t k = 0; k < axis.size; ++k) {
    Module local;
    Builder b(local.graph());
    TensorMap args;
    std::vector<Value *> operands;
    std::vector<TensorType> localTypes;
    for (unsigned i = 0; i < op.numOperands(); ++i) {
      const HostTensor &whole = c.args.at(op.operand(i)->name());
      Placement p = sig.operands[i];
      HostTensor part = whole;
      if (p.isSplit()) {
        int64_t n = whole.type.shape[p.dim];
        part = sliceDim(whole, p.dim, splitOffset(n, axis, k),
                        splitSizes(n, axis)[k]);
        if (part.type != localType(whole.type, sharding(p), mesh, {k})) {
          why = "localType disagrees with the part of operand " +
                std::to_string(i);
          return false;
        }
      } else if (p.isPartial()) {
        part = partials[i][k];
      }
      std::string n = "in" + std::to_string(i);
      operands.push_back(local.graph().addInput(n, part.type));
      localTypes.push_back(part.type);
      args[n] = part;
    }
    TensorType localResult =
        localType(op.type(), sharding(sig.result), mesh, {k});
    double scale = 1;
    if (sig.scaleOperand >= 0)
      scale = static_cast<double>(
                  localTypes[sig.scaleOperand].shape[sig.scaleDim]) /
              op.operand(sig.scaleOperand)->type().shape[sig.scaleDim];
    // An op on a part of the dimension its ids index is told the part (the
    // interpreter has no device to ask).
    std::optional<passes::IndexPart> index;
    if (std::optional<int64_t> n = passes::indexedSplit(op, sig))
      index = passes::IndexPart{axis.name, splitSizes(*n, axis), k};
    ValueOrError r = localizeOp(b, op, operands, localResult, scale,
                                index ? &*index : nullptr);
    if (!r.ok()) {
      why = "device " + std::to_string(k) + ": " + r.error;
      return false;
    }
    results.push_back(evalOut(local, r.value, args));
  }

  if (sig.result.isSplit())
    return close(concatDim(results, sig.result.dim), expected, why);
  if (sig.result.isPartialMax()) {
    HostTensor max = results[0];
    for (size_t k = 1; k < results.size(); ++k)
      for (size_t i = 0; i < max.data.size(); ++i)
        max.data[i] = std::max(max.data[i], results[k].data[i]);
    return close(max, expected, why);
  }
  if (sig.result.isPartial()) {
    HostTensor sum = results[0];
    for (size_t k = 1; k < results.size(); ++k)
      for (size_t i = 0; i < sum.data.size(); ++i)
        sum.data[i] += results[k].data[i];
    // A narrowing cast of partial sums rounds each part instead of the sum:
    // exact up to one rounding of the result type per part.
    double tolerance = 1e-9;
    if (op.kind() == OpKind::Cast &&
        ir::dtypeBytes(op.type().dtype) <
            ir::dtypeBytes(op.operand(0)->type().dtype))
      tolerance = static_cast<double>(results.size()) *
                  (op.type().dtype == ir::DType::F32 ? 0x1p-24 : 0x1p-8);
    return close(sum, expected, why, tolerance);
  }
  for (size_t k = 0; k < results.size(); ++k)
    if (!close(results[k], expected, why)) {
      why = "device " + std::to_string(k) + ": " + why;
      return false;
    }
  return true;
}

} // namespace

TEST_CASE("sharding rules: every listed signature computes the logical op") {
  std::set<OpKind> covered;
  size_t checked = 0;
  for (const CaseDef &def : caseDefs()) {
    auto c = std::make_unique<Case>();
    c->name = def.name;
    def.build(*c);
    REQUIRE(c->op);
    covered.insert(c->op->kind());
    HostTensor expected = evalOut(c->module, c->op->result(), c->args);
    for (const MeshAxis &axis : kAxes) {
      llvm::SmallVector<ShardingSignature, 8> sigs =
          legalSignatures(*c->op, axis);
      // Every rule but dropout's and the constant's lists more than all-R.
      bool mayBeEmpty = c->op->kind() == OpKind::Dropout ||
                        c->op->kind() == OpKind::Constant ||
                        c->op->kind() == OpKind::Iota;
      INFO(def.name << " on " << axisStr(axis));
      CHECK((mayBeEmpty || sigs.size() > 1));
      REQUIRE(!sigs.empty());
      CHECK(sigs.back() == ShardingSignature{llvm::SmallVector<Placement, 3>(
                                                 c->op->numOperands(), R()),
                                             R()});
      for (const ShardingSignature &sig : sigs) {
        INFO("signature " << sigStr(sig));
        for (const Placement &p : sig.operands)
          if (p.isSplit())
            CHECK(p.dim >= 0);
        std::string why;
        CHECK_MESSAGE(checkSignature(*c, axis, sig, expected, why), why);
        ++checked;
      }
    }
  }
  // Communication and the ops that only localizeOp makes (device versions)
  // have no rule to check.
  auto deviceOnly = [](OpKind k) {
    return k == OpKind::LocalSplit || k == OpKind::Send ||
           k == OpKind::DropoutPart || k == OpKind::Recv ||
           k == OpKind::EmbeddingPart || k == OpKind::EmbeddingGradPart ||
           k == OpKind::Fused || k == OpKind::MatmulEpilogue;
  };
  for (const OpInfo &info : allOpInfos())
    if (!info.has(kCollective) && !deviceOnly(info.kind)) {
      INFO("op kind without a case: " << info.name.str());
      CHECK(covered.count(info.kind) == 1);
    }
  CHECK(checked > 300);
}

TEST_CASE("sharding rules: localizeOp rewrites shapes, scales, keeps place") {
  OneOp bc(OpKind::Broadcast, {f32({6})}, {{"shape", Ints{5, 6}}});
  bc.op->setScope("blocks.0.mlp");
  bc.op->setLoc(Loc::make("model.mg", 12, 5));
  Module local;
  Builder b(local.graph());
  b.setScope("elsewhere");
  Value *x = local.graph().addInput("x", f32({6}));
  ValueOrError r = localizeOp(b, *bc.op, {x}, f32({3, 6}), 1.0);
  INFO(r.error);
  REQUIRE(r.ok());
  CHECK(r.value->type() == f32({3, 6}));
  CHECK(r.value->definingOp()->attrs().getInts("shape") == Ints{3, 6});
  CHECK(r.value->definingOp()->scope() == "blocks.0.mlp");
  CHECK(r.value->definingOp()->loc().str() == "model.mg:12:5");
  CHECK_FALSE(b.loc().valid());
  CHECK(b.scope() == "elsewhere");

  OneOp grad(OpKind::EmbeddingGrad, {f32({4, 6}), TensorType(DType::I32, {4})},
             {{"rows", int64_t(10)}});
  Value *dy = local.graph().addInput("dy", f32({4, 3}));
  Value *ids = local.graph().addInput("ids", TensorType(DType::I32, {4}));
  ValueOrError g = localizeOp(b, *grad.op, {dy, ids}, f32({10, 3}), 1.0);
  INFO(g.error);
  REQUIRE(g.ok());
  CHECK(g.value->type() == f32({10, 3}));

  // A scale multiplies by a constant broadcast to the result.
  OneOp mean(OpKind::Mean, {f64({4, 6})},
             {{"axes", Ints{1}}, {"keepdims", false}});
  Value *part = local.graph().addInput("part", f64({4, 2}));
  ValueOrError m = localizeOp(b, *mean.op, {part}, f64({4}), 1.0 / 3);
  INFO(m.error);
  REQUIRE(m.ok());
  CHECK(m.value->definingOp()->kind() == OpKind::Mul);
  TensorMap args;
  args["part"] = HostTensor(f64({4, 2}), {1, 2, 3, 4, 5, 6, 7, 8});
  for (const char *n : {"x", "dy", "ids"})
    args[n] = HostTensor(local.graph().findArgument(n)->type());
  HostTensor out = evalOut(local, m.value, args);
  std::vector<double> expected{1.5 / 3, 3.5 / 3, 5.5 / 3, 7.5 / 3};
  for (size_t i = 0; i < 4; ++i)
    CHECK(out.data[i] == doctest::Approx(expected[i]).epsilon(1e-15));

  // A wrong local type is an error, not a wrong program.
  ValueOrError bad = localizeOp(b, *mean.op, {part}, f64({2}), 1.0);
  CHECK_FALSE(bad.ok());
  CHECK(bad.error == "localized mean has type f64[4], expected f64[2]");
  ValueOrError arity = localizeOp(b, *mean.op, {part, part}, f64({4}), 1.0);
  CHECK_FALSE(arity.ok());
  CHECK(arity.error.find("cannot localize mean") == 0);
}

TEST_CASE("sharding rules: vocabulary splits list their parts and run on "
          "uneven ones") {
  OneOp grad(OpKind::EmbeddingGrad, {f32({6, 4}), TensorType(DType::I32, {6})},
             {{"rows", int64_t(10)}});
  CHECK(listed(grad.sigs(kTwo), "(R, R) -> S0"));
  OneOp logit(OpKind::ClassLogit,
              {f32({4, 6, 10}), TensorType(DType::I32, {4, 6})});
  CHECK(logit.sigs(kThree) == Strings{"(S0, S0) -> S0", "(S1, S1) -> S1",
                                      "(S2, R) -> P", "(R, R) -> R"});
  OneOp sumExp(OpKind::SumExp, {f32({4, 10}), f32({4})});
  CHECK(sumExp.sigs(kTwo) ==
        Strings{"(S0, S0) -> S0", "(S1, R) -> P", "(R, R) -> R"});
  OneOp stats(
      OpKind::CrossEntropyGradStats,
      {f32({}), f32({4, 10}), f32({4}), f32({4}), TensorType(DType::I32, {4})});
  CHECK(stats.sigs(kTwo) ==
        Strings{"(R, S0, S0, S0, S0) -> S0 scale operand 4 dim 0",
                "(R, S1, R, R, R) -> S1", "(P, R, R, R, R) -> P",
                "(R, R, R, R, R) -> R"});

  // 65 rows or classes on four devices: 17, 16, 16, 16.
  const MeshAxis four{"tp", 4, {}};
  std::vector<CaseDef> defs = {
      {"embedding V=65",
       [](Case &c) {
         c.make(OpKind::Embedding, {c.rand({65, 3}), c.ids({4, 6}, 65)});
       }},
      {"embedding_grad V=65",
       [](Case &c) {
         c.make(OpKind::EmbeddingGrad, {c.rand({4, 6, 3}), c.ids({4, 6}, 65)},
                {{"rows", int64_t(65)}});
       }},
      {"class_logit C=65",
       [](Case &c) {
         c.make(OpKind::ClassLogit, {c.rand({3, 65}), c.ids({3}, 65)});
       }},
      {"cross_entropy_grad_stats C=65", [](Case &c) {
         c.make(OpKind::CrossEntropyGradStats,
                {c.rand({}), c.rand({3, 65}), c.rand({3}), c.positive({3}),
                 c.ids({3}, 65)});
       }}};
  for (const CaseDef &def : defs) {
    auto c = std::make_unique<Case>();
    c->name = def.name;
    def.build(*c);
    HostTensor expected = evalOut(c->module, c->op->result(), c->args);
    bool splitsIndex = false;
    for (const ShardingSignature &sig : legalSignatures(*c->op, four)) {
      INFO(def.name << ", signature " << sigStr(sig));
      splitsIndex |= passes::indexedSplit(*c->op, sig).has_value();
      std::string why;
      CHECK_MESSAGE(checkSignature(*c, four, sig, expected, why), why);
    }
    INFO(def.name);
    CHECK(splitsIndex);
  }
}

TEST_CASE("sharding rules: localizeOp gives ops on a part of an indexed "
          "dimension their part") {
  OneOp emb(OpKind::Embedding, {f32({65, 4}), TensorType(DType::I32, {6})});
  Module local;
  Builder b(local.graph());
  Value *table = local.graph().addInput("table", f32({16, 4}));
  Value *ids = local.graph().addInput("ids", TensorType(DType::I32, {6}));
  passes::IndexPart part{"tp", {17, 16, 16, 16}, 2};
  ValueOrError r =
      localizeOp(b, *emb.op, {table, ids}, f32({6, 4}), 1.0, &part);
  INFO(r.error);
  REQUIRE(r.ok());
  const Op &made = *r.value->definingOp();
  CHECK(made.kind() == OpKind::EmbeddingPart);
  CHECK(made.attrs().getString("axis") == "tp");
  CHECK(made.attrs().getInts("sizes") == Ints{17, 16, 16, 16});
  CHECK(made.attrs().getInt("part") == 2);
  // Without the part the same op on the local rows would read ids beyond
  // them: the signature that splits the rows needs the part.
  ShardingSignature rows;
  rows.operands = {Placement::split(0), R()};
  rows.result = Placement::partial();
  CHECK(passes::indexedSplit(*emb.op, rows) == 65);
  ShardingSignature columns;
  columns.operands = {Placement::split(1), R()};
  columns.result = Placement::split(1);
  CHECK_FALSE(passes::indexedSplit(*emb.op, columns));
  // An op that indexes nothing has no part to be given.
  OneOp add(OpKind::Add, {f32({4}), f32({4})});
  Value *a = local.graph().addInput("a", f32({4}));
  ValueOrError bad = localizeOp(b, *add.op, {a, a}, f32({4}), 1.0, &part);
  CHECK_FALSE(bad.ok());
}
