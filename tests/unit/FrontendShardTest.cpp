// Placement hints in .mg files: shard(NAME, AXIS=PLACEMENT, ...) sets the
// sharding of parameters (every copy of a block's) and inputs; bad hints are
// reported once, and no malformed hint crashes the compiler.
#include "FrontendTestSupport.h"

#include "frontend/Parser.h"

#include <doctest/doctest.h>

using namespace mgc;
using namespace mgc::frontend;
using namespace mgc::frontend::testing;
using ir::Placement;
using ir::Sharding;

namespace {

const char *kLayers = R"(
const B = 2, D = 4, F = 8
block mlp(x: f32[B, D]) -> f32[B, D] {
  param w_fc: f32[D, F] = normal(0, 0.02)
  param b_fc: f32[F] = zeros
  param w_proj: f32[F, D] = normal(0, 0.02)
  shard(w_fc, tp=S1)
  shard(b_fc, tp=S-1, dp=R)
  shard(w_proj, tp=S0)
  return gelu(x @ w_fc + b_fc) @ w_proj
}
model m {
  input x: f32[B, D]
  param w: f32[D, D] = zeros
  shard(x, dp=S0)
  h = x @ w
  h = repeat 3 blocks { mlp(h) }
  output y = h
}
)";

} // namespace

TEST_CASE("frontend shard: hints parse as shard statements") {
  std::string diags;
  llvm::raw_string_ostream os(diags);
  DiagnosticEngine diag(os);
  FileAST file = parseSource("t.mg", R"(
model m {
  input x: f32[2]
  shard(x, dp=S0, tp=S-1)
  output y = x
}
)",
                             diag);
  os.flush();
  INFO(diags);
  REQUIRE(diag.errorCount() == 0);
  REQUIRE(file.models.size() == 1);
  const Stmt &s = file.models[0].body[1];
  CHECK(s.kind == StmtKind::Shard);
  REQUIRE(s.value);
  CHECK(s.value->args.size() == 1);
  REQUIRE(s.value->kwargs.size() == 2);
  CHECK(s.value->kwargs[0].name == "dp");
  CHECK(s.value->kwargs[1].name == "tp");
}

TEST_CASE("frontend shard: every copy of a block parameter gets the hint") {
  Compiled c = compileText(kLayers);
  INFO(c.diags);
  REQUIRE(c.module);
  CHECK(c.errors == 0);
  const ir::Graph &g = c.module->graph();
  for (int i = 0; i < 3; ++i) {
    std::string p = "blocks." + std::to_string(i) + ".";
    ir::Value *wfc = g.findArgument(p + "w_fc");
    ir::Value *bfc = g.findArgument(p + "b_fc");
    ir::Value *wproj = g.findArgument(p + "w_proj");
    REQUIRE(wfc);
    REQUIRE(bfc);
    REQUIRE(wproj);
    CHECK(wfc->sharding() == Sharding{{"tp", Placement::split(1)}});
    CHECK(wproj->sharding() == Sharding{{"tp", Placement::split(0)}});
    // S-1 of a vector is S0; axes in mesh order whatever the hint's order.
    CHECK(bfc->sharding() == Sharding{{"dp", Placement::replicate()},
                                      {"tp", Placement::split(0)}});
    CHECK(bfc->sharding().str() == "{dp=R, tp=S0}");
  }
  REQUIRE(g.findArgument("x"));
  CHECK(g.findArgument("x")->sharding().str() == "{dp=S0}");
  REQUIRE(g.findArgument("w"));
  CHECK(g.findArgument("w")->sharding().empty());
}

TEST_CASE("frontend shard: hints in two statements combine") {
  Compiled c = compileText(R"(
model m {
  input x: f32[2, 4]
  param w: f32[4, 4] = zeros
  shard(w, tp=S-1)
  shard(w, dp=S-2)
  output y = x @ w
}
)");
  INFO(c.diags);
  REQUIRE(c.module);
  CHECK(c.module->graph().findArgument("w")->sharding().str() ==
        "{dp=S0, tp=S1}");
}

