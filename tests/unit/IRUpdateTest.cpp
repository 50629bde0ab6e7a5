// Persistent state and updates in the IR: building, the text form (round
// trip and errors), the verifier, the passes that must keep updates alive,
// and the interpreter's updated values.
#include "ir/Builder.h"
#include "ir/Interpreter.h"
#include "ir/Printer.h"
#include "ir/TextParser.h"
#include "ir/Verifier.h"
#include "passes/PassManager.h"

#include "llvm/Support/raw_ostream.h"

#include <doctest/doctest.h>

using namespace mgc;
using namespace mgc::ir;

namespace {

struct Parsed {
  std::unique_ptr<Module> module;
  std::string diags;
};

Parsed parse(llvm::StringRef text) {
  Parsed p;
  llvm::raw_string_ostream os(p.diags);
  DiagnosticEngine diag(os);
  p.module = parseModuleText("t.mgir", text, diag);
  os.flush();
  return p;
}

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

// A step that counts and accumulates: count += 1, acc = acc * 0.5 + x,
// w = w - x (an SGD-like step with the gradient fed as an input).
const char *kStepText = R"(module @step {
  input %x : f32[2]
  param %w : f32[2] = normal(0.0, 0.02)
  state %count : f32[] = zeros
  state %acc : f32[2] = ones
  %0 = constant() {dtype = "f32", value = 1.0} : f32[]
  %1 = add(%count, %0) : f32[]
  %2 = constant() {dtype = "f32", value = 0.5} : f32[]
  %3 = broadcast(%2) {shape = [2]} : f32[2]
  %4 = mul(%acc, %3) : f32[2]
  %5 = add(%4, %x) : f32[2]
  %6 = sub(%w, %x) : f32[2]
  output acc = %5
  update %count = %1
  update %acc = %5
  update %w = %6
}
)";

} // namespace

TEST_CASE("IR state: the graph keeps state arguments and updates") {
  Module m("m");
  Graph &g = m.graph();
  Value *x = g.addInput("x", TensorType(DType::F32, {3}));
  Value *w = g.addParam("w", TensorType(DType::F32, {3}), Init{});
  Value *s =
      g.addState("opt.m.w", TensorType(DType::F32, {3}), Init{InitKind::Ones});
  CHECK(s->kind() == ValueKind::State);
  CHECK(s->isArgument());
  CHECK(s->isPersistent());
  CHECK(w->isPersistent());
  CHECK(!x->isPersistent());
  CHECK(g.states() == std::vector<Value *>{s});
  CHECK(g.params() == std::vector<Value *>{w});
  CHECK(g.findArgument("opt.m.w") == s);
  Builder b(g);
  Value *sum = b.create(OpKind::Add, {w, s}).value;
  REQUIRE(sum);
  g.addUpdate(w, sum);
  g.addUpdate(s, x);
  REQUIRE(g.findUpdate(w));
  CHECK(g.findUpdate(w)->value == sum);
  CHECK(g.findUpdate(x) == nullptr);
  // Update values are uses; targets are not.
  auto uses = g.useCounts();
  CHECK(uses.lookup(sum) == 1);
  CHECK(uses.lookup(x) == 1);
  CHECK(uses.lookup(w) == 1); // the add only
  Value *other = b.create(OpKind::Neg, {x}).value;
  g.replaceAllUsesWith(sum, other);
  CHECK(g.findUpdate(w)->value == other);
  CHECK(g.findUpdate(w)->target == w);
  std::string out;
  llvm::raw_string_ostream os(out);
  DiagnosticEngine diag(os);
  CHECK(succeeded(verify(m, diag)));
}

TEST_CASE("IR state: text round trip") {
  Parsed p = parse(kStepText);
  INFO(p.diags);
  REQUIRE(p.module);
  std::string printed = printModuleToString(*p.module);
  CHECK(printed == kStepText);
  CHECK(p.module->graph().states().size() == 2);
  CHECK(p.module->graph().updates().size() == 3);
  CHECK(p.module->graph().findArgument("acc")->init().kind == InitKind::Ones);
  // With locations too: print, parse, print gives the same text.
  PrintOptions withLocs;
  withLocs.locations = true;
  std::string a = printModuleToString(*p.module, withLocs);
  CHECK(contains(a, "state %count : f32[] = zeros loc(\"t.mgir\":4:3)"));
  CHECK(contains(a, "update %w = %6 loc(\"t.mgir\":16:3)"));
  Parsed q = parse(a);
  INFO(q.diags);
  REQUIRE(q.module);
  CHECK(printModuleToString(*q.module, withLocs) == a);
}

TEST_CASE("IR state: parse errors") {
  struct Case {
    const char *text;
    const char *error;
  } cases[] = {
      {"module @m {\n  state %s : f32[2]\n}\n",
       "t.mgir:3:1: error: expected '=' and an initialiser after the state "
       "type, found '}'"},
      {"module @m {\n  state %s : f32[2] = zeros\n  update %t = %s\n}\n",
       "t.mgir:3:10: error: use of undefined value '%t'"},
      {"module @m {\n  state %s : f32[2] = zeros\n  update %s %s\n}\n",
       "t.mgir:3:13: error: expected '=' after the updated argument, found "
       "'%s'"},
      {"module @m {\n  update = %s\n}\n",
       "t.mgir:2:10: error: expected the updated argument '%name' after "
       "'update', found '='"},
      {"module @m {\n  stat %s : f32[2] = zeros\n}\n",
       "expected 'input', 'param', 'state', 'output', 'update', an op"},
  };
  for (const Case &c : cases) {
    INFO(c.text);
    Parsed p = parse(c.text);
    CHECK(!p.module);
    CHECK_MESSAGE(contains(p.diags, c.error), p.diags);
  }
}

