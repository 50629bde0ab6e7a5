// The IR text form: exact round trip for every op kind, the printed layout,
// and the parser's error messages and positions.
#include "ir/Builder.h"
#include "ir/Printer.h"
#include "ir/TextParser.h"
#include "ir/Verifier.h"

#include "llvm/Support/raw_ostream.h"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <string_view>

using namespace mgc;
using namespace mgc::ir;
using namespace std::literals;

namespace {

TensorType f32(llvm::ArrayRef<int64_t> shape) {
  return TensorType(DType::F32, shape);
}

// Parses `text`, collecting diagnostics in `diagOut`.
std::unique_ptr<Module> parse(llvm::StringRef text, std::string &diagOut,
                              llvm::StringRef file = "t.mgir") {
  llvm::raw_string_ostream os(diagOut);
  DiagnosticEngine diag(os);
  auto m = parseModuleText(file, text, diag);
  os.flush();
  return m;
}

// A module that uses every op kind of OpKinds.def, every init kind, module
// attributes of every type, scopes and locations.
struct AllOpsModule {
  Module module{"all_ops"};
  std::set<OpKind> covered;

  AllOpsModule() {
    Attrs &ma = module.attrs();
    ma.set("lr", 3e-4);
    ma.set("optimizer", std::string("adamw"));
    ma.set("steps", int64_t(-10));
    ma.set("nesterov", true);
    ma.set("milestones", std::vector<int64_t>{100, -200});
    ma.set("empty", std::vector<int64_t>{});
    ma.set("note", std::string("say \"hi\" \\ then\n\ttab \x01 end"));
    ma.set("tiny", 5e-324);
    ma.set("huge", -1.7976931348623157e308);
    ma.set("inf", std::numeric_limits<double>::infinity());

    Graph &g = module.graph();
    Loc l1 = Loc::make("model.mg", 3, 3);
    Value *x = g.addInput("x", f32({2, 3, 4}), l1);
    Value *ids = g.addInput("ids", TensorType(DType::I32, {2, 3}),
                            Loc::make("model.mg", 4, 3));
    Value *w = g.addParam("w", f32({4, 4}), Init{InitKind::Normal, 0, 0.02},
                          Loc::make("model.mg", 5, 3));
    Value *table = g.addParam("embed.table", f32({10, 4}),
                              Init{InitKind::Uniform, -0.1, 0.1});
    Value *gamma = g.addParam("ln.gamma", f32({4}), Init{InitKind::Ones});
    Value *beta = g.addParam("ln.beta", f32({4}), Init{InitKind::Zeros});
    g.addParam("blocks.0.attn.w_qkv", f32({4, 12}), Init{InitKind::Xavier});
    g.addParam("weird name\"", f32({1}), Init{InitKind::Normal, -0.0, 1e-20});

    Builder b(g);
    b.setLoc(Loc::make("model.mg", 12, 5));
    Value *c = b.constant(0.5, DType::F32);
    covered.insert(OpKind::Constant);
    make(b, OpKind::Cast, {x}, {{"dtype", std::string("f64")}});
    for (OpKind k :
         {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div, OpKind::Mse})
      make(b, k, {x, x});
    b.setScope("blocks.0.attn");
    for (OpKind k : {OpKind::Neg, OpKind::Exp, OpKind::Log, OpKind::Sqrt,
                     OpKind::Rsqrt, OpKind::Tanh, OpKind::Relu, OpKind::Gelu,
                     OpKind::Sigmoid, OpKind::Softmax, OpKind::LogSoftmax})
      make(b, k, {x});
    b.setLoc(Loc{});
    make(b, OpKind::Dropout, {x}, {{"p", 0.1}, {"seed", int64_t(42)}});
    make(b, OpKind::Layernorm, {x, gamma, beta}, {{"eps", 1e-5}});
    b.setScope("");
    Value *h = make(b, OpKind::Matmul, {x, w});
    make(b, OpKind::Embedding, {table, ids});
    make(b, OpKind::Reshape, {x}, {{"shape", std::vector<int64_t>{6, 4}}});
    Value *xt = make(b, OpKind::Transpose, {x},
                     {{"perm", std::vector<int64_t>{0, 2, 1}}});
    make(b, OpKind::Slice, {x},
         {{"axis", int64_t(1)}, {"start", int64_t(0)}, {"end", int64_t(2)}});
    make(b, OpKind::Concat, {x, h, x}, {{"axis", int64_t(-3)}});
    make(b, OpKind::Broadcast, {gamma},
         {{"shape", std::vector<int64_t>{2, 3, 4}}});
    make(b, OpKind::Sum, {x}, {{"axes", std::vector<int64_t>{1}}});
    make(b, OpKind::Mean, {x}, {{"axes", std::vector<int64_t>{0, 2}}});
    make(b, OpKind::Max, {x},
         {{"axes", std::vector<int64_t>{}}, {"keepdims", true}});
    Value *scores = make(b, OpKind::Matmul, {x, xt});
    make(b, OpKind::CausalMask, {scores});
    Value *att = make(b, OpKind::Attention, {x, x, x});
    b.setLoc(Loc::make("other file.mg", 1, 0));
    Value *loss = make(b, OpKind::CrossEntropy, {att, ids});
    // The internal backward ops (created by autodiff).
    b.setScope("blocks.0.attn");
    for (OpKind k : {OpKind::ReluGrad, OpKind::GeluGrad, OpKind::SigmoidGrad,
                     OpKind::TanhGrad})
      make(b, k, {x, x});
    make(b, OpKind::SoftmaxGrad, {x, x}, {{"axis", int64_t(1)}});
    make(b, OpKind::LogSoftmaxGrad, {x, x}, {{"axis", int64_t(-1)}});
    make(b, OpKind::LayernormGradX, {x, x, gamma}, {{"eps", 1e-6}});
    Value *pos = g.addInput("pos", TensorType(DType::I32, {3}));
    make(b, OpKind::Rope, {x, pos}, {{"theta", 500.0}, {"inverse", true}});
    make(b, OpKind::EmbeddingGrad, {att, ids}, {{"rows", int64_t(10)}});
    Value *mx =
        make(b, OpKind::Max, {x},
             {{"axes", std::vector<int64_t>{0, 2}}, {"keepdims", true}});
    make(b, OpKind::MaxGrad, {mx, x, mx},
         {{"axes", std::vector<int64_t>{0, 2}}, {"keepdims", true}});
    make(b, OpKind::CausalMaskGrad, {scores});
    make(b, OpKind::Attention, {x, x, x, scores}, {{"causal", false}});
    make(b, OpKind::AttentionGrad, {x, x, x, x, x, scores},
         {{"causal", false}});
    make(b, OpKind::CrossEntropyGrad, {loss, att, ids});
    // Tensor parallelism over a vocabulary.
    Value *rowMax =
        make(b, OpKind::Max, {att}, {{"axes", std::vector<int64_t>{-1}}});
    Value *rowSum = make(b, OpKind::SumExp, {att, rowMax});
    make(b, OpKind::ClassLogit, {att, ids});
    make(b, OpKind::CrossEntropyGradStats, {loss, att, rowMax, rowSum, ids},
         {{"axis", std::string("tp")},
          {"sizes", std::vector<int64_t>{4, 4}},
          {"part", int64_t(-1)}});
    Attrs part{{"axis", std::string("tp")},
               {"sizes", std::vector<int64_t>{6, 4}},
               {"part", int64_t(1)}};
    Value *rows = make(
        b, OpKind::Slice, {table},
        {{"axis", int64_t(0)}, {"start", int64_t(6)}, {"end", int64_t(10)}});
    make(b, OpKind::EmbeddingPart, {rows, ids}, part);
    make(b, OpKind::EmbeddingGradPart, {att, ids}, part);
    make(b, OpKind::AllReduceMax, {rowMax}, {{"axis", std::string("tp")}});
    make(b, OpKind::Fused, {x, gamma},
         {{"expr", std::string("mul(%0, %1); add(#0, -0.5); gelu(#1)")},
          {"shape", std::vector<int64_t>(x->type().shape.begin(),
                                         x->type().shape.end())},
          {"dtype", std::string("f32")}});
    make(b, OpKind::MatmulEpilogue, {x, w, gamma},
         {{"epilogue", std::string("bias_gelu")}});
    // Convolution and pooling over an image batch.
    Value *img = g.addInput("img", f32({2, 4, 6, 6}));
    Value *filt = g.addParam("filt", f32({8, 2, 3, 3}), Init{InitKind::Zeros});
    filt->setFrozen(true); // printed and parsed as `frozen`
    using Ints = std::vector<int64_t>;
    Attrs conv{{"stride", Ints{2, 2}},
               {"padding", Ints{1, 1}},
               {"dilation", Ints{1, 1}},
               {"groups", int64_t(2)}};
    Value *fm = make(b, OpKind::Conv2d, {img, filt}, conv);
    Attrs convX = conv, convW = conv;
    convX.set("in_hw", Ints{6, 6});
    convW.set("kernel", Ints{3, 3});
    make(b, OpKind::Conv2dGradX, {fm, filt}, convX);
    make(b, OpKind::Conv2dGradW, {fm, img}, convW);
    Attrs window{{"kernel", Ints{2, 2}}, {"stride", Ints{2, 2}}};
    Value *pooled = make(b, OpKind::MaxPool2d, {img}, window);
    make(b, OpKind::MaxPool2dGrad, {pooled, img}, window);
    window.set("count_include_pad", false);
    make(b, OpKind::AvgPool2d, {img}, window);
    window.set("in_hw", Ints{6, 6});
    make(b, OpKind::AvgPool2dGrad, {pooled}, window);
    b.setScope("");
    // Op kinds added to the table after this list was written (for example
    // the internal ops of passes) are built from whatever operands and
    // attribute values their shape rules accept.
    b.setScope("grads");
    std::vector<Value *> pool = {x, ids, w, gamma, scores, loss, att, table};
    for (const OpInfo &info : allOpInfos())
      if (!covered.count(info.kind))
        makeAny(b, info, pool);
    g.addOutput("logits", att, false, Loc::make("model.mg", 30, 3));
    g.addOutput("loss", loss, true);
    g.addOutput("half", c);
  }

