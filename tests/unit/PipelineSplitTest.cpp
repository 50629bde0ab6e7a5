// The pipeline pass (passes/PipelineSplit.h) on a GPT's micro-batch
// program: each stage's forward passes the residual stream on and its
// backward passes the stream's gradient back, nothing else crosses; the
// tied embedding's gradient is given in parts by the first and last stages
// instead of being sent; with a split backward the weight-gradient half
// sends nothing; and every stage's programs together compute exactly the
// outputs of the micro program.
#include "passes/PipelineSplit.h"

#include "FrontendTestSupport.h"
#include "ir/Printer.h"
#include "ir/TextParser.h"
#include "ir/Verifier.h"
#include "runtime/session/MeshStep.h"

#include <doctest/doctest.h>

#include <set>
#include <tuple>

using namespace mgc;
using namespace mgc::passes;

namespace {

std::unique_ptr<ir::Module> tinyGpt(int64_t layers) {
  auto m = frontend::testing::tinyGpt(layers, 8, 16);
  REQUIRE(m);
  return m;
}

// The pipelined step of `model` on pp=`stages`, 2 micro-batches.
session::MeshStep pipelined(const ir::Module &model, int64_t stages,
                            ScheduleKind schedule, std::string split = "") {
  DiagnosticEngine diag;
  std::string error;
  session::MeshConfig config;
  config.mesh = *ir::Mesh::parse("pp=" + std::to_string(stages), error);
  config.accumulate = 2;
  config.pipeline.schedule = schedule;
  config.pipeline.stages = std::move(split);
  auto step = session::buildMeshStep(model, config, diag);
  REQUIRE(step.succeeded());
  REQUIRE(step->pipeline);
  return std::move(*step);
}

std::set<std::string> outputNames(const ir::Module &m) {
  std::set<std::string> out;
  for (const ir::Output &o : m.graph().outputs())
    out.insert(o.name);
  return out;
}

} // namespace

TEST_CASE("pipeline split: a GPT passes its residual stream and its "
          "gradient, and shares its tied embedding's gradient") {
  auto model = tinyGpt(4);
  for (int64_t stages : {2, 4}) {
    INFO(stages << " stages");
    session::MeshStep step = pipelined(*model, stages, ScheduleKind::OneFOneB);
    const PipelineSplit &split = step.pipeline->splits.at(0);
    REQUIRE(split.stages == stages);
    REQUIRE(split.numPhases() == 2);
    for (int64_t b = 0; b + 1 < stages; ++b) {
      // One value each way per boundary: the micro-batch's [2, 8, 16]
      // residual stream, and its gradient.
      REQUIRE(split.forwardAcross[b].size() == 1);
      REQUIRE(split.backwardAcross[b].size() == 1);
      const PipeValue &on = split.values[split.forwardAcross[b][0]];
      const PipeValue &back = split.values[split.backwardAcross[b][0]];
      CHECK(on.type.str() == "f32[2, 8, 16]");
      CHECK(back.type.str() == "f32[2, 8, 16]");
      CHECK(on.stage == b);
      CHECK(on.readers == std::vector<int64_t>{b + 1});
      CHECK(back.stage == b + 1);
      CHECK(back.readers == std::vector<int64_t>{b});
    }
    // The loss and logits come from the last stage's forward; the
    // forwards give no gradient.
    CHECK(outputNames(*split.programs[stages - 1][0]).count("loss"));
    for (int64_t s = 0; s < stages; ++s)
      for (const std::string &name : outputNames(*split.programs[s][0]))
        CHECK_FALSE(llvm::StringRef(name).startswith(kMicroSumPrefix));
    // Every summed gradient of the micro program is given by some
    // backward; the one of wte (tied) by the first and the last stage.
    const ir::Module &micro = step.micro.programs.programFor(0);
    std::map<std::string, std::vector<int64_t>> givenBy;
    for (int64_t s = 0; s < stages; ++s)
      for (const std::string &name : outputNames(*split.programs[s][1]))
        if (llvm::StringRef(name).startswith(kMicroSumPrefix))
          givenBy[name].push_back(s);
    size_t sums = 0, shared = 0;
    for (const ir::Output &o : micro.graph().outputs()) {
      if (!llvm::StringRef(o.name).startswith(kMicroSumPrefix))
        continue;
      ++sums;
      REQUIRE(givenBy.count(o.name));
      if (givenBy[o.name].size() > 1) {
        ++shared;
        CHECK(givenBy[o.name] == std::vector<int64_t>{0, stages - 1});
        CHECK(o.value->type().str() == "f32[64, 16]"); // wte
      }
    }
    CHECK(givenBy.size() == sums);
    CHECK(shared == 1);
  }
}

