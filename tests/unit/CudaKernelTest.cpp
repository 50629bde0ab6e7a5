// Every CUDA kernel against the CPU kernel of the same op, on fresh random
// inputs (the seed is printed on failure): f32 within 1e-5 and bf16 within
// 1e-2 of the result's largest element, on shapes with odd sizes, strided
// axes, broadcasts, long reductions and batched GEMMs. Also run-time errors
// found on the device, and a CUDA Graph replay. Skips without a device.
#include "CudaTestSupport.h"

#include "ir/Builder.h"

namespace mgc::backend::testing {
namespace {

#if MGC_HAVE_CUDA

using ir::DType;
using ir::OpKind;
using ir::Shape;
using ir::Value;

using Case = OpCase;

using Ints = std::vector<int64_t>;

// The cases of one op kind (several outputs); false for a kind the CUDA
// backend does not run (multi-device ops).
bool buildCases(OpKind kind, Case &c) {
  auto unary = [&] {
    c.out("small", c.op(kind, {c.x("x", {4, 6})}));
    c.out("odd", c.op(kind, {c.x("y", {37, 129})}));
  };
  auto binary = [&] {
    c.out("small", c.op(kind, {c.x("a", {3, 5}), c.x("b", {3, 5})}));
    c.out("odd", c.op(kind, {c.x("c", {37, 129}), c.x("d", {37, 129})}));
  };
  switch (kind) {
  case OpKind::Constant:
    c.out("c",
          c.op(kind, {},
               {{"value", 1.25}, {"dtype", std::string(ir::dtypeName(c.f))}}));
    break;
  case OpKind::Cast:
    c.out("to16",
          c.op(kind, {c.x("x", {3, 7})}, {{"dtype", std::string("bf16")}}));
    c.out("to32",
          c.op(kind, {c.x("y", {5, 3})}, {{"dtype", std::string("f32")}}));
    c.out("toint",
          c.op(kind, {c.x("z", {41})}, {{"dtype", std::string("i32")}}));
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
    binary();
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
    unary();
    break;
  case OpKind::Dropout:
    c.out("d",
          c.op(kind, {c.x("x", {5, 401})}, {{"p", 0.3}, {"seed", int64_t(7)}}));
    break;
  case OpKind::Softmax:
  case OpKind::LogSoftmax:
    c.out("mid", c.op(kind, {c.x("x", {3, 67, 5})}, {{"axis", int64_t(1)}}));
    c.out("last", c.op(kind, {c.x("y", {4, 1000})}, {{"axis", int64_t(-1)}}));
    break;
  case OpKind::SoftmaxGrad:
  case OpKind::LogSoftmaxGrad: {
    Value *y =
        c.op(OpKind::Softmax, {c.x("s", {3, 4, 45})}, {{"axis", int64_t(0)}});
    c.out("first",
          c.op(kind, {c.x("dy", {3, 4, 45}), y}, {{"axis", int64_t(0)}}));
    c.out("last", c.op(kind, {c.x("e", {6, 33}), c.x("f", {6, 33})},
                       {{"axis", int64_t(-1)}}));
    break;
  }
  case OpKind::Layernorm:
    c.out("y",
          c.op(kind, {c.x("x", {2, 3, 77}), c.x("g", {77}), c.x("b", {77})}));
    break;
  case OpKind::Rmsnorm:
    c.out("y", c.op(kind, {c.x("x", {2, 3, 77}), c.x("g", {77})}));
    break;
  case OpKind::Rope:
    c.out("y", c.op(kind, {c.x("x", {2, 3, 37, 66}), c.ids("pos", {37})}));
    c.out("back", c.op(kind, {c.x("d", {5, 64}), c.ids("p", {5})},
                       {{"theta", 500000.0}, {"inverse", true}}));
    break;
  case OpKind::RmsnormGradX:
  case OpKind::LayernormGradX:
    c.out("dx", c.op(kind, {c.x("dy", {2, 3, 77}), c.x("x", {2, 3, 77}),
                            c.x("g", {77})}));
    break;
  case OpKind::Matmul:
    c.out("shared", c.op(kind, {c.x("a", {2, 3, 33, 65}), c.x("w", {65, 17})}));
    c.out("batched", c.op(kind, {c.x("p", {3, 70, 9}), c.x("q", {3, 9, 11})}));
    c.out("plain", c.op(kind, {c.x("m", {150, 33}), c.x("n", {33, 64})}));
    break;
  case OpKind::Embedding:
    c.out("e", c.op(kind, {c.x("table", {50, 24}), c.ids("ids", {3, 7})}));
    break;
  case OpKind::EmbeddingGrad:
    c.out("g", c.op(kind, {c.x("dy", {3, 7, 24}), c.ids("ids", {3, 7})},
                    {{"rows", int64_t(6)}}));
    break;
  case OpKind::Reshape:
    c.out("r", c.op(kind, {c.x("x", {2, 6, 5})}, {{"shape", Ints{3, 20}}}));
    break;
  case OpKind::Transpose:
    c.out("t",
          c.op(kind, {c.x("x", {2, 3, 4, 5})}, {{"perm", Ints{3, 1, 0, 2}}}));
    c.out("t2", c.op(kind, {c.x("y", {67, 33})}, {{"perm", Ints{1, 0}}}));
    break;
  case OpKind::Slice:
    c.out("s", c.op(kind, {c.x("x", {4, 9, 3})},
                    {{"axis", int64_t(1)},
                     {"start", int64_t(2)},
                     {"end", int64_t(7)}}));
    break;
  case OpKind::Concat:
    c.out("c",
          c.op(kind,
               {c.x("a", {2, 3, 4}), c.x("b", {2, 1, 4}), c.x("d", {2, 5, 4})},
               {{"axis", int64_t(1)}}));
    break;
  case OpKind::Broadcast:
    c.out("b", c.op(kind, {c.x("x", {3, 1})}, {{"shape", Ints{2, 3, 5}}}));
    c.out("row", c.op(kind, {c.x("y", {7})}, {{"shape", Ints{9, 7}}}));
    break;
  case OpKind::Sum:
  case OpKind::Mean:
  case OpKind::Max:
    c.out("outer", c.op(kind, {c.x("x", {3, 4, 5})}, {{"axes", Ints{0, -1}}}));
    c.out("long", c.op(kind, {c.x("y", {2000, 3})}, {{"axes", Ints{0}}}));
    c.out("all", c.op(kind, {c.x("z", {64, 65})}, {{"axes", Ints{0, 1}}}));
    c.out("keep", c.op(kind, {c.x("w", {5, 6})},
                       {{"axes", Ints{1}}, {"keepdims", true}}));
    break;
  case OpKind::MaxGrad: {
    Value *x = c.x("x", {3, 4, 5});
    ir::Attrs attrs{{"axes", Ints{1}}, {"keepdims", true}};
    Value *y = c.op(OpKind::Max, {x}, attrs);
    c.out("dx", c.op(kind, {c.x("dy", {3, 1, 5}), x, y}, attrs));
    break;
  }
  case OpKind::ModeSelect:
    binary();
    break;
  case OpKind::Where:
    c.out("small",
          c.op(kind, {c.x("c", {3, 5}), c.x("a", {3, 5}), c.x("b", {3, 5})}));
    c.out("ids", c.op(kind, {c.ids("m", {37, 129}), c.x("d", {37, 129}),
                             c.x("e", {37, 129})}));
    break;
  case OpKind::MinMaxGrad:
    c.out("min",
          c.op(kind,
               {c.x("dy", {37, 129}), c.x("a", {37, 129}), c.x("b", {37, 129})},
               {{"maximum", false}}));
    c.out("max",
          c.op(kind, {c.x("dy2", {3, 5}), c.x("a2", {3, 5}), c.x("b2", {3, 5})},
               {{"maximum", true}}));
    break;
  case OpKind::Iota:
    c.out("rows", c.op(kind, {},
                       {{"shape", Ints{37, 129}},
                        {"axis", int64_t(0)},
                        {"dtype", std::string(ir::dtypeName(c.f))}}));
    c.out("ints", c.op(kind, {},
                       {{"shape", Ints{5, 3, 7}},
                        {"axis", int64_t(-1)},
                        {"dtype", std::string("i32")}}));
    break;
  case OpKind::CrossEntropy:
    c.out("l", c.op(kind, {c.x("logits", {2, 3, 11}), c.ids("t", {2, 3})}));
    break;
  case OpKind::CrossEntropyGrad:
    c.out("g", c.op(kind, {c.x("dy", {}), c.x("logits", {2, 3, 300}),
                           c.ids("t", {2, 3})}));
    break;
  case OpKind::CausalMask:
  case OpKind::CausalMaskGrad:
    c.out("m", c.op(kind, {c.x("s", {2, 7, 7})}));
    break;
  case OpKind::Attention:
    c.out("a", c.op(kind, {c.x("q", {2, 2, 9, 8}), c.x("k", {2, 2, 9, 8}),
                           c.x("v", {2, 2, 9, 8})}));
    c.out("long", c.op(kind, {c.x("q2", {1, 300, 16}), c.x("k2", {1, 300, 16}),
                              c.x("v2", {1, 300, 16})}));
    break;
  case OpKind::Conv2d:
  case OpKind::Conv2dGradX:
  case OpKind::Conv2dGradW:
  case OpKind::MaxPool2d:
  case OpKind::AvgPool2d:
  case OpKind::MaxPool2dGrad:
  case OpKind::AvgPool2dGrad:
    c.out("y", buildWindowCase(kind, c));
    break;
  case OpKind::Fused: {
    // A bias broadcast along rows, a scalar, a bf16 rounding and a GELU.
    std::string dt(ir::dtypeName(c.f));
    c.out("chain",
          c.op(kind, {c.x("a", {5, 37}), c.x("bias", {37}), c.x("s", {})},
               {{"expr", std::string("add(%0, %1); mul(#0, %2); "
                                     "cast_bf16(#1); gelu(#2); sub(#3, 0.25)")},
                {"shape", Ints{5, 37}},
                {"dtype", dt}}));
    break;
  }
  default:
    return false;
  }
  return true;
}

ir::TensorMap caseArguments(OpKind kind, const ir::Module &m, uint64_t seed) {
  bool positive = kind == OpKind::Log || kind == OpKind::Sqrt ||
                  kind == OpKind::Pow || kind == OpKind::Rsqrt ||
                  kind == OpKind::Div;
  // Ids below 5: every table and class count here has at least 5 rows.
  ir::TensorMap args =
      randomArguments(m, seed, 5, positive ? 0.25 : -2, positive ? 3 : 2);
  if (kind == OpKind::MinMaxGrad)
    for (const char *name : {"a", "b", "a2", "b2"})
      for (double &v : args.at(name).data)
        v = std::round(v); // ties
  if (kind == OpKind::Where)
    for (double &v : args.at("c").data)
      v = v > 0 ? 1 : 0;
  if (kind == OpKind::MaxGrad)
    for (double &v : args.at("x").data)
      v = std::round(v); // ties
  return args;
}

void compareOp(OpKind kind, DType f, double tol) {
  uint64_t seed = freshSeed();
  INFO("op " << ir::opName(kind).str() << " in " << ir::dtypeName(f).str()
             << ", seed " << seed);
  Case c(f);
  if (!buildCases(kind, c))
    return;
  ir::TensorMap args = caseArguments(kind, c.module, seed);
  cpu::RunResult want = runCpu(c.module, args);
  cpu::RunResult got = runCuda(c.module, args);
  REQUIRE(got.outputs.size() == want.outputs.size());
  for (const auto &[name, t] : want.outputs)
    compareRelativeToLargest(got.outputs.at(name), t, tol, "output " + name);
}

TEST_CASE("cuda: every op matches the CPU kernel in f32") {
  if (skipWithoutCuda())
    return;
  for (const ir::OpInfo &info : ir::allOpInfos())
    compareOp(info.kind, DType::F32, 1e-5);
}

TEST_CASE("cuda: every op matches the CPU kernel in bf16") {
  if (skipWithoutCuda())
    return;
  for (const ir::OpInfo &info : ir::allOpInfos())
    compareOp(info.kind, DType::BF16, 1e-2);
}

TEST_CASE("cuda: integer arithmetic, casts and reductions") {
  if (skipWithoutCuda())
    return;
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
                  {{"shape", Ints{4, 5}}});
  g.addOutput("div", mk(OpKind::Div,
                        {mk(OpKind::Neg, {i}), mk(OpKind::Add, {j, one})}));
  g.addOutput("mul", mk(OpKind::Mul, {i, j}));
  g.addOutput("mean", mk(OpKind::Mean, {i}, {{"axes", Ints{1}}}));
  g.addOutput("max", mk(OpKind::Max, {j}, {{"axes", Ints{0}}}));
  g.addOutput("toint", mk(OpKind::Cast, {x}, {{"dtype", std::string("i32")}}));
  g.addOutput("tofloat",
              mk(OpKind::Cast, {i}, {{"dtype", std::string("f64")}}));
  ir::TensorMap args = randomArguments(m, freshSeed(), 100, -50, 50);
  cpu::RunResult want = runCpu(m, args), got = runCuda(m, args);
  for (const auto &[name, t] : want.outputs) {
    INFO("output " << name);
    CHECK(bitIdentical(got.outputs.at(name), t));
  }
}

TEST_CASE("cuda: run-time errors name the op and the element") {
  if (skipWithoutCuda())
    return;
  ir::Module m;
  ir::Builder b(m.graph());
  Value *table =
      m.graph().addInput("table", ir::TensorType(DType::F32, {4, 2}));
  Value *ids = m.graph().addInput("ids", ir::TensorType(DType::I32, {5}));
  auto r = b.create(OpKind::Embedding, {table, ids});
  REQUIRE(r.ok());
  m.graph().addOutput("out", r.value);
  ir::TensorMap args = randomArguments(m, 7, 4);
  args.at("ids").data[2] = 9;
  args.at("ids").data[4] = -1;
  auto exe = buildExecutable(cloneModule(m), cpu::scratchBytes);
  std::string text;
  llvm::raw_string_ostream os(text);
  DiagnosticEngine diag(os);
  auto ex = cuda::CudaExecutor::create(*exe, {}, diag);
  REQUIRE(ex);
  CHECK(ex->run(toTensors(args), diag).failed());
  INFO(os.str());
  CHECK(os.str().find("op %0 (embedding): embedding id 9 is out of range "
                      "[0, 4) in element 2") != std::string::npos);
  // The executor is still usable after the error.
  args.at("ids").data[2] = 1;
  args.at("ids").data[4] = 3;
  text.clear();
  auto ok = ex->run(toTensors(args), diag);
  CHECK(ok.succeeded());
}

// A graph captured on the first run gives the same results on later runs
// with new arguments as direct launches.
TEST_CASE("cuda: a step captured as a CUDA Graph replays") {
  if (skipWithoutCuda())
    return;
  Case c(DType::F32);
  Value *x = c.x("x", {16, 32});
  Value *w = c.x("w", {32, 8});
  Value *h = c.op(OpKind::Gelu, {c.op(OpKind::Matmul, {x, w})});
  c.out("y", c.op(OpKind::Softmax, {h}, {{"axis", int64_t(-1)}}));
  auto exe = buildExecutable(cloneModule(c.module), cpu::scratchBytes);
  DiagnosticEngine diag;
  cuda::CudaOptions options;
  options.graph = true;
  auto ex = cuda::CudaExecutor::create(*exe, options, diag);
  REQUIRE(ex);
  for (uint64_t seed : {1, 2, 3}) {
    ir::TensorMap args = randomArguments(c.module, seed, 5);
    auto got = ex->run(toTensors(args), diag);
    REQUIRE(got.succeeded());
    cpu::RunResult direct = runCuda(c.module, args);
    CHECK(bitIdentical(got->outputs.at("y"), direct.outputs.at("y")));
  }
}

#endif

} // namespace
} // namespace mgc::backend::testing
