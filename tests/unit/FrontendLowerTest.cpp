// Lowering .mg models to IR: names, scopes, broadcasting, diagnostics,
// recovery, and the limits that keep any input from crashing or hanging.
#include "FrontendTestSupport.h"
#include "SourcePath.h"

#include "frontend/Builtins.h"
#include "ir/Printer.h"

#include "support/Random.h"

#include "llvm/Support/MemoryBuffer.h"

#include <doctest/doctest.h>

#include <set>

using namespace mgc;
using namespace mgc::frontend;
using namespace mgc::frontend::testing;

namespace {

size_t countOps(const ir::Module &m, ir::OpKind kind) {
  size_t n = 0;
  for (const auto &op : m.graph().ops())
    n += op->kind() == kind;
  return n;
}

} // namespace

TEST_CASE("frontend lower: a small model") {
  Compiled c = compileText(R"(
const B = 4, D = 3, C = 2
model clf {
  input x: f32[B, D]
  input y: i32[B]
  param w: f32[D, C] = xavier
  param b: f32[C] = zeros
  logits = x @ w + b
  output logits = logits
  loss = cross_entropy(logits, y)
}
)");
  INFO(c.diags);
  REQUIRE(c.module);
  CHECK(c.diags.empty());
  const ir::Graph &g = c.module->graph();
  CHECK(c.module->name() == "clf");
  CHECK(g.inputs().size() == 2);
  REQUIRE(g.params().size() == 2);
  CHECK(g.params()[0]->init().kind == ir::InitKind::Xavier);
  CHECK(g.numOps() == 4); // matmul, broadcast, add, cross_entropy
  REQUIRE(g.outputs().size() == 2);
  CHECK(g.outputs()[0].name == "logits");
  CHECK(!g.outputs()[0].isLoss);
  CHECK(g.outputs()[1].isLoss);
  CHECK(g.lossOutput()->value->type() == ir::TensorType(ir::DType::F32, {}));
  // Every op has the location of the expression that made it.
  for (const auto &op : g.ops()) {
    CHECK(op->loc().valid());
    CHECK(op->loc().fileName() == "test.mg");
  }
  CHECK(g.ops().front()->loc().line == 8);
  CHECK(g.ops().front()->loc().col == 14); // the '@'
}

TEST_CASE("frontend lower: broadcasts only where a shape changes") {
  Compiled c = compileText(R"(
model m {
  input a: f32[2, 3]
  input b: f32[2, 3]
  input r: f32[3]
  output s = a + b
  output t = a * r
  output u = 2 * a
}
)");
  REQUIRE(c.module);
  CHECK(countOps(*c.module, ir::OpKind::Broadcast) == 2);
  CHECK(countOps(*c.module, ir::OpKind::Constant) == 1);
}

TEST_CASE("frontend lower: every op kind is reachable from a built-in") {
  std::set<ir::OpKind> reachable;
  for (const Builtin &b : allBuiltins()) {
    reachable.insert(b.kind);
    CHECK(lookupBuiltin(b.name) == &b);
  }
  for (const ir::OpInfo &info : ir::allOpInfos()) {
    INFO(info.name.str());
    // Internal ops are created by passes, not written in the language.
    CHECK(reachable.count(info.kind) == (info.has(ir::kInternal) ? 0 : 1));
  }
}

TEST_CASE("frontend lower: docs/language.md documents every built-in") {
  auto buf =
      llvm::MemoryBuffer::getFile(mgc::test::sourceDir() + "/docs/language.md");
  REQUIRE(buf);
  std::string doc = (*buf)->getBuffer().str();
  for (const Builtin &b : allBuiltins()) {
    INFO(b.name.str());
    CHECK(contains(doc, "`" + b.name.str() + "("));
  }
}