TEST_CASE("IR state: the verifier checks updates") {
  struct Case {
    const char *body;
    const char *error;
  } cases[] = {
      {"  update %x = %x\n",
       "t.mgir:7:3: error: update target 'x' must be a parameter or state, "
       "not an input"},
      {"  update %0 = %0\n",
       "t.mgir:7:3: error: update target is not an argument of the graph"},
      {"  update %s = %x\n",
       "t.mgir:7:3: error: update of 's' has type f32[2] but 's' is f32[]"},
      {"  update %w = %0\n  update %w = %x\n",
       "t.mgir:8:3: error: 'w' is updated more than once"},
  };
  for (const Case &c : cases) {
    std::string text = std::string("module @m {\n"
                                   "  input %x : f32[2]\n"
                                   "  param %w : f32[2] = zeros\n"
                                   "  state %s : f32[] = zeros\n"
                                   "  %0 = neg(%w) : f32[2]\n"
                                   "  output y = %0\n") +
                       c.body + "}\n";
    INFO(text);
    Parsed p = parse(text);
    CHECK(!p.module);
    CHECK_MESSAGE(contains(p.diags, c.error), p.diags);
  }
  // The note points at the first update.
  Parsed p = parse("module @m {\n  param %w : f32[2] = zeros\n"
                   "  update %w = %w\n  update %w = %w\n}\n");
  CHECK(contains(p.diags, "t.mgir:3:3: note: first update of 'w' is here"));
  // Integer state is allowed (a counter), integer parameters are not.
  Parsed ok = parse("module @m {\n  state %n : i64[] = zeros\n"
                    "  update %n = %n\n}\n");
  CHECK_MESSAGE(ok.module, ok.diags);
}

TEST_CASE("IR state: cse, canonicalize and dce keep updates") {
  Parsed p = parse(R"(module @m {
  param %w : f32[2] = zeros
  state %s : f32[2] = zeros
  %0 = neg(%w) : f32[2]
  %1 = neg(%w) : f32[2]
  %2 = neg(%1) : f32[2]
  %3 = add(%0, %s) : f32[2]
  %4 = exp(%w) : f32[2]
  update %s = %3
  update %w = %2
}
)");
  INFO(p.diags);
  REQUIRE(p.module);
  std::string out;
  llvm::raw_string_ostream os(out);
  DiagnosticEngine diag(os);
  passes::PassManager pm;
  REQUIRE(succeeded(pm.parsePipeline("canonicalize,cse,dce", diag)));
  REQUIRE(succeeded(pm.run(*p.module, diag)));
  // neg(neg(w)) is w; the two negs merge; the unused exp goes.
  CHECK(printModuleToString(*p.module) == R"(module @m {
  param %w : f32[2] = zeros
  state %s : f32[2] = zeros
  %0 = neg(%w) : f32[2]
  %1 = add(%0, %s) : f32[2]
  update %s = %1
  update %w = %w
}
)");
}

TEST_CASE("IR state: the interpreter returns the updated values") {
  Parsed p = parse(kStepText);
  REQUIRE(p.module);
  const Module &m = *p.module;
  TensorMap args;
  for (const auto &arg : m.graph().arguments())
    args[arg->name()] = initParameter(*arg, 7);
  CHECK(args["acc"].data == std::vector<double>{1, 1});
  args["x"] = HostTensor(TensorType(DType::F32, {2}), {0.25, -1});
  std::vector<double> w0 = args["w"].data;
  std::string out;
  llvm::raw_string_ostream os(out);
  DiagnosticEngine diag(os);
  for (int step = 1; step <= 3; ++step) {
    TensorMap updated;
    auto outputs = interpret(m, args, diag, &updated);
    REQUIRE_MESSAGE(outputs, os.str());
    REQUIRE(updated.size() == 3);
    CHECK(updated["count"].data[0] == step);
    CHECK((*outputs)["acc"].data == updated["acc"].data);
    applyUpdates(args, updated);
  }
  // acc: 1 -> 0.5 + x -> 0.25 + 1.5x -> 0.125 + 1.75x
  CHECK(args["acc"].data[0] == doctest::Approx(0.125 + 1.75 * 0.25));
  CHECK(args["acc"].data[1] == doctest::Approx(0.125 - 1.75));
  CHECK(args["w"].data[0] == doctest::Approx(w0[0] - 0.75));
  CHECK(args["w"].data[1] == doctest::Approx(w0[1] + 3));
  // Without the out-parameter, the outputs alone, as before.
  auto plain = interpret(m, args, diag);
  REQUIRE(plain);
  CHECK(plain->size() == 1);
  // State is an argument like the others: a missing one is reported.
  args.erase("count");
  CHECK(!interpret(m, args, diag));
  CHECK(contains(os.str(), "missing tensor for state 'count'"));
}

TEST_CASE("IR state: all updates read the values from before the step") {
  // Swap: a takes b and b takes a.
  Parsed p = parse("module @m {\n  state %a : f32[] = zeros\n"
                   "  state %b : f32[] = ones\n"
                   "  update %a = %b\n  update %b = %a\n}\n");
  REQUIRE(p.module);
  TensorMap args;
  args["a"] = HostTensor(TensorType(DType::F32, {}), {1});
  args["b"] = HostTensor(TensorType(DType::F32, {}), {2});
  DiagnosticEngine diag;
  TensorMap updated;
  REQUIRE(interpret(*p.module, args, diag, &updated));
  CHECK(updated["a"].data[0] == 2);
  CHECK(updated["b"].data[0] == 1);
}
