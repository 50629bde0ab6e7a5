// The apply part cut by pipeline device (passes/ApplySplit.h): on a GPT
// each pipeline device updates exactly the parameters its stages read (the
// tied embedding on the first and the last), every parameter is updated
// somewhere, and only scalars (the gradient norm's parts) cross between
// devices; a step that couples two devices' tensors, or needs a second
// exchange, is refused naming the op.
#include "passes/ApplySplit.h"

#include "FrontendTestSupport.h"
#include "ir/TextParser.h"
#include "passes/Optimizer.h"
#include "runtime/session/MeshStep.h"

#include <doctest/doctest.h>

#include <set>

using namespace mgc;
using namespace mgc::passes;

namespace {

std::set<std::string> persistentNames(const ir::Module &m, bool params) {
  std::set<std::string> out;
  for (const auto &arg : m.graph().arguments())
    if (params ? arg->kind() == ir::ValueKind::Param : arg->isPersistent())
      out.insert(arg->name());
  return out;
}

std::set<std::string> updatedNames(const ir::Module &m) {
  std::set<std::string> out;
  for (const ir::Update &u : m.graph().updates())
    out.insert(u.target->name());
  return out;
}

std::string diagnosticsOf(const std::function<void(DiagnosticEngine &)> &fn) {
  DiagnosticEngine diag;
  std::string text;
  diag.setHandler([&](Severity, Loc, const std::string &m) { text += m; });
  fn(diag);
  return text;
}

} // namespace

TEST_CASE("apply split: each pipeline device updates its stages' "
          "parameters, the tied embedding on both ends") {
  auto model = frontend::testing::tinyGpt(4, 8, 16);
  REQUIRE(model);
  for (int64_t stages : {2, 4}) {
    INFO(stages << " stages");
    DiagnosticEngine diag;
    std::string error;
    session::MeshConfig config;
    config.mesh = *ir::Mesh::parse("pp=" + std::to_string(stages), error);
    config.accumulate = stages;
    auto step = session::buildMeshStep(*model, config, diag);
    REQUIRE(step.succeeded());
    const session::PipelinePart &part = *step->pipeline;
    const PipelineSplit &stageSplit = part.splits.at(0);
    const ApplySplit &apply = part.applySplit;
    REQUIRE(apply.devices == stages);

    std::set<std::string> everyParam =
        persistentNames(*step->step.logical, true);
    std::map<std::string, int> updatedBy;
    for (int64_t d = 0; d < stages; ++d) {
      INFO("device " << d);
      // The parameters the device's stage programs read.
      std::set<std::string> read;
      for (int64_t v = 0; v < stageSplit.stages; ++v)
        if (part.schedule.deviceOf(v) == d)
          for (const auto &program : stageSplit.programs[v])
            for (const std::string &p : persistentNames(*program, true))
              read.insert(p);
      const ir::Module &update = *apply.update[d];
      std::set<std::string> updated = updatedNames(update);
      std::set<std::string> params;
      for (const std::string &n : updated)
        if (everyParam.count(n))
          params.insert(n);
      CHECK(params == read);
      CHECK(updated.count(kStepStateName) == 1);
      for (const std::string &p : params)
        CHECK(updated.count("opt.m." + p) == 1);
      for (const std::string &n : params)
        ++updatedBy[n];
      bool hasNorm = false;
      for (const ir::Output &o : update.graph().outputs())
        hasNorm |= o.name == "grad_norm";
      CHECK(hasNorm);
      // What a device holds is only what its programs read.
      std::set<std::string> held = persistentNames(update, false);
      if (apply.gather[d])
        for (const std::string &n : persistentNames(*apply.gather[d], false))
          held.insert(n);
      CHECK(held == updated);
    }
    CHECK(updatedBy.size() == everyParam.size());
    for (const auto &[name, count] : updatedBy)
      CHECK(count == (name == "wte" ? 2 : 1));
    // Only the parts of the norm cross.
    int shared = 0;
    for (const ApplyValue &v : apply.values)
      if (v.shared) {
        ++shared;
        CHECK(v.type.rank() == 0);
      }
    CHECK(shared > 0);
  }
}

TEST_CASE("apply split: a step that couples two devices' tensors, or "
          "needs a second exchange, is refused") {
  // Two gradients, given by devices 0 and 1.
  std::map<std::string, std::vector<int64_t>> givers{{"micro.sum.0", {0}},
                                                     {"micro.sum.1", {1}}};
  auto split = [&](const char *text) {
    return diagnosticsOf([&](DiagnosticEngine &diag) {
      auto m = ir::parseModuleText("apply.mgir", text, diag);
      REQUIRE(m);
      CHECK(splitApply(*m, 2, givers, diag).failed());
    });
  };
  std::string coupled = split(R"(module @m {
  param %a : f32[4] = zeros
  param %b : f32[4] = zeros
  input %micro.sum.0 : f32[4]
  input %micro.sum.1 : f32[4]
  %0 = add(%micro.sum.0, %micro.sum.1) : f32[4]
  %1 = sub(%a, %0) : f32[4]
  %2 = sub(%b, %micro.sum.1) : f32[4]
  update %a = %1
  update %b = %2
})");
  CHECK(coupled.find("add reads tensors of different pipeline devices") !=
        std::string::npos);

  std::string twice = split(R"(module @m {
  param %a : f32[4] = zeros
  param %b : f32[4] = zeros
  input %micro.sum.0 : f32[4]
  input %micro.sum.1 : f32[4]
  %0 = mul(%micro.sum.0, %micro.sum.0) : f32[4]
  %1 = sum(%0) {axes = [0], keepdims = false} : f32[]
  %2 = mul(%micro.sum.1, %micro.sum.1) : f32[4]
  %3 = sum(%2) {axes = [0], keepdims = false} : f32[]
  %4 = add(%1, %3) : f32[]
  %5 = broadcast(%4) {shape = [4]} : f32[4]
  %6 = mul(%micro.sum.0, %5) : f32[4]
  %7 = sum(%6) {axes = [0], keepdims = false} : f32[]
  %8 = add(%7, %3) : f32[]
  %9 = broadcast(%8) {shape = [4]} : f32[4]
  %10 = sub(%a, %9) : f32[4]
  %11 = sub(%b, %9) : f32[4]
  update %a = %10
  update %b = %11
})");
  CHECK(twice.find("second exchange") != std::string::npos);

  // The plain case splits: each device updates its own parameter.
  DiagnosticEngine diag;
  auto m = ir::parseModuleText("apply.mgir", R"(module @m {
  param %a : f32[4] = zeros
  param %b : f32[4] = zeros
  input %micro.sum.0 : f32[4]
  input %micro.sum.1 : f32[4]
  %0 = sub(%a, %micro.sum.0) : f32[4]
  %1 = sub(%b, %micro.sum.1) : f32[4]
  update %a = %0
  update %b = %1
})",
                               diag);
  REQUIRE(m);
  auto ok = splitApply(*m, 2, givers, diag);
  REQUIRE(ok.succeeded());
  CHECK(!ok->gather[0]);
  CHECK(!ok->gather[1]);
  CHECK(updatedNames(*ok->update[0]) == std::set<std::string>{"a"});
  CHECK(updatedNames(*ok->update[1]) == std::set<std::string>{"b"});
}