TEST_CASE("frontend lower: blocks, repeat, names and scopes") {
  Compiled c = compileText(R"(
const D = 4
block inner(x: f32[D]) -> f32[D] {
  param w: f32[D] = ones
  return x * w
}
block outer(x: f32[D]) -> f32[D] {
  param g: f32[D] = ones
  x = inner(x * g)
  return inner(x)
}
model m {
  input x: f32[D]
  h = x
  h = repeat 3 layers { outer(h) }
  output y = h
}
)");
  INFO(c.diags);
  REQUIRE(c.module);
  std::vector<std::string> names;
  for (ir::Value *p : c.module->graph().params())
    names.push_back(p->name());
  CHECK(names == std::vector<std::string>{
                     "layers.0.g", "layers.0.inner.w", "layers.0.inner_1.w",
                     "layers.1.g", "layers.1.inner.w", "layers.1.inner_1.w",
                     "layers.2.g", "layers.2.inner.w", "layers.2.inner_1.w"});
  std::set<std::string> scopes;
  for (const auto &op : c.module->graph().ops())
    scopes.insert(op->scope());
  CHECK(scopes == std::set<std::string>{
                      "layers.0", "layers.0.inner", "layers.0.inner_1",
                      "layers.1", "layers.1.inner", "layers.1.inner_1",
                      "layers.2", "layers.2.inner", "layers.2.inner_1"});
}

// Every built-in, as the name of a model's own block: the block shadows it
// (with a note) and the model's calls call the block, so that adding a
// built-in never breaks a model that already defines a block of its name
// (rmsnorm and rope did).
TEST_CASE("frontend lower: a block shadows the built-in of its name") {
  for (const Builtin &b : allBuiltins()) {
    std::string name = b.name.str();
    INFO(name);
    Compiled c = compileText("block " + name +
                             "(x: f32[2]) -> f32[2] {\n"
                             "  param w: f32[2] = ones\n"
                             "  return x * w\n"
                             "}\n"
                             "model m {\n"
                             "  input x: f32[2]\n"
                             "  output y = " +
                             name + "(x)\n}\n");
    INFO(c.diags);
    REQUIRE(c.module);
    CHECK(contains(c.diags, "test.mg:1:7: note: block '" + name +
                                "' shadows the built-in function of that "
                                "name"));
    // The block's parameter and its one op: a multiply.
    REQUIRE(c.module->graph().params().size() == 1);
    CHECK(c.module->graph().params()[0]->name() == name + ".w");
    REQUIRE(c.module->graph().numOps() == 1);
    CHECK(c.module->graph().ops().front()->kind() == ir::OpKind::Mul);
  }
}

TEST_CASE("frontend lower: repeat 0 leaves the value unchanged") {
  Compiled c = compileText(R"(
block f(x: f32[2]) -> f32[2] {
  return relu(x)
}
model m {
  input x: f32[2]
  h = x
  h = repeat N blocks { f(h) }
  output y = h
}
const N = 0
)");
  // Top-level constants are visible everywhere, wherever they are declared.
  INFO(c.diags);
  REQUIRE(c.module);
  CHECK(c.module->graph().numOps() == 0);
  CHECK(c.module->graph().outputs()[0].value->name() == "x");
  // A constant can only use constants declared before it.
  Compiled d = compileText("const A = B + 1\nconst B = 2\nmodel m {\n"
                           "  input x: f32[2]\n  output y = x\n}\n");
  CHECK(!d.module);
  CHECK(contains(d.diags, "test.mg:1:11: error: unknown constant 'B'"));
}

