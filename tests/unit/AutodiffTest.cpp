// The autodiff pass as a transformation: outputs, zero gradients, integer
// values, accumulation, locations and scopes, and its diagnostics.
#include "passes/Autodiff.h"
#include "ir/Builder.h"
#include "ir/Printer.h"
#include "ir/TextParser.h"
#include "ir/Verifier.h"
#include "passes/PassManager.h"

#include "llvm/Support/raw_ostream.h"

#include <doctest/doctest.h>

#include <map>

using namespace mgc;
using namespace mgc::ir;

namespace {

struct Parsed {
  std::unique_ptr<Module> module;
  std::string diags;
  bool ok = false;
};

// Parses IR text and runs autodiff (through the pass registry) on it.
Parsed autodiff(llvm::StringRef text) {
  Parsed p;
  llvm::raw_string_ostream os(p.diags);
  DiagnosticEngine diag(os);
  p.module = parseModuleText("t.mgir", text, diag);
  REQUIRE(p.module);
  passes::PassManager pm;
  p.ok = succeeded(pm.parsePipeline("autodiff", diag)) &&
         succeeded(pm.run(*p.module, diag));
  os.flush();
  return p;
}

const Output *findOutput(const Module &m, llvm::StringRef name) {
  for (const Output &o : m.graph().outputs())
    if (o.name == name)
      return &o;
  return nullptr;
}

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

} // namespace

TEST_CASE("autodiff: one gradient output per parameter, in order") {
  Parsed p = autodiff(R"(module @m {
  input %x : f32[2, 3]
  param %blocks.0.attn.w_qkv : f32[3, 4] = normal(0.0, 0.02)
  param %b : bf16[4] = zeros
  %0 = matmul(%x, %blocks.0.attn.w_qkv) : f32[2, 4]
  %1 = cast(%b) {dtype = "f32"} : f32[4]
  %2 = broadcast(%1) {shape = [2, 4]} : f32[2, 4]
  %3 = add(%0, %2) : f32[2, 4]
  %4 = mean(%3) {axes = [0, 1], keepdims = false} : f32[]
  output y = %3
  output loss = %4 [loss]
})");
  INFO(p.diags);
  REQUIRE(p.ok);
  const auto &outs = p.module->graph().outputs();
  REQUIRE(outs.size() == 4);
  CHECK(outs[0].name == "y");
  CHECK(outs[1].name == "loss");
  CHECK(outs[1].isLoss);
  CHECK(outs[2].name == "grad.blocks.0.attn.w_qkv");
  CHECK(outs[3].name == "grad.b");
  CHECK(!outs[2].isLoss);
  CHECK(outs[2].value->type() == TensorType(DType::F32, {3, 4}));
  // The gradient of a bf16 parameter is bf16 (cast back from f32).
  CHECK(outs[3].value->type() == TensorType(DType::BF16, {4}));
  CHECK(outs[3].value->definingOp()->kind() == OpKind::Cast);
  CHECK(passes::gradOutputName("a.b") == "grad.a.b");
}

TEST_CASE("autodiff: parameters the loss does not depend on get zeros") {
  Parsed p = autodiff(R"(module @m {
  input %x : f32[3]
  param %w : f32[3] = ones
  param %unused : f32[2, 2] = zeros
  param %s : f32[] = zeros
  param %other : f32[3] = zeros
  %0 = mul(%x, %w) : f32[3]
  %1 = sum(%0) {axes = [0], keepdims = false} : f32[]
  %2 = add(%other, %x) : f32[3]
  output side = %2
  output loss = %1 [loss]
})");
  INFO(p.diags);
  REQUIRE(p.ok);
  const Output *u = findOutput(*p.module, "grad.unused");
  REQUIRE(u);
  const Op *bc = u->value->definingOp();
  REQUIRE(bc);
  CHECK(bc->kind() == OpKind::Broadcast);
  CHECK(bc->type() == TensorType(DType::F32, {2, 2}));
  const Op *zero = bc->operand(0)->definingOp();
  REQUIRE(zero);
  CHECK(zero->kind() == OpKind::Constant);
  CHECK(zero->attrs().getFloat("value") == 0.0);
  // A scalar parameter's zero gradient is the constant itself.
  const Output *s = findOutput(*p.module, "grad.s");
  REQUIRE(s);
  CHECK(s->value->definingOp()->kind() == OpKind::Constant);
  // A parameter used only by another output gets zeros too.
  const Output *o = findOutput(*p.module, "grad.other");
  REQUIRE(o);
  CHECK(o->value->definingOp()->kind() == OpKind::Broadcast);
}