  Value *make(Builder &b, OpKind kind, std::vector<Value *> operands,
              Attrs attrs = {}) {
    ValueOrError r = b.create(kind, operands, std::move(attrs));
    INFO(opName(kind).str(), ": ", r.error);
    REQUIRE(r.ok());
    covered.insert(kind);
    return r.value;
  }

  // Tries every tuple of operands from `pool` and a few values for each
  // required attribute; creates the first op that the shape rule accepts.
  void makeAny(Builder &b, const OpInfo &info, llvm::ArrayRef<Value *> pool) {
    std::vector<std::vector<AttrValue>> choices;
    for (const AttrSpec &spec : info.attrs) {
      if (spec.defaultValue) {
        choices.push_back({*spec.defaultValue});
        continue;
      }
      switch (spec.type) {
      case AttrType::Bool:
        choices.push_back({false, true});
        break;
      case AttrType::Int:
        choices.push_back({int64_t(10), int64_t(1), int64_t(0), int64_t(-1)});
        break;
      case AttrType::Float:
        choices.push_back({0.5, 2.0});
        break;
      case AttrType::String:
        choices.push_back({std::string("f32"), std::string("i32")});
        break;
      case AttrType::Ints:
        choices.push_back({std::vector<int64_t>{}, std::vector<int64_t>{0},
                           std::vector<int64_t>{-1}});
        break;
      }
    }
    size_t attrCombos = 1;
    for (const auto &c : choices)
      attrCombos *= c.size();
    int arity = info.arity >= 0 ? info.arity : 2;
    size_t tuples = 1;
    for (int i = 0; i < arity; ++i)
      tuples *= pool.size();
    for (size_t t = 0; t < tuples; ++t) {
      std::vector<Value *> operands;
      for (size_t i = 0, rest = t; i < size_t(arity); ++i, rest /= pool.size())
        operands.push_back(pool[rest % pool.size()]);
      for (size_t a = 0; a < attrCombos; ++a) {
        Attrs attrs;
        for (size_t i = 0, rest = a; i < choices.size(); ++i) {
          attrs.set(info.attrs[i].name, choices[i][rest % choices[i].size()]);
          rest /= choices[i].size();
        }
        if (b.create(info.kind, operands, attrs).ok()) {
          covered.insert(info.kind);
          return;
        }
      }
    }
  }
};

const char *const kExample = R"(// A hand-written module.
module @mlp attributes {lr = 3e-04, optimizer = "adamw"} {
  input %x : f32[64, 784]
  input %y : i32[64]
  param %w1 : f32[784, 1024] = normal(0.0, 0.02)
  param %b1 : f32[1024] = zeros
  param %blocks.0.attn.w_qkv : f32[768, 2304] = xavier
  %0 = matmul(%x, %w1) : f32[64, 1024]
  %1 = broadcast(%b1) {shape = [64, 1024]} : f32[64, 1024]
  %2 = add(%0, %1) : f32[64, 1024]
  %3 = sum(%2) {axes = [1], keepdims = false} : f32[64] scope "blocks.0.attn" loc("samples/mlp.mg":12:5)
  %4 = constant() {dtype = "f32", value = 0.5} : f32[]
  %5 = cross_entropy(%2, %y) : f32[]
  output logits = %2
  output loss = %5 [loss]
}
)";

} // namespace