TEST_CASE("frontend shard: a bad hint in a block is reported once") {
  std::string text = kLayers;
  text.replace(text.find("tp=S0)"), 6, "tp=S2)");
  Compiled c = compileText(text);
  CHECK_FALSE(c.module);
  CHECK(c.errors == 1);
  CHECK(contains(c.diags, "cannot split parameter 'w_proj' of type "
                          "f32[8, 4] along dimension 2"));
}

TEST_CASE("frontend shard: each kind of bad hint names what was expected") {
  struct Case {
    const char *hint;
    const char *message;
  };
  const Case cases[] = {
      {"shard(wx, tp=S0)", "no parameter or input 'wx' in the model; did you "
                           "mean 'w'?"},
      {"shard(h, tp=S0)", "cannot hint 'h': it is a value computed here"},
      {"shard(w, mp=S0)", "unknown mesh axis 'mp'"},
      {"shard(w, tp=S)", "malformed placement 'S'"},
      {"shard(w, tp=S--1)", "malformed placement 'S--1'"},
      {"shard(w, tp=-1)", "malformed placement '-1'"},
      {"shard(w, tp=S1.5)", "expected ')' to close the argument list"},
      {"shard(w, tp=S(1))", "malformed placement 'S(1)'"},
      {"shard(w, tp=[1])", "malformed placement '[1]'"},
      {"shard(w, tp=P)", "placement P (partial sums) cannot be a hint"},
      {"shard(w, tp=S2)", "along dimension 2"},
      {"shard(w, tp=S-3)", "along dimension -3"},
      {"shard(w, tp=S0, tp=S1)", "mesh axis 'tp' is hinted twice"},
      {"shard(w, S0)", "expected AXIS=PLACEMENT after the name"},
      {"shard(w)", "gives no placement"},
      {"shard()", "a hint names a parameter or input first"},
      {"shard(1, tp=S0)", "a hint names a parameter or input first"},
      {"shard(x @ w, tp=S0)", "a hint names a parameter or input first"},
  };
  for (const Case &k : cases) {
    std::string text = "model m {\n  input x: f32[2, 4]\n  param w: f32[4, 4] "
                       "= zeros\n  h = x @ w\n  " +
                       std::string(k.hint) + "\n  output y = h\n}\n";
    Compiled c = compileText(text);
    INFO(std::string(k.hint));
    INFO(c.diags);
    CHECK_FALSE(c.module);
    CHECK(c.errors >= 1);
    CHECK(contains(c.diags, k.message));
    CHECK(contains(c.diags, "test.mg:5:"));
  }
}

TEST_CASE("frontend shard: shard is only a hint at the start of a statement") {
  // A block may still be called shard, and a local value named so.
  Compiled c = compileText(R"(
block shard(x: f32[4]) -> f32[4] {
  param g: f32[4] = ones
  shard(g, tp=S0)
  return x * g
}
model m {
  input x: f32[4]
  shard = shard(x)
  output y = shard
}
)");
  INFO(c.diags);
  REQUIRE(c.module);
  CHECK(c.module->graph().findArgument("shard.g")->sharding().str() ==
        "{tp=S0}");
}

TEST_CASE("frontend shard: truncated hints are syntax errors, not crashes") {
  const char *texts[] = {
      "model m {\n  input x: f32[2]\n  shard(\n}\n",
      "model m {\n  input x: f32[2]\n  shard(x, tp=\n}\n",
      "model m {\n  input x: f32[2]\n  shard(x, tp=S0\n  output y = x\n}\n",
      "model m {\n  input x: f32[2]\n  shard(x, tp=S0) output y = x\n}\n",
      "model m {\n  shard\n}\n",
  };
  for (const char *t : texts) {
    Compiled c = compileText(t);
    INFO(t);
    CHECK_FALSE(c.module);
    CHECK(c.errors >= 1);
  }
}