TEST_CASE("frontend lower: several errors per file, each reported once") {
  Compiled c = compileText(R"(
const D = 4
block layer(x: f32[D]) -> f32[D] {
  param w: f32[D, D] = zeros
  return x @ w
}
model m {
  input x: f32[D]
  a = nope + 1
  b = x + zz
  h = x
  h = repeat 12 blocks { layer(h) }
  output y = a
}
)");
  CHECK(!c.module);
  // unknown 'nope', unknown 'zz', rank-1 matmul inside the block: the block's
  // error is not repeated for the 12 copies (the repeat stops at the first).
  CHECK(c.errors == 3);
  CHECK(contains(c.diags, "test.mg:9:7: error: unknown name 'nope'"));
  CHECK(contains(c.diags, "test.mg:10:11: error: unknown name 'zz'"));
  CHECK(contains(c.diags, "test.mg:5:12: error: matmul needs operands of rank "
                          "at least 2, got f32[4] @ f32[4, 4]"));
}

TEST_CASE("frontend lower: -D overrides") {
  std::string text = "const B = 2, S = 0.5\nmodel m {\n  input x: f32[B]\n"
                     "  output y = x * S\n}\n";
  Compiled ok = compileText(text, {{"B", "7"}, {"S", "2"}});
  REQUIRE(ok.module);
  CHECK(ok.module->graph().inputs()[0]->type().shape == ir::Shape{7});
  const auto &first = *ok.module->graph().ops().front();
  CHECK(first.attrs().getFloat("value") == 2.0);
  // An integral float is accepted for an integer constant.
  CHECK(compileText(text, {{"B", "3.0"}}).module);
  Compiled unknown = compileText(text, {{"C", "1"}});
  CHECK(!unknown.module);
  CHECK(contains(unknown.diags,
                 "error: -D C=1: no constant named 'C' in the model file"));
  Compiled bad = compileText(text, {{"B", "two"}});
  CHECK(contains(bad.diags, "error: -D B=two: 'two' is not a number"));
  Compiled neg = compileText(text, {{"B", "-2"}});
  CHECK(contains(neg.diags, "dimension must be positive, got -2"));
}

TEST_CASE("frontend lower: limits give errors, not hangs") {
  // Block instances multiply: 4096 * 4096 copies hit the instance limit.
  Compiled c = compileText(R"(
block leaf(x: f32[2]) -> f32[2] {
  return x
}
block mid(x: f32[2]) -> f32[2] {
  h = x
  h = repeat 4096 r { leaf(h) }
  return h
}
model m {
  input x: f32[2]
  h = x
  h = repeat 4096 r { mid(h) }
  output y = h
}
)");
  CHECK(!c.module);
  CHECK(contains(c.diags, "the model is too large"));
  // Broadcasting two large shapes would overflow the element count.
  Compiled big = compileText(R"(
model m {
  input a: f32[1073741824, 1]
  input b: f32[1, 1073741824]
  output y = a * b
}
)");
  CHECK(!big.module);
  CHECK(contains(big.diags, "elements, more than the limit of 2^40"));
}

TEST_CASE("frontend lower: random token soup never crashes") {
  // A cheap, deterministic stand-in for the fuzzer: random sequences drawn
  // from the language's own tokens.
  const char *words[] = {
      "const",  "model",     "block",   "input", "param", "output", "loss",
      "return", "repeat",    "train",   "x",     "h",     "w",      "f",
      "B",      "D",         "f32",     "i32",   "=",     "+",      "-",
      "*",      "/",         "@",       "(",     ")",     "[",      "]",
      "{",      "}",         ",",       ":",     "->",    "\n",     "0",
      "1",      "2",         "-1",      "0.5",   "1e9",   "relu",   "softmax",
      "concat", "transpose", "reshape", "sum",   "axis",  "zeros",  "normal",
      "true",   ";"};
  const size_t numWords = sizeof(words) / sizeof(words[0]);
  std::string prefix = "const B = 2, D = 3\nblock f(x: f32[B, D]) -> "
                       "f32[B, D] {\n  param w: f32[D, D] = zeros\n  return "
                       "x @ w\n}\nmodel m {\n  input x: f32[B, D]\n";
  for (uint64_t trial = 0; trial < 300; ++trial) {
    std::string text = prefix;
    size_t n = 5 + randomBits(7, trial, 0) % 60;
    for (size_t i = 0; i < n; ++i) {
      text += words[randomBits(7, trial, i + 1) % numWords];
      text += ' ';
    }
    text += "\n}\n";
    Compiled c = compileText(text);
    // Either a module or at least one error: never silence about failure.
    CHECK((c.module != nullptr) == (c.errors == 0));
  }
}