TEST_CASE("IR text: every op kind round-trips exactly") {
  AllOpsModule all;
  for (const OpInfo &info : allOpInfos()) {
    INFO("op kind not covered by the test module: ", info.name.str());
    CHECK(all.covered.count(info.kind));
  }
  {
    std::string diagText;
    llvm::raw_string_ostream os(diagText);
    DiagnosticEngine diag(os);
    CHECK(succeeded(verify(all.module, diag)));
    os.flush();
    CHECK(diagText.empty());
  }
  for (bool locations : {false, true}) {
    PrintOptions opts;
    opts.locations = locations;
    std::string text = printModuleToString(all.module, opts);
    std::string diagText;
    auto parsed = parse(text, diagText);
    INFO("locations: ", locations, "\n", text, "\n", diagText);
    REQUIRE(parsed);
    CHECK(diagText.empty());
    CHECK(printModuleToString(*parsed, opts) == text);
    // Beyond the text: the parsed module holds the same IR.
    CHECK(parsed->name() == all.module.name());
    CHECK(parsed->attrs() == all.module.attrs());
    const Graph &a = all.module.graph(), &b = parsed->graph();
    REQUIRE(a.arguments().size() == b.arguments().size());
    for (size_t i = 0; i < a.arguments().size(); ++i) {
      CHECK(a.arguments()[i]->name() == b.arguments()[i]->name());
      CHECK(a.arguments()[i]->type() == b.arguments()[i]->type());
      CHECK(a.arguments()[i]->kind() == b.arguments()[i]->kind());
      CHECK(a.arguments()[i]->init() == b.arguments()[i]->init());
      if (locations)
        CHECK(a.arguments()[i]->loc() == b.arguments()[i]->loc());
    }
    REQUIRE(a.numOps() == b.numOps());
    for (auto ia = a.ops().begin(), ib = b.ops().begin(); ia != a.ops().end();
         ++ia, ++ib) {
      CHECK((*ia)->kind() == (*ib)->kind());
      CHECK((*ia)->attrs() == (*ib)->attrs());
      CHECK((*ia)->type() == (*ib)->type());
      CHECK((*ia)->scope() == (*ib)->scope());
      CHECK((*ia)->numOperands() == (*ib)->numOperands());
      if (locations)
        CHECK((*ia)->loc() == (*ib)->loc());
    }
    REQUIRE(a.outputs().size() == b.outputs().size());
    for (size_t i = 0; i < a.outputs().size(); ++i) {
      CHECK(a.outputs()[i].name == b.outputs()[i].name);
      CHECK(a.outputs()[i].isLoss == b.outputs()[i].isLoss);
      if (locations)
        CHECK(a.outputs()[i].loc == b.outputs()[i].loc);
    }
  }
}