TEST_CASE("autodiff: integer values carry no gradient") {
  // The loss depends on w only through a cast to integers: no gradient
  // flows, and that is not an error. The embedding ids get none either.
  Parsed p = autodiff(R"(module @m {
  input %ids : i32[2]
  param %w : f32[2] = ones
  param %table : f32[4, 3] = ones
  %0 = cast(%w) {dtype = "i32"} : i32[2]
  %1 = add(%0, %ids) : i32[2]
  %2 = embedding(%table, %1) : f32[2, 3]
  %3 = sum(%2) {axes = [0, 1], keepdims = false} : f32[]
  output loss = %3 [loss]
})");
  INFO(p.diags);
  REQUIRE(p.ok);
  const Output *w = findOutput(*p.module, "grad.w");
  REQUIRE(w);
  CHECK(w->value->definingOp()->kind() == OpKind::Broadcast);
  const Output *t = findOutput(*p.module, "grad.table");
  REQUIRE(t);
  CHECK(t->value->definingOp()->kind() == OpKind::EmbeddingGrad);
  for (const auto &op : p.module->graph().ops())
    CHECK(op->kind() != OpKind::Neg);
}

TEST_CASE("autodiff: cotangents of a value with several uses are added") {
  Parsed p = autodiff(R"(module @m {
  param %w : f32[2] = ones
  %0 = exp(%w) : f32[2]
  %1 = mul(%0, %w) : f32[2]
  %2 = sum(%1) {axes = [0], keepdims = false} : f32[]
  output loss = %2 [loss]
})");
  INFO(p.diags);
  REQUIRE(p.ok);
  const Output *g = findOutput(*p.module, "grad.w");
  REQUIRE(g);
  REQUIRE(g->value->definingOp());
  CHECK(g->value->definingOp()->kind() == OpKind::Add);
}

TEST_CASE("autodiff: backward ops carry the forward op's location and scope") {
  Parsed p = autodiff(R"(module @m {
  input %x : f32[2, 3]
  input %y : i32[2]
  param %blocks.0.w : f32[3, 3] = ones
  param %blocks.1.w : f32[3, 3] = ones
  %0 = matmul(%x, %blocks.0.w) : f32[2, 3] scope "blocks.0" loc("m.mg":3:7)
  %1 = gelu(%0) : f32[2, 3] scope "blocks.0" loc("m.mg":3:5)
  %2 = matmul(%1, %blocks.1.w) : f32[2, 3] scope "blocks.1" loc("m.mg":3:7)
  %3 = relu(%2) : f32[2, 3] scope "blocks.1" loc("m.mg":3:5)
  %4 = cross_entropy(%3, %y) : f32[] loc("m.mg":9:3)
  output loss = %4 [loss]
})");
  INFO(p.diags);
  REQUIRE(p.ok);
  std::map<OpKind, const Op *> backward;
  size_t index = 0;
  for (const auto &op : p.module->graph().ops())
    if (index++ >= 5)
      backward[op->kind()] = op.get();
  REQUIRE(backward.count(OpKind::GeluGrad));
  CHECK(backward[OpKind::GeluGrad]->scope() == "blocks.0");
  CHECK(backward[OpKind::GeluGrad]->loc().line == 3);
  CHECK(backward[OpKind::GeluGrad]->loc().col == 5);
  REQUIRE(backward.count(OpKind::ReluGrad));
  CHECK(backward[OpKind::ReluGrad]->scope() == "blocks.1");
  REQUIRE(backward.count(OpKind::CrossEntropyGrad));
  CHECK(backward[OpKind::CrossEntropyGrad]->scope() == "");
  CHECK(backward[OpKind::CrossEntropyGrad]->loc().line == 9);
  // Every backward op has the scope of a forward op: the backward of each
  // layer stays in that layer.
  for (const auto &[kind, op] : backward)
    CHECK((op->scope() == "" || op->scope() == "blocks.0" ||
           op->scope() == "blocks.1"));
  const Output *g0 = findOutput(*p.module, "grad.blocks.0.w");
  REQUIRE(g0);
  CHECK(g0->value->definingOp()->scope() == "blocks.0");
}

TEST_CASE("autodiff: the result prints, parses back and verifies") {
  Parsed p = autodiff(R"(module @m {
  input %x : f32[2, 4, 3]
  param %w : f32[3, 3] = ones
  param %g : f32[3] = ones
  param %b : f32[3] = zeros
  %0 = layernorm(%x, %g, %b) {eps = 1e-05} : f32[2, 4, 3]
  %1 = matmul(%0, %w) : f32[2, 4, 3]
  %2 = softmax(%1) {axis = 1} : f32[2, 4, 3]
  %3 = max(%2) {axes = [2], keepdims = true} : f32[2, 4, 1]
  %4 = mean(%3) {axes = [0, 1, 2], keepdims = false} : f32[]
  output loss = %4 [loss]
})");
  INFO(p.diags);
  REQUIRE(p.ok);
  PrintOptions opts;
  opts.locations = true;
  std::string text = printModuleToString(*p.module, opts);
  std::string diags;
  llvm::raw_string_ostream os(diags);
  DiagnosticEngine diag(os);
  auto again = parseModuleText("again.mgir", text, diag);
  os.flush();
  INFO(text << diags);
  REQUIRE(again);
  CHECK(succeeded(verify(*again, diag)));
  CHECK(printModuleToString(*again, opts) == text);
}

