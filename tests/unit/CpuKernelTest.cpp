// Every CPU kernel against the float64 interpreter: for each op kind in the
// op table, a small graph with random operands, run in f64 (within 1e-12)
// and in f32 (within 1e-5; see kF32Tolerance), plus the cases where a
// kernel's structure changes (row blocks of GEMM, batched operands, bf16
// storage, integer types, run-time errors).
#include "CpuTestSupport.h"

#include "ir/Builder.h"

#include <cstring>

namespace mgc::backend::testing {
namespace {

using ir::DType;
using ir::OpKind;
using ir::Shape;
using ir::Value;

// f64 kernels compute what the interpreter computes, up to the order of
// rounding (BLAS blocking and FMA, exp/tanh of the C library): 1e-12 of
// max(|value|, 1).
constexpr double kF64Tolerance = 1e-12;
// f32 kernels: every op here rounds a handful of f32 operations (at most a
// few ulps, 6e-8 each) and accumulates short rows (at most ~10 terms) or in
// f64, so 1e-5 of max(|value|, 1) leaves a wide margin.
constexpr double kF32Tolerance = 1e-5;

// Builds the op `kind` on operands of dtype `f`; returns false when the
// test has no case for the kind (a new row in OpKinds.def).
bool buildCase(OpKind kind, OpCase &c) {
  Value *result = nullptr;
  auto unary = [&](Shape s = {4, 6}) { return c.op(kind, {c.x("x", s)}); };
  auto binary = [&](Shape s = {3, 5}) {
    return c.op(kind, {c.x("a", s), c.x("b", s)});
  };
  switch (kind) {
  case OpKind::Constant:
    result =
        c.op(kind, {},
             {{"value", 1.25}, {"dtype", std::string(ir::dtypeName(c.f))}});
    break;
  case OpKind::Cast:
    result = c.op(kind, {c.x("x", {3, 7})},
                  {{"dtype", std::string(c.f == DType::F64 ? "f32" : "bf16")}});
    break;
  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Mul:
  case OpKind::Div:
  case OpKind::Minimum:
  case OpKind::Maximum:
  case OpKind::Pow:
  case OpKind::ReluGrad:
  case OpKind::GeluGrad:
  case OpKind::SigmoidGrad:
  case OpKind::TanhGrad:
  case OpKind::Mse:
    result = binary();
    break;
  case OpKind::Neg:
  case OpKind::Exp:
  case OpKind::Log:
  case OpKind::Sqrt:
  case OpKind::Rsqrt:
  case OpKind::Tanh:
  case OpKind::Relu:
  case OpKind::Gelu:
  case OpKind::Sigmoid:
  case OpKind::Cos:
  case OpKind::Sin:
  case OpKind::Abs:
  case OpKind::Sign:
  case OpKind::Softplus:
    result = unary();
    break;
  case OpKind::ModeSelect:
    result = binary();
    break;
  case OpKind::Where:
    result =
        c.op(kind, {c.ids("c", {3, 5}), c.x("a", {3, 5}), c.x("b", {3, 5})});
    c.out("float_condition",
          c.op(kind, {c.x("d", {3, 5}), c.x("e", {3, 5}), c.x("g", {3, 5})}));
    break;
  case OpKind::Iota:
    result = c.op(kind, {},
                  {{"shape", std::vector<int64_t>{3, 4, 5}},
                   {"axis", int64_t(1)},
                   {"dtype", std::string(ir::dtypeName(c.f))}});
    c.out("ids", c.op(kind, {},
                      {{"shape", std::vector<int64_t>{7}},
                       {"dtype", std::string("i64")}}));
    break;
  case OpKind::Conv2d:
  case OpKind::Conv2dGradX:
  case OpKind::Conv2dGradW:
  case OpKind::MaxPool2d:
  case OpKind::AvgPool2d:
  case OpKind::MaxPool2dGrad:
  case OpKind::AvgPool2dGrad:
    result = buildWindowCase(kind, c);
    break;
  case OpKind::MinMaxGrad:
    result = c.op(kind, {c.x("dy", {3, 5}), c.x("a", {3, 5}), c.x("b", {3, 5})},
                  {{"maximum", false}});
    c.out("max", c.op(kind, {c.x("dy2", {4}), c.x("a2", {4}), c.x("b2", {4})},
                      {{"maximum", true}}));
    break;
  case OpKind::Dropout:
    result =
        c.op(kind, {c.x("x", {5, 40})}, {{"p", 0.3}, {"seed", int64_t(7)}});
    break;
  case OpKind::Softmax:
  case OpKind::LogSoftmax: // a middle axis: lines with a stride
    result = c.op(kind, {c.x("x", {3, 4, 5})}, {{"axis", int64_t(1)}});
    break;
  case OpKind::SoftmaxGrad:
  case OpKind::LogSoftmaxGrad:
    result = c.op(kind, {c.x("dy", {3, 4, 5}), c.x("y", {3, 4, 5})},
                  {{"axis", int64_t(-1)}});
    break;
  case OpKind::Layernorm:
    result = c.op(kind, {c.x("x", {2, 3, 8}), c.x("g", {8}), c.x("b", {8})});
    break;
  case OpKind::Rmsnorm:
    result = c.op(kind, {c.x("x", {2, 3, 8}), c.x("g", {8})});
    break;
  case OpKind::Rope:
    result = c.op(kind, {c.x("x", {2, 3, 5, 8}), c.ids("pos", {5})},
                  {{"theta", 100.0}});
    break;
  case OpKind::RmsnormGradX:
  case OpKind::LayernormGradX:
    result =
        c.op(kind, {c.x("dy", {2, 3, 8}), c.x("x", {2, 3, 8}), c.x("g", {8})});
    break;
  case OpKind::Matmul:
    result = c.op(kind, {c.x("a", {2, 3, 4, 5}), c.x("b", {5, 6})});
    break;
  case OpKind::Embedding:
    result = c.op(kind, {c.x("table", {10, 4}), c.ids("ids", {2, 3})});
    break;
  case OpKind::EmbeddingGrad:
    result = c.op(kind, {c.x("dy", {2, 7, 4}), c.ids("ids", {2, 7})},
                  {{"rows", int64_t(6)}});
    break;
  case OpKind::Reshape:
    result =
        c.op(kind, {c.x("x", {2, 6})}, {{"shape", std::vector<int64_t>{3, 4}}});
    break;
  case OpKind::Transpose:
    result = c.op(kind, {c.x("x", {2, 3, 4})},
                  {{"perm", std::vector<int64_t>{2, 0, 1}}});
    break;
  case OpKind::Slice:
    result = c.op(
        kind, {c.x("x", {4, 5})},
        {{"axis", int64_t(1)}, {"start", int64_t(1)}, {"end", int64_t(4)}});
    break;
  case OpKind::Concat:
    result = c.op(kind, {c.x("a", {2, 3}), c.x("b", {2, 2}), c.x("c", {2, 1})},
                  {{"axis", int64_t(1)}});
    break;
  case OpKind::Broadcast:
    result = c.op(kind, {c.x("x", {3, 1})},
                  {{"shape", std::vector<int64_t>{2, 3, 4}}});
    break;
  case OpKind::Sum:
  case OpKind::Mean:
  case OpKind::Max:
    result = c.op(kind, {c.x("x", {3, 4, 5})},
                  {{"axes", std::vector<int64_t>{0, -1}}});
    break;
  case OpKind::MaxGrad: {
    // y is the max of x; x is rounded (below) so that ties occur.
    Value *x = c.x("x", {3, 4, 5});
    ir::Attrs attrs{{"axes", std::vector<int64_t>{1}}, {"keepdims", true}};
    Value *y = c.op(OpKind::Max, {x}, attrs);
    result = c.op(kind, {c.x("dy", {3, 1, 5}), x, y}, attrs);
    break;
  }
  case OpKind::CrossEntropy:
    result = c.op(kind, {c.x("logits", {2, 3, 5}), c.ids("t", {2, 3})});
    break;
  case OpKind::CrossEntropyGrad:
    result = c.op(
        kind, {c.x("dy", {}), c.x("logits", {2, 3, 5}), c.ids("t", {2, 3})});
    break;
  case OpKind::CausalMask:
  case OpKind::CausalMaskGrad:
    result = c.op(kind, {c.x("s", {2, 4, 4})});
    break;
  case OpKind::Attention:
    result = c.op(kind, {c.x("q", {2, 2, 5, 4}), c.x("k", {2, 2, 5, 4}),
                         c.x("v", {2, 2, 5, 4})});
    break;
  case OpKind::AttentionGrad:
    result = c.op(kind, {c.x("q", {2, 2, 5, 4}), c.x("k", {2, 2, 5, 4}),
                         c.x("v", {2, 2, 5, 4}), c.x("y", {2, 2, 5, 4}),
                         c.x("dy", {2, 2, 5, 4})});
    break;
  case OpKind::SumExp: {
    Value *x = c.x("x", {2, 3, 5});
    Value *m = c.op(OpKind::Max, {x}, {{"axes", std::vector<int64_t>{-1}}});
    result = c.op(kind, {x, m});
    break;
  }
  case OpKind::ClassLogit:
    result = c.op(kind, {c.x("logits", {2, 3, 5}), c.ids("t", {2, 3})});
    break;
  case OpKind::CrossEntropyGradStats: {
    // Classes 2..4 of 5 (part 1 of [2, 3]): targets below 2 are elsewhere.
    Value *logits = c.x("logits", {2, 3, 3});
    Value *m =
        c.op(OpKind::Max, {logits}, {{"axes", std::vector<int64_t>{-1}}});
    Value *s = c.op(OpKind::SumExp, {logits, m});
    result = c.op(kind, {c.x("dy", {}), logits, m, s, c.ids("t", {2, 3})},
                  {{"axis", std::string("tp")},
                   {"sizes", std::vector<int64_t>{2, 3}},
                   {"part", int64_t(1)}});
    break;
  }
  case OpKind::DropoutPart: // rows 3..4 of 5
    result = c.op(kind, {c.x("x", {2, 40})},
                  {{"p", 0.3},
                   {"seed", int64_t(7)},
                   {"axis", std::string("dp")},
                   {"sizes", std::vector<int64_t>{3, 2}},
                   {"part", int64_t(1)}});
    break;
  case OpKind::EmbeddingPart:
    result = c.op(kind, {c.x("table", {3, 4}), c.ids("ids", {2, 7})},
                  {{"axis", std::string("tp")},
                   {"sizes", std::vector<int64_t>{2, 3}},
                   {"part", int64_t(1)}});
    break;
  case OpKind::EmbeddingGradPart:
    result = c.op(kind, {c.x("dy", {2, 7, 4}), c.ids("ids", {2, 7})},
                  {{"axis", std::string("tp")},
                   {"sizes", std::vector<int64_t>{3, 2}},
                   {"part", int64_t(0)}});
    break;
  case OpKind::Fused: {
    // Broadcast operands (a row, a scalar), a literal and a backward op in
    // one expression, in the operands' type.
    Value *a = c.x("a", {3, 4});
    result = c.op(kind, {a, c.x("b", {4}), c.x("s", {})},
                  {{"expr", std::string("mul(%0, %1); add(#0, %2); "
                                        "gelu(#1); tanh_grad(#2, 0.25); "
                                        "sub(#3, %0)")},
                   {"shape", std::vector<int64_t>{3, 4}},
                   {"dtype", ir::dtypeName(a->type().dtype).str()}});
    break;
  }
  case OpKind::MatmulEpilogue:
    result = c.op(kind, {c.x("a", {3, 5}), c.x("b", {5, 4}), c.x("bias", {4})},
                  {{"epilogue", std::string("bias_gelu")}});
    break;
  default:
    return false;
  }
  c.module.graph().addOutput("out", result);
  return true;
}

// Operand values for an op: positive where the op needs it, whole halves
// for max_grad (ties), ids below 5 (every id table here has at least 5 rows).
ir::TensorMap caseArguments(OpKind kind, const ir::Module &m, uint64_t seed) {
  bool positive = kind == OpKind::Log || kind == OpKind::Sqrt ||
                  kind == OpKind::Rsqrt || kind == OpKind::Pow;
  ir::TensorMap args =
      randomArguments(m, seed, 5, positive ? 0.25 : -2, positive ? 3 : 2);
  // Ties, zeros and a condition of zeros and ones.
  if (kind == OpKind::MinMaxGrad || kind == OpKind::Sign || kind == OpKind::Abs)
    for (auto &[name, t] : args)
      if (name != "dy" && name != "dy2")
        for (double &v : t.data)
          v = std::round(v);
  if (kind == OpKind::Where)
    for (const char *name : {"c", "d"})
      for (double &v : args.at(name).data)
        v = v > 0 ? 1 : 0;
  if (kind == OpKind::MaxGrad) {
    ir::HostTensor &x = args.at("x");
    for (double &v : x.data)
      v = std::round(v);
  }
  return args;
}

// Communication ops need several devices: they are checked against the
// logical result in the mesh tests; a pipeline's messages become program
// inputs and outputs before a backend compiles a program
// (passes::lowerPipeMessages, PipelineSplitTest).
static bool needsMesh(const ir::OpInfo &info) {
  return info.kind == OpKind::LocalSplit || info.kind == OpKind::Send ||
         info.kind == OpKind::Recv || (info.traits & ir::kCollective);
}

TEST_CASE("CPU kernels: every op kind matches the interpreter in f64 and f32") {
  for (const ir::OpInfo &info : ir::allOpInfos()) {
    if (needsMesh(info))
      continue;
    for (DType f : {DType::F64, DType::F32}) {
      INFO("op " << info.name.str() << " in " << ir::dtypeName(f).str());
      OpCase c(f);
      bool known = buildCase(info.kind, c);
      if (!known)
        FAIL("no CPU kernel test case for op '" << info.name.str() << "'");
      for (uint64_t seed : {1, 2}) {
        ir::TensorMap args = caseArguments(info.kind, c.module, seed);
        compareWithInterpreter(c.module, args,
                               f == DType::F64 ? kF64Tolerance : kF32Tolerance);
      }
    }
  }
}

// bf16 storage with f32 arithmetic for every op: inputs hold bf16 values,
// each result is rounded to bf16 once (2^-9 relative), except where a
// kernel rounds partial results (embedding_grad adds rows in place, the
// cast case is bf16 -> bf16): within 2^-6 of max(|value|, 1).
TEST_CASE("CPU kernels: every op kind in bf16 storage") {
  for (const ir::OpInfo &info : ir::allOpInfos()) {
    if (needsMesh(info))
      continue;
    INFO("op " << info.name.str() << " in bf16");
    OpCase c(DType::BF16);
    REQUIRE(buildCase(info.kind, c));
    compareWithInterpreter(c.module, caseArguments(info.kind, c.module, 3),
                           1.0 / 64);
  }
}

TEST_CASE(
    "CPU kernels: a kernel for every op kind, and scratch only where needed") {
  for (const ir::OpInfo &info : ir::allOpInfos())
    CHECK_MESSAGE(bool(cpu::kernelFor(info.kind)), info.name.str());
}

// A matrix product large enough to be cut into several row blocks, and one
// with a batch of right-hand sides.
TEST_CASE("CPU kernels: matmul over several row blocks and batched operands") {
  for (DType f : {DType::F64, DType::F32}) {
    OpCase c(f);
    Value *a = c.x("a", {150, 33});
    Value *w = c.x("w", {33, 17});
    c.module.graph().addOutput("shared", c.op(OpKind::Matmul, {a, w}));
    Value *p = c.x("p", {3, 70, 9});
    Value *q = c.x("q", {3, 9, 11});
    c.module.graph().addOutput("batched", c.op(OpKind::Matmul, {p, q}));
    // K = 33 terms per element: f32 error grows with the sum's length.
    compareWithInterpreter(c.module, randomArguments(c.module, 3, 1),
                           f == DType::F64 ? kF64Tolerance : 4e-5);
  }
}

// Large tensors so that the parallel loops run several chunks.
TEST_CASE("CPU kernels: large elementwise, softmax and reductions") {
  OpCase c(DType::F32);
  Value *x = c.x("x", {300, 257});
  Value *y = c.x("y", {300, 257});
  ir::Graph &g = c.module.graph();
  g.addOutput("gelu", c.op(OpKind::Gelu, {x}));
  g.addOutput("mul", c.op(OpKind::Mul, {x, y}));
  g.addOutput("softmax", c.op(OpKind::Softmax, {x}, {{"axis", int64_t(0)}}));
  g.addOutput("sum0",
              c.op(OpKind::Sum, {x}, {{"axes", std::vector<int64_t>{0}}}));
  g.addOutput("t", c.op(OpKind::Transpose, {y},
                        {{"perm", std::vector<int64_t>{1, 0}}}));
  compareWithInterpreter(c.module, randomArguments(c.module, 4, 1),
                         kF32Tolerance);
}

// Sums over leading axes (as a bias gradient), over trailing axes (as a
// row mean) and over all of them take the kernel's contiguous paths; in f64
// they add in the interpreter's order, so they match it exactly.
TEST_CASE("CPU kernels: sums over leading and trailing axes, in order") {
  for (DType f : {DType::F64, DType::F32}) {
    OpCase c(f);
    Value *x = c.x("x", {3, 100, 300});
    ir::Graph &g = c.module.graph();
    auto reduce = [&](OpKind kind, std::vector<int64_t> axes) {
      return c.op(kind, {x}, {{"axes", axes}});
    };
    g.addOutput("lead", reduce(OpKind::Sum, {0, 1}));
    g.addOutput("lead_mean", reduce(OpKind::Mean, {0}));
    g.addOutput("trail", reduce(OpKind::Sum, {1, 2}));
    g.addOutput("trail_mean", reduce(OpKind::Mean, {-1}));
    g.addOutput("all", reduce(OpKind::Sum, {0, 1, 2}));
    g.addOutput("middle", reduce(OpKind::Sum, {1}));
    compareWithInterpreter(c.module, randomArguments(c.module, 6, 1),
                           f == DType::F64 ? 0.0 : kF32Tolerance);
  }
}

TEST_CASE("CPU kernels: bf16 storage with f32 arithmetic") {
  OpCase c(DType::BF16);
  Value *a = c.x("a", {6, 8});
  Value *b = c.x("b", {6, 8});
  Value *w = c.x("w", {8, 5});
  ir::Graph &g = c.module.graph();
  g.addOutput("add", c.op(OpKind::Add, {a, b}));
  g.addOutput("gelu", c.op(OpKind::Gelu, {a}));
  g.addOutput("mm", c.op(OpKind::Matmul, {a, w}));
  g.addOutput("f32", c.op(OpKind::Cast, {a}, {{"dtype", std::string("f32")}}));
  ir::TensorMap args = randomArguments(c.module, 5, 1);
  // Results round to bf16 (8 significant bits): within 2^-8 relative.
  compareWithInterpreter(c.module, args, 1.0 / 128);
  // The scratch space of the bf16 matmul is planned.
  for (const auto &op : c.module.graph().ops())
    CHECK((cpu::scratchBytes(*op) > 0) == (op->kind() == OpKind::Matmul));
}

TEST_CASE("CPU kernels: integer arithmetic, casts and reductions") {
  ir::Module m;
  ir::Builder b(m.graph());
  ir::Graph &g = m.graph();
  Value *i = g.addInput("i", ir::TensorType(DType::I64, {4, 5}));
  Value *j = g.addInput("j", ir::TensorType(DType::I64, {4, 5}));
  Value *x = g.addInput("x", ir::TensorType(DType::F32, {4, 5}));
  auto mk = [&](OpKind k, llvm::ArrayRef<Value *> ops, ir::Attrs a = {}) {
    auto r = b.create(k, ops, std::move(a));
    REQUIRE(r.ok());
    return r.value;
  };
  Value *one = mk(OpKind::Broadcast, {b.constant(1, DType::I64)},
                  {{"shape", std::vector<int64_t>{4, 5}}});
  g.addOutput("div", mk(OpKind::Div,
                        {mk(OpKind::Neg, {i}), mk(OpKind::Add, {j, one})}));
  g.addOutput("mul", mk(OpKind::Mul, {i, j}));
  g.addOutput("mean",
              mk(OpKind::Mean, {i}, {{"axes", std::vector<int64_t>{1}}}));
  g.addOutput("max", mk(OpKind::Max, {j}, {{"axes", std::vector<int64_t>{0}}}));
  g.addOutput("toint", mk(OpKind::Cast, {x}, {{"dtype", std::string("i32")}}));
  g.addOutput("tofloat",
              mk(OpKind::Cast, {i}, {{"dtype", std::string("f64")}}));
  ir::TensorMap args = randomArguments(m, 6, 100, -50, 50);
  compareWithInterpreter(m, args, 0);
}

TEST_CASE("CPU kernels: run-time errors name the op and the element") {
  ir::Module m;
  ir::Builder b(m.graph());
  Value *table =
      m.graph().addInput("table", ir::TensorType(DType::F32, {4, 2}));
  Value *ids = m.graph().addInput("ids", ir::TensorType(DType::I32, {3}));
  auto r = b.create(OpKind::Embedding, {table, ids});
  REQUIRE(r.ok());
  m.graph().addOutput("out", r.value);
  ir::TensorMap args = randomArguments(m, 7, 4);
  args.at("ids").data[2] = 9;
  auto exe = buildExecutable(cloneModule(m), cpu::scratchBytes);
  std::string text;
  llvm::raw_string_ostream os(text);
  DiagnosticEngine diag(os);
  auto ex = cpu::CpuExecutor::create(*exe, {}, diag);
  REQUIRE(ex);
  CHECK(ex->run(toTensors(args), diag).failed());
  CHECK(os.str().find("embedding id 9 is out of range [0, 4) in element 2") !=
        std::string::npos);

  // Missing, extra and mistyped arguments.
  text.clear();
  cpu::NamedTensors bad = toTensors(args);
  bad.erase("table");
  bad["nope"] = runtime::Tensor(ir::TensorType(DType::F32, {1}));
  bad["ids"] = runtime::Tensor(ir::TensorType(DType::I32, {4}));
  CHECK(ex->run(bad, diag).failed());
  CHECK(os.str().find("missing tensor for input 'table'") != std::string::npos);
  CHECK(os.str().find("'nope' is not an input") != std::string::npos);
  CHECK(os.str().find(
            "tensor 'ids' has type i32[4] but the model expects i32[3]") !=
        std::string::npos);
}

} // namespace
} // namespace mgc::backend::testing