TEST_CASE("IR text: printed lines") {
  AllOpsModule all;
  std::string text = printModuleToString(all.module);
  auto has = [&](const std::string &line) {
    INFO("missing: ", line);
    CHECK(text.find(line) != std::string::npos);
  };
  has("module @all_ops attributes {empty = [], huge = "
      "-1.7976931348623157e+308, "
      "inf = inf, lr = 3e-04, milestones = [100, -200], nesterov = true, "
      "note = \"say \\\"hi\\\" \\\\ then\\n\\ttab \\x01 end\", "
      "optimizer = \"adamw\", steps = -10, tiny = 5e-324} {\n");
  has("\n  input %x : f32[2, 3, 4]\n  input %ids : i32[2, 3]\n");
  has("\n  param %w : f32[4, 4] = normal(0.0, 0.02)\n");
  has("\n  param %embed.table : f32[10, 4] = uniform(-0.1, 0.1)\n");
  has("\n  param %ln.gamma : f32[4] = ones\n");
  has("\n  param %ln.beta : f32[4] = zeros\n");
  has("\n  param %blocks.0.attn.w_qkv : f32[4, 12] = xavier\n");
  has("\n  param %\"weird name\\\"\" : f32[1] = normal(-0.0, 1e-20)\n");
  has("\n  %0 = constant() {dtype = \"f32\", value = 0.5} : f32[]\n");
  has("\n  %1 = cast(%x) {dtype = \"f64\"} : f64[2, 3, 4]\n");
  has("\n  %2 = add(%x, %x) : f32[2, 3, 4]\n");
  has("\n  %7 = neg(%x) : f32[2, 3, 4] scope \"blocks.0.attn\"\n");
  has("\n  %20 = matmul(%x, %w) : f32[2, 3, 4]\n");
  has(" = concat(%x, %20, %x) {axis = -3} : f32[6, 3, 4]\n");
  has(" = max(%x) {axes = [], keepdims = true} : f32[2, 3, 4]\n");
  has("\n  output logits = %32\n  output loss = %33 [loss]\n"
      "  output half = %0\n}\n");
  CHECK(text.find("loc(") == std::string::npos);

  PrintOptions opts;
  opts.locations = true;
  std::string withLocs = printModuleToString(all.module, opts);
  INFO(withLocs);
  CHECK(withLocs.find("\n  input %x : f32[2, 3, 4] loc(\"model.mg\":3:3)\n") !=
        std::string::npos);
  CHECK(withLocs.find("= ones loc(unknown)\n") != std::string::npos);
  CHECK(withLocs.find("\n  %7 = neg(%x) : f32[2, 3, 4] scope "
                      "\"blocks.0.attn\" loc(\"model.mg\":12:5)\n") !=
        std::string::npos);
  CHECK(withLocs.find(" : f32[] loc(\"other file.mg\":1:0)\n") !=
        std::string::npos);
  CHECK(withLocs.find("\n  output logits = %32 loc(\"model.mg\":30:3)\n") !=
        std::string::npos);
}

