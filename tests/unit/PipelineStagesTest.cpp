// Which stage runs each op of a forward module (passes/PipelineStages.h):
// on a GPT, only the residual stream crosses each boundary and the token
// embedding tied to the head is read by the first and the last stage; a
// module whose split would pass a value backwards, and splits that are
// not splits, are refused.
#include "passes/PipelineStages.h"
#include "FrontendTestSupport.h"
#include "ir/TextParser.h"

#include <doctest/doctest.h>

using namespace mgc;
using namespace mgc::passes;

namespace {

std::unique_ptr<ir::Module> tinyGpt(int64_t layers) {
  auto m = frontend::testing::tinyGpt(layers, 16, 32);
  REQUIRE(m);
  return m;
}

} // namespace

TEST_CASE("pipeline stages: a GPT passes its residual stream, and shares "
          "its tied embedding") {
  auto m = tinyGpt(4);
  for (std::vector<int64_t> first :
       {std::vector<int64_t>{0, 2}, std::vector<int64_t>{0, 1, 3},
        std::vector<int64_t>{0, 1, 2, 3}}) {
    INFO(first.size() << " stages");
    DiagnosticEngine diag;
    FailureOr<StageAssignment> a = assignStages(*m, first, diag);
    REQUIRE(a.succeeded());
    int64_t stages = static_cast<int64_t>(first.size());
    // One activation per boundary, the [B, T, D] residual stream, from
    // each stage to the next.
    REQUIRE(a->crossings.size() == first.size() - 1);
    for (size_t i = 0; i < a->crossings.size(); ++i) {
      CHECK(a->crossings[i].from == static_cast<int64_t>(i));
      CHECK(a->crossings[i].to == static_cast<int64_t>(i + 1));
      CHECK(a->crossings[i].value->type().str() == "f32[4, 16, 32]");
    }
    for (double bytes : boundaryBytes(*a))
      CHECK(bytes == 4 * 16 * 32 * 4);
    // wte: the embedding on the first stage, the head on the last.
    const ir::Value *wte = m->graph().findArgument("wte");
    REQUIRE(wte);
    CHECK(a->paramStages[wte] == std::vector<int64_t>{0, stages - 1});
    const ir::Value *q = m->graph().findArgument("blocks.3.attn.w_q");
    REQUIRE(q);
    CHECK(a->paramStages[q] == std::vector<int64_t>{stages - 1});
  }
}

TEST_CASE("pipeline stages: splits that are not, and values passed "
          "backwards, are refused") {
  auto m = tinyGpt(2);
  DiagnosticEngine diag;
  CHECK(assignStages(*m, {0, 1, 2}, diag).failed());
  CHECK(assignStages(*m, {1}, diag).failed());
  // Layer blocks.0 reads a result of blocks.1, which comes after it.
  const char *text = R"(module @m {
  input %x : f32[2]
  %0 = neg(%x) : f32[2] scope "blocks.0"
  %1 = neg(%0) : f32[2] scope "blocks.1"
  %2 = add(%0, %1) : f32[2] scope "blocks.0"
  %3 = sum(%2) {axes = [0], keepdims = false} : f32[] scope "blocks.1"
  output out = %3
})";
  std::string message;
  DiagnosticEngine d2;
  d2.setHandler([&](Severity, Loc, const std::string &t) { message = t; });
  auto bad = ir::parseModuleText("m.mgir", text, d2);
  INFO(message);
  REQUIRE(bad);
  CHECK(assignStages(*bad, {0, 1}, d2).failed());
  CHECK(message == "pipeline stages: add on stage 0 reads the result of neg "
                   "from the later stage 1: stages may only pass values "
                   "forward");
}