namespace {
// Compiles `text` with --batch-size `batch`: the diagnostics, and the
// leading dimension of each input ("" when the model did not compile).
std::pair<std::string, std::string> withBatchSize(const std::string &text,
                                                  int64_t batch,
                                                  ConstOverrides defines = {}) {
  std::string diags;
  llvm::raw_string_ostream os(diags);
  DiagnosticEngine diag(os);
  CompileOptions options;
  options.defines = std::move(defines);
  options.batchSize = batch;
  auto module = compileModelSource("b.mg", text, options, diag);
  std::string leads;
  if (module && !diag.hasErrors())
    for (const ir::Value *input : module->graph().inputs())
      leads += input->name() + "=" +
               std::to_string(input->type().shape.front()) + " ";
  return {os.str(), leads};
}
} // namespace

TEST_CASE("--batch-size sets the constant the first input's batch is written "
          "with, and nothing else") {
  const std::string model = "const B = 4, T = 4, D = 3\n"
                            "const H = B * 2\n"
                            "model m {\n"
                            "  input x: f32[B, T, D]\n"
                            "  input pos: i32[T]\n"
                            "  input y: f32[B, T, D]\n"
                            "  param w: f32[D, D]\n"
                            "  loss = mse(x @ w, y)\n"
                            "  output p = pos\n"
                            "}\n";
  auto [diags, leads] = withBatchSize(model, 6);
  CHECK(diags == "");
  // T = B = 4 in the file: only B moves.
  CHECK(leads == "x=6 pos=4 y=6 ");
  // -D of the same value agrees; of another is refused.
  CHECK(withBatchSize(model, 6, {{"B", "6"}}).second == "x=6 pos=4 y=6 ");
  CHECK(withBatchSize(model, 6, {{"B", "6.0"}}).second == "x=6 pos=4 y=6 ");
  CHECK(withBatchSize(model, 6, {{"B", "5"}}).first ==
        "mgc: error: --batch-size 6 and -D B=5 set the batch constant 'B' "
        "differently\n");
  CHECK(withBatchSize(model, 6, {{"T", "5"}}).second == "x=6 pos=5 y=6 ");
}

TEST_CASE("--batch-size is refused where the batch is not a constant") {
  auto expression = withBatchSize("const B = 4\n"
                                  "model m {\n"
                                  "  input x: f32[B * 2, 3]\n"
                                  "  output y = x\n"
                                  "}\n",
                                  8);
  CHECK(llvm::StringRef(expression.first)
            .startswith("b.mg:3:18: error: --batch-size 8: the batch (the "
                        "leading dimension of input 'x') is not written as a "
                        "constant of the file"));
  CHECK(expression.second == "");
  auto scalar = withBatchSize("model m {\n"
                              "  input s: f32[]\n"
                              "  output y = s\n"
                              "}\n",
                              8);
  CHECK(scalar.first == "mgc: error: --batch-size 8: the model has no batch to "
                        "size (its first input 's' is a scalar)\n");
  auto none = withBatchSize("model m {\n"
                            "  param w: f32[2]\n"
                            "  output y = w\n"
                            "}\n",
                            8);
  CHECK(none.first ==
        "mgc: error: --batch-size 8: the model has no batch to size (it has no "
        "input)\n");
  CHECK(withBatchSize("const B = 4\nmodel m {\n  input x: f32[B]\n  output "
                      "y = x\n}\n",
                      -2)
            .first ==
        "mgc: error: --batch-size -2: expected a positive number of "
        "samples\n");
}