TEST_CASE("IR text: the documented example parses and prints back") {
  std::string diagText;
  auto m = parse(kExample, diagText, "example.mgir");
  INFO(diagText);
  REQUIRE(m);
  std::string text = printModuleToString(*m);
  // The comment and the loc(...) go (locations print only on request);
  // everything else prints as written.
  std::string expected = llvm::StringRef(kExample).split('\n').second.str();
  std::string loc = " loc(\"samples/mlp.mg\":12:5)";
  expected.erase(expected.find(loc), loc.size());
  CHECK(text == expected);
  // Ops without loc(...) point at their own line of the file.
  auto it = m->graph().ops().begin();
  CHECK((*it)->loc() == Loc::make("example.mgir", 8, 3));
  std::advance(it, 3);
  CHECK((*it)->loc() == Loc::make("samples/mlp.mg", 12, 5));
  CHECK((*it)->scope() == "blocks.0.attn");
  CHECK(m->graph().arguments()[0]->loc() == Loc::make("example.mgir", 3, 3));
  CHECK(m->graph().outputs()[1].loc == Loc::make("example.mgir", 15, 3));
  CHECK(m->graph().outputs()[1].isLoss);
  CHECK(m->attrs().getFloat("lr") == 0.0003);
}

TEST_CASE("IR text: result names are free-form and renumbered") {
  const char *text = R"(module @m {
  input %x : f32[2]
  %tmp.a = neg(%x) : f32[2] // a comment
  %7 = exp(%tmp.a) : f32[2]
  %"with space" = add(%7, %tmp.a) : f32[2]
  %1 = constant() {value = 2, dtype = "i32"} : i32[]
  output y = %"with space"
  output "odd name" = %1
}
)";
  std::string diagText;
  auto m = parse(text, diagText);
  INFO(diagText);
  REQUIRE(m);
  CHECK(printModuleToString(*m) == R"(module @m {
  input %x : f32[2]
  %0 = neg(%x) : f32[2]
  %1 = exp(%0) : f32[2]
  %2 = add(%1, %0) : f32[2]
  %3 = constant() {dtype = "i32", value = 2.0} : i32[]
  output y = %2
  output "odd name" = %3
}
)");
}