TEST_CASE("autodiff: a loss that is a parameter, or depends on none") {
  Parsed p = autodiff(R"(module @m {
  input %x : f32[]
  param %w : f32[] = ones
  output loss = %w [loss]
})");
  INFO(p.diags);
  REQUIRE(p.ok);
  const Output *g = findOutput(*p.module, "grad.w");
  REQUIRE(g);
  CHECK(g->value->definingOp()->kind() == OpKind::Constant);
  CHECK(g->value->definingOp()->attrs().getFloat("value") == 1.0);

  Parsed q = autodiff(R"(module @m {
  input %x : f32[]
  param %w : f32[2] = ones
  %0 = exp(%x) : f32[]
  output loss = %0 [loss]
})");
  INFO(q.diags);
  REQUIRE(q.ok);
  const Output *z = findOutput(*q.module, "grad.w");
  REQUIRE(z);
  CHECK(z->value->definingOp()->kind() == OpKind::Broadcast);
}

TEST_CASE("autodiff: diagnostics") {
  SUBCASE("no loss output") {
    Parsed p = autodiff(R"(module @m {
  param %w : f32[2] = ones
  %0 = exp(%w) : f32[2]
  output y = %0
})");
    CHECK(!p.ok);
    CHECK(contains(p.diags, "error: autodiff needs a loss output"));
    CHECK(p.module->graph().outputs().size() == 1);
  }
  SUBCASE("gradient outputs already present") {
    Parsed p = autodiff(R"(module @m {
  param %w : f32[] = ones
  %0 = exp(%w) : f32[]
  output loss = %0 [loss]
  output grad.w = %0
})");
    CHECK(!p.ok);
    CHECK(contains(p.diags, "already has an output 'grad.w'"));
  }
  SUBCASE("the loss depends on a parameter through a backward op") {
    Parsed p = autodiff(R"(module @m {
  input %dy : f32[2]
  param %w : f32[2] = ones
  %0 = relu_grad(%dy, %w) : f32[2] loc("m.mg":4:9)
  %1 = sum(%0) {axes = [0], keepdims = false} : f32[]
  output loss = %1 [loss]
})");
    CHECK(!p.ok);
    CHECK(contains(p.diags, "m.mg:4:9: error: autodiff: the loss depends on a "
                            "parameter through relu_grad, which is not "
                            "differentiable: second derivatives are not "
                            "supported"));
    // Nothing was added to the outputs.
    CHECK(p.module->graph().outputs().size() == 1);
  }
  SUBCASE("running twice") {
    Parsed p = autodiff(R"(module @m {
  param %w : f32[] = ones
  %0 = exp(%w) : f32[]
  output loss = %0 [loss]
})");
    REQUIRE(p.ok);
    std::string diags;
    llvm::raw_string_ostream os(diags);
    DiagnosticEngine diag(os);
    CHECK(failed(passes::differentiate(*p.module, diag)));
    os.flush();
    CHECK(
        contains(diags, "already has an output 'grad.w' (autodiff runs once)"));
  }
}

TEST_CASE("autodiff: a module that does not verify is refused") {
  Module m("broken");
  Graph &g = m.graph();
  Value *w = g.addParam("w", TensorType(DType::F32, {2, 3}), Init{});
  // A slice whose attributes are out of range, created without checking.
  Op *s = g.createOp(
      OpKind::Slice, {w},
      Attrs{{"axis", int64_t(5)}, {"start", int64_t(0)}, {"end", int64_t(9)}},
      TensorType(DType::F32, {2, 3}));
  Op *loss = g.createOp(
      OpKind::Sum, {s->result()},
      Attrs{{"axes", std::vector<int64_t>{0, 1}}, {"keepdims", false}},
      TensorType(DType::F32, {}));
  g.addOutput("loss", loss->result(), true);
  std::string diags;
  llvm::raw_string_ostream os(diags);
  DiagnosticEngine diag(os);
  CHECK(failed(passes::differentiate(m, diag)));
  os.flush();
  CHECK(contains(diags, "autodiff needs a valid module ('broken' does not "
                        "verify)"));
  CHECK(g.outputs().size() == 1);
}