TEST_CASE("pipeline split: with a split backward the weight half sends "
          "nothing and the input half sends the gradient back") {
  auto model = tinyGpt(4);
  session::MeshStep step = pipelined(*model, 2, ScheduleKind::ZeroBubbleH1);
  const PipelineSplit &split = step.pipeline->splits.at(0);
  REQUIRE(split.numPhases() == 3);
  for (const PipeValue &v : split.values) {
    if (v.phase == Phase::Weight)
      CHECK(v.readers.empty()); // W feeds nothing on another stage
  }
  const PipeValue &back = split.values[split.backwardAcross[0].at(0)];
  CHECK(back.phase == Phase::Backward);
  // The W programs compute the weight gradients: every stage's has some.
  for (int64_t s = 0; s < 2; ++s) {
    bool gives = false;
    for (const std::string &name : outputNames(*split.programs[s][2]))
      gives |= llvm::StringRef(name).startswith(kMicroSumPrefix);
    CHECK(gives);
  }
}

TEST_CASE("pipeline split: stages given by hand, and splits that are not") {
  auto model = tinyGpt(4);
  session::MeshStep step = pipelined(*model, 2, ScheduleKind::GPipe, "0,1-3");
  CHECK(step.pipeline->first == std::vector<int64_t>{0, 1});
  const ir::Module &micro = step.micro.programs.programFor(0);
  DiagnosticEngine quiet(llvm::nulls());
  CHECK(splitPipeline(micro, {0, 4}, false, quiet).failed());
  CHECK(splitPipeline(micro, {1, 2}, false, quiet).failed());
  CHECK(splitPipeline(micro, {0, 2, 2}, false, quiet).failed());
  CHECK(splitPipeline(micro, {0, 1, 2, 3}, false, quiet).succeeded());
}

TEST_CASE("pipeline split: activations cross by send and recv ops, which "
          "print, parse back and lower to the runtime's inputs and outputs") {
  auto model = tinyGpt(4);
  session::MeshStep step =
      pipelined(*model, 3, ScheduleKind::OneFOneB, "0,1-2,3");
  const PipelineSplit &split = step.pipeline->splits.at(0);
  // The messages of stage s's program of phase p: (kind, peer, value).
  using Message = std::tuple<std::string, int64_t, std::string>;
  auto messages = [&](int64_t s, int p) {
    std::vector<Message> out;
    for (const auto &op : split.programs[s][p]->graph().ops())
      if (op->kind() == ir::OpKind::Send || op->kind() == ir::OpKind::Recv)
        out.emplace_back(op->name().str(), op->attrs().getInt("peer"),
                         op->attrs().getString("value"));
    return out;
  };
  for (int64_t s = 0; s < 3; ++s) {
    INFO("stage " << s);
    std::vector<Message> forward = messages(s, 0), backward = messages(s, 1);
    // F receives the stream from the stage before and sends it on; B
    // receives its gradient from the stage after and sends it back.
    size_t fromBefore = s > 0, toAfter = s < 2;
    CHECK(forward.size() == fromBefore + toAfter);
    CHECK(backward.size() == fromBefore + toAfter);
    for (const auto &[kind, peer, value] : forward)
      CHECK(peer == (kind == "recv" ? s - 1 : s + 1));
    for (const auto &[kind, peer, value] : backward)
      CHECK(peer == (kind == "recv" ? s + 1 : s - 1));
    if (s + 1 < 3) {
      const PipeValue &on = split.values[split.forwardAcross[s][0]];
      CHECK(llvm::is_contained(forward, Message{"send", s + 1, on.name}));
    }
    if (s > 0) {
      const PipeValue &back = split.values[split.backwardAcross[s - 1][0]];
      CHECK(llvm::is_contained(backward, Message{"send", s - 1, back.name}));
    }
    for (int p = 0; p < 2; ++p) {
      const ir::Module &program = *split.programs[s][p];
      // Printed and parsed back, the same program.
      std::string text = ir::printModuleToString(program);
      DiagnosticEngine diag;
      auto parsed = ir::parseModuleText("stage.mgir", text, diag);
      REQUIRE(parsed);
      CHECK(ir::printModuleToString(*parsed) == text);
      // Lowered, each recv is an input and each send an output of its
      // value's name, and no message op is left.
      lowerPipeMessages(*parsed);
      CHECK(ir::verify(*parsed, diag).succeeded());
      for (const auto &[kind, peer, value] : messages(s, p)) {
        if (kind == "recv")
          CHECK(parsed->graph().findArgument(value));
        else
          CHECK(outputNames(*parsed).count(value) == 1);
      }
      for (const auto &op : parsed->graph().ops())
        CHECK(
            (op->kind() != ir::OpKind::Send && op->kind() != ir::OpKind::Recv));
    }
  }
}