TEST_CASE("IR text: results are numbered around numeric argument names") {
  Module m("m");
  Graph &g = m.graph();
  Value *a = g.addInput("0", f32({2}));
  Builder b(g);
  Value *n = b.create(OpKind::Neg, {a}).value;
  Value *e = b.create(OpKind::Exp, {n}).value;
  g.addOutput("y", e);
  std::string text = printModuleToString(m);
  CHECK(text == "module @m {\n  input %\"0\" : f32[2]\n  %1 = neg(%\"0\") : "
                "f32[2]\n  %2 = exp(%1) : f32[2]\n  output y = %2\n}\n");
  std::string diagText;
  auto parsed = parse(text, diagText);
  INFO(diagText);
  REQUIRE(parsed);
  CHECK(printModuleToString(*parsed) == text);
}

TEST_CASE("IR text: an empty module") {
  Module m("");
  std::string text = printModuleToString(m);
  CHECK(text == "module @\"\" {\n}\n");
  std::string diagText;
  auto parsed = parse(text, diagText);
  REQUIRE(parsed);
  CHECK(printModuleToString(*parsed) == text);
}

namespace {

struct ErrorCase {
  std::string_view text;
  const char *message; // expected in the diagnostics output
};

} // namespace

TEST_CASE("IR text: each parse error at its line and column") {
  const ErrorCase cases[] = {
      {"", "t.mgir:1:1: error: expected 'module', found end of file"},
      {"// only a comment\n",
       "t.mgir:2:1: error: expected 'module', found end of file"},
      {"modul @m {}", "t.mgir:1:1: error: expected 'module', found 'modul'"},
      {"module m {}", "t.mgir:1:8: error: expected module name '@name' after "
                      "'module', found 'm'"},
      {"module @m\n  input %x : f32[2]\n}",
       "t.mgir:2:3: error: expected '{' to begin the module body, found "
       "'input'"},
      {"module @m {\n  %0 = matmull(%x) : f32[]\n}",
       "t.mgir:2:8: error: unknown op 'matmull'"},
      {"module @m {\n  input %x : f32[2]\n  %0 = neg(%7) : f32[2]\n}",
       "t.mgir:3:12: error: use of undefined value '%7'"},
      {"module @m {\n  input %x : f32[2]\n  %0 = neg(%0) : f32[2]\n}",
       "t.mgir:3:12: error: use of undefined value '%0'"},
      {"module @m {\n  input %x : f32[2]\n  %3 = neg(%x) : f32[2]\n"
       "  %3 = neg(%x) : f32[2]\n}",
       "t.mgir:4:3: error: redefinition of value '%3'"},
      {"module @m {\n  input %x : f32[2]\n  param %x : f32[2] = zeros\n}",
       "t.mgir:3:9: error: redefinition of value '%x'"},
      {"module @m {\n  input %x : f33[2]\n}",
       "t.mgir:2:14: error: unknown dtype 'f33'"},
      {"module @m {\n  input %x : f32[2]\n  %0 = neg(%x) {} {}\n}",
       "t.mgir:3:19: error: expected ':' after attributes, found '{'"},
      {"module @m {\n  input %x : f32[2]\n  %0 = neg(%x) f32[2]\n}",
       "t.mgir:3:16: error: expected ':' after operand list, found 'f32'"},
      {"module @m {\n  input %x : f32[2]\n  %0 = neg(%x : f32[2]\n}",
       "t.mgir:3:15: error: expected ')' or ',' in the operand list, found "
       "':'"},
      {"module @m {\n  input %x : f32[99999999999999999999]\n}",
       "t.mgir:2:18: error: integer out of range: '99999999999999999999'"},
      {"module @m {\n  input %x : f32[-2]\n}",
       "t.mgir:2:18: error: dimension size must not be negative, found '-2'"},
      {"module @m {\n  input %x : f32[2,]\n}",
       "t.mgir:2:20: error: expected dimension size, found ']'"},
      {"module @m attributes {a = 1e999} {\n}",
       "t.mgir:1:27: error: number out of range: '1e999'"},
      {"module @m attributes {a = 1, a = 2} {\n}",
       "t.mgir:1:30: error: duplicate attribute 'a'"},
      {"module @m attributes {a = [1, 2.5]} {\n}",
       "t.mgir:1:31: error: expected integer in the list, found '2.5'"},
      {"module @m attributes {a = \"abc} {\n}",
       "t.mgir:1:27: error: unterminated string"},
      {"module @m attributes {a = \"a\\qb\"} {\n}",
       "t.mgir:1:29: error: invalid escape sequence '\\q' in string"},
      {"module @\"abc", "t.mgir:1:9: error: unterminated string"},
      {"module @m {\n  input %x : f32[2]\n  output y = %x [los]\n}",
       "t.mgir:3:18: error: expected 'loss' in '[loss]', found 'los'"},
      {"module @m {\n  param %w : f32[2] = gaussian(0, 1)\n}",
       "t.mgir:2:23: error: unknown initialiser 'gaussian'"},
      {"module @m {\n  param %w : f32[2] = normal(0 1)\n}",
       "t.mgir:2:32: error: expected ',' between the two numbers of 'normal', "
       "found '1'"},
      {"module @m {\n  input %x : f32[2] loc(\"a.mg\":0:1)\n}",
       "t.mgir:2:32: error: line number out of range: '0'"},
      {"module @m {\n  input %x : f32[2] loc(a.mg:1:1)\n}",
       "t.mgir:2:25: error: expected file name string or 'unknown' in "
       "loc(...), found 'a.mg'"},
      {"module @m {\n  input %x : f32[2]\n  foo\n}",
       "t.mgir:3:3: error: expected 'input', 'param', 'state', 'output', "
       "'update', an op ('%name = ...') or '}', found 'foo'"},
      {"module @m {\n  input %x : f32[2]\n  %0 = neg(%x) : f32[2] $\n}",
       "t.mgir:3:25: error: unexpected character '$'"},
      {"module @m {\n  input %x : f32[2]\0\n}"sv,
       "t.mgir:2:20: error: unexpected character '\\x00'"},
      {"module @m {\n  input %x : f32[2]\n",
       "t.mgir:3:1: error: expected '}' at the end of the module, found end "
       "of file"},
      {"module @m {\n}\nmodule @n {\n}\n",
       "t.mgir:3:1: error: expected end of file after the module, found "
       "'module'"},
      {"module @m {\n  input %x : f32[2]\n  %0 = neg(%x) : f32[2 2]\n}",
       "t.mgir:3:24: error: expected ',' or ']' in the shape, found '2'"},
      {"module @m {\n  input %x : f32[2]\n  %0 = neg(%x) : f32[2] scope x\n}",
       "t.mgir:3:31: error: expected scope string after 'scope', found 'x'"},
      {"module @m {\n  input % : f32[2]\n}",
       "t.mgir:2:9: error: expected a name after '%'"},
      {"module @m {\n  input %x : f32[12abc]\n}",
       "t.mgir:2:18: error: invalid number '12abc'"},
      // Errors found by the verifier point at the line of the op.
      {"module @m {\n  input %x : f32[2]\n  %0 = neg(%x) : f32[3]\n}",
       "t.mgir:3:3: error: op %0 (neg) declares result type f32[3] but its "
       "operands give f32[2]"},
      {"module @m {\n  input %x : f32[2]\n  %0 = add(%x) : f32[2]\n}",
       "t.mgir:3:3: error: op %0 (add): add takes 2 operands, got 1"},
      {"module @m {\n  input %x : f32[2]\n  output y = %x [loss]\n}",
       "t.mgir:3:3: error: loss output 'y' must be a floating-point scalar, "
       "got f32[2]"},
      {"module @m {\n  input %x : f32[2]\n  %0 = sum(%x) {axes = 1, "
       "keepdims = false} : f32[]\n}",
       "t.mgir:3:3: error: op %0 (sum): sum attribute 'axes' must be int "
       "list, got 1"},
  };
  for (const ErrorCase &c : cases) {
    std::string diagText;
    llvm::StringRef text(c.text.data(), c.text.size());
    auto m = parse(text, diagText);
    INFO("input:\n", text.str(), "\ndiagnostics:\n", diagText);
    CHECK(!m);
    CHECK(diagText.find(c.message) != std::string::npos);
  }
}

TEST_CASE("IR text: several errors, without cascades") {
  const char *text = "module @m {\n"
                     "  input %x : f32[2]\n"
                     "  %0 = nope(%x) : f32[2]\n" // unknown op
                     "  %1 = neg(%0) : f32[2]\n"  // uses the failed %0
                     "  %2 = neg(%x) : g32[2]\n"  // unknown dtype
                     "  output y = %2\n"          // uses the failed %2
                     "  output z = %9\n"          // a new error
                     "}\n";
  std::string diagText;
  auto m = parse(text, diagText);
  INFO(diagText);
  CHECK(!m);
  CHECK(diagText.find("t.mgir:3:8: error: unknown op 'nope'") !=
        std::string::npos);
  CHECK(diagText.find("t.mgir:5:18: error: unknown dtype 'g32'") !=
        std::string::npos);
  CHECK(diagText.find("t.mgir:7:14: error: use of undefined value '%9'") !=
        std::string::npos);
  size_t errors = 0;
  for (size_t pos = 0;
       (pos = diagText.find("error:", pos)) != std::string::npos; ++pos)
    ++errors;
  CHECK(errors == 3);
}

TEST_CASE("IR text: the source line and a caret are shown") {
  std::string diagText;
  parse("module @m {\n  %0 = matmull() : f32[]\n}\n", diagText);
  CHECK(diagText == "t.mgir:2:8: error: unknown op 'matmull'\n"
                    "  %0 = matmull() : f32[]\n"
                    "       ^\n");
}

TEST_CASE("IR text: hostile inputs never crash") {
  std::string deep =
      "module @m attributes {a = " + std::string(100000, '[') + "} {\n}\n";
  std::string diagText;
  CHECK(!parse(deep, diagText));
  CHECK(diagText.find("t.mgir:1:28: error: expected integer in the list, "
                      "found '['") != std::string::npos);

  // Random edits of a valid module: every input is either rejected with a
  // diagnostic or parses into a module that round-trips.
  AllOpsModule all;
  PrintOptions opts;
  opts.locations = true;
  const std::string base = printModuleToString(all.module, opts);
  std::mt19937 rng(12345);
  const char alphabet[] = "%@\"\\{}[]():=,-.0123456789e \n\tabcfilnoprstux";
  int parsedOk = 0;
  for (int iter = 0; iter < 400; ++iter) {
    std::string text = base;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t pos = rng() % (text.size() + 1);
      char c = static_cast<char>(
          rng() % 8 == 0 ? rng() % 256
                         : alphabet[rng() % (sizeof(alphabet) - 1)]);
      switch (rng() % 3) {
      case 0:
        text.insert(pos, 1, c);
        break;
      case 1:
        if (pos < text.size())
          text.erase(pos, 1);
        break;
      default:
        if (pos < text.size())
          text[pos] = c;
        break;
      }
    }
    std::string out;
    auto m = parse(text, out);
    if (m) {
      ++parsedOk;
      std::string once = printModuleToString(*m, opts);
      std::string out2;
      auto again = parse(once, out2);
      REQUIRE(again);
      CHECK(printModuleToString(*again, opts) == once);
    } else {
      INFO(text);
      CHECK(out.find("error:") != std::string::npos);
    }
  }
  CHECK(parsedOk < 400);
}

TEST_CASE("IR text: a large module parses") {
  std::string text = "module @big {\n  input %x : f32[8]\n";
  std::string prev = "%x";
  for (int i = 0; i < 20000; ++i) {
    text += "  %" + std::to_string(i) + " = neg(" + prev + ") : f32[8]\n";
    prev = "%" + std::to_string(i);
  }
  text += "  output y = " + prev + "\n}\n";
  std::string diagText;
  auto m = parse(text, diagText);
  REQUIRE(m);
  CHECK(m->graph().numOps() == 20000);
  CHECK(printModuleToString(*m) == text);
}
