// The sample models: they compile at their default sizes and at the tiny
// GPT setting, with the expected parameter names, shapes and scopes; the
// composed and fused forms of causal attention agree numerically.
#include "FrontendTestSupport.h"
#include "SourcePath.h"

#include "ir/Interpreter.h"
#include "ir/Printer.h"
#include "ir/TextParser.h"

#include "support/Random.h"

#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <set>

using namespace mgc;
using namespace mgc::frontend;
using namespace mgc::frontend::testing;

namespace {

const ConstOverrides kTinyGpt = {{"V", "256"}, {"T", "16"}, {"D", "32"},
                                 {"H", "2"},   {"L", "2"},  {"B", "2"}};

std::string samplePath(const char *name) {
  return mgc::test::sourceDir() + "/samples/" + name;
}

std::map<std::string, ir::TensorType> paramTypes(const ir::Module &m) {
  std::map<std::string, ir::TensorType> types;
  for (ir::Value *p : m.graph().params())
    types[p->name()] = p->type();
  return types;
}

ir::TensorType f32(std::initializer_list<int64_t> shape) {
  return ir::TensorType(ir::DType::F32, llvm::ArrayRef<int64_t>(shape));
}

} // namespace

TEST_CASE("frontend samples: mlp") {
  Compiled c = compileFile(samplePath("mlp.mg"));
  INFO(c.diags);
  REQUIRE(c.module);
  CHECK(c.diags.empty());
  auto types = paramTypes(*c.module);
  CHECK(types.size() == 6);
  CHECK(types["w1"] == f32({784, 1024}));
  CHECK(types["w2"] == f32({1024, 1024}));
  CHECK(types["w3"] == f32({1024, 10}));
  CHECK(types["b3"] == f32({10}));
  REQUIRE(c.module->graph().lossOutput());
  CHECK(c.module->attrs().getString("train.optimizer") == "adamw");
  CHECK(c.module->attrs().getFloat("train.lr") == 1e-3);
  CHECK(c.module->attrs().getInt("train.steps") == 1000);
}

TEST_CASE("frontend samples: gpt at the 124M default") {
  Compiled c = compileFile(samplePath("gpt.mg"));
  INFO(c.diags);
  REQUIRE(c.module);
  CHECK(c.diags.empty());
  auto types = paramTypes(*c.module);
  // 4 top-level parameters and 16 per layer.
  CHECK(types.size() == 4 + 12 * 15);
  CHECK(types["wte"] == f32({50304, 768}));
  CHECK(types["wpe"] == f32({1024, 768}));
  CHECK(types["blocks.0.attn.w_q"] == f32({768, 768}));
  CHECK(types["blocks.11.attn.w_k"] == f32({768, 768}));
  CHECK(types["blocks.11.attn.w_v"] == f32({768, 768}));
  CHECK(types["blocks.11.attn.b_v"] == f32({768}));
  CHECK(types["blocks.11.attn.w_proj"] == f32({768, 768}));
  CHECK(types["blocks.11.mlp.w_fc"] == f32({768, 3072}));
  CHECK(types["blocks.11.mlp.w_proj"] == f32({3072, 768}));
  CHECK(types["blocks.11.ln2_g"] == f32({768}));
  CHECK(types.count("blocks.12.ln1_g") == 0);
  int64_t count = 0;
  for (ir::Value *p : c.module->graph().params())
    count += p->type().size();
  // GPT-2 124M with the vocabulary padded to 50304, without the key bias
  // (12 x 768 fewer).
  CHECK(count == 124466688);
  // Megatron tensor parallelism: q, k, v and the MLP's first matrix split by
  // columns (with their biases), the output projections by rows; the rest
  // has no hint.
  const ir::Graph &g = c.module->graph();
  std::map<std::string, std::string> hints;
  for (ir::Value *p : g.params())
    if (!p->sharding().empty())
      hints[p->name()] = p->sharding().str();
  CHECK(hints.size() == 12 * 9);
  for (int i = 0; i < 12; ++i) {
    std::string a = "blocks." + std::to_string(i) + ".attn.";
    std::string m = "blocks." + std::to_string(i) + ".mlp.";
    for (const char *w : {"w_q", "w_k", "w_v"})
      CHECK(hints[a + w] == "{tp=S1}");
    for (const char *b : {"b_q", "b_v"})
      CHECK(hints[a + b] == "{tp=S0}");
    CHECK(hints[a + "w_proj"] == "{tp=S0}");
    CHECK(hints[m + "w_fc"] == "{tp=S1}");
    CHECK(hints[m + "b_fc"] == "{tp=S0}");
    CHECK(hints[m + "w_proj"] == "{tp=S0}");
  }
  CHECK(g.findArgument("wte")->sharding().empty());
  CHECK(g.findArgument("blocks.0.attn.b_proj")->sharding().empty());
  // Ops inside layers carry their layer's scope.
  std::set<std::string> scopes;
  for (const auto &op : c.module->graph().ops())
    scopes.insert(op->scope());
  for (int i = 0; i < 12; ++i) {
    std::string layer = "blocks." + std::to_string(i);
    CHECK(scopes.count(layer) == 1);
    CHECK(scopes.count(layer + ".attn") == 1);
    CHECK(scopes.count(layer + ".mlp") == 1);
  }
  const ir::Output *loss = c.module->graph().lossOutput();
  REQUIRE(loss);
  CHECK(loss->name == "loss");
  CHECK(c.module->graph().outputs()[0].value->type() == f32({8, 1024, 50304}));
}

TEST_CASE("frontend samples: gpt at the tiny setting round-trips as text") {
  Compiled c = compileFile(samplePath("gpt.mg"), kTinyGpt);
  INFO(c.diags);
  REQUIRE(c.module);
  auto types = paramTypes(*c.module);
  CHECK(types.size() == 4 + 2 * 15);
  CHECK(types["wte"] == f32({256, 32}));
  CHECK(types["blocks.1.attn.w_q"] == f32({32, 32}));
  std::string text = ir::printModuleToString(*c.module);
  DiagnosticEngine diag;
  auto reparsed = ir::parseModuleText("tiny.mgir", text, diag);
  REQUIRE(reparsed);
  CHECK(ir::printModuleToString(*reparsed) == text);
}

// The fused attention op and its composition from matmul, causal_mask and
// softmax must compute the same function: run both GPT files on the same
// parameters and tokens through the float64 interpreter.
TEST_CASE("frontend samples: composed and fused attention agree") {
  Compiled fused = compileFile(samplePath("gpt.mg"), kTinyGpt);
  Compiled composed = compileFile(
      mgc::test::sourceDir() + "/tests/lit/frontend/gpt_composed.mg", kTinyGpt);
  INFO(fused.diags << composed.diags);
  REQUIRE(fused.module);
  REQUIRE(composed.module);
  size_t fusedAttention = 0, composedAttention = 0;
  for (const auto &op : fused.module->graph().ops())
    fusedAttention += op->kind() == ir::OpKind::Attention;
  for (const auto &op : composed.module->graph().ops())
    composedAttention += op->kind() == ir::OpKind::Attention;
  CHECK(fusedAttention == 2);
  CHECK(composedAttention == 0);

  ir::TensorMap args;
  for (ir::Value *p : fused.module->graph().params())
    args[p->name()] = ir::initParameter(*p, /*seed=*/1234);
  const int64_t B = 2, T = 16, V = 256;
  ir::TensorType ids(ir::DType::I32, {B, T});
  std::vector<double> tokens(B * T), targets(B * T), pos(T);
  for (int64_t i = 0; i < B * T; ++i) {
    tokens[i] = double(randomBits(5, 1, i) % V);
    targets[i] = double(randomBits(5, 2, i) % V);
  }
  for (int64_t t = 0; t < T; ++t)
    pos[t] = double(t);
  args["tokens"] = ir::HostTensor(ids, tokens);
  args["targets"] = ir::HostTensor(ids, targets);
  args["pos"] = ir::HostTensor(ir::TensorType(ir::DType::I32, {T}), pos);

  DiagnosticEngine diag;
  auto a = ir::interpret(*fused.module, args, diag);
  auto b = ir::interpret(*composed.module, args, diag);
  REQUIRE(a.succeeded());
  REQUIRE(b.succeeded());
  const ir::HostTensor &la = a->at("logits"), &lb = b->at("logits");
  REQUIRE(la.data.size() == lb.data.size());
  double maxDiff = 0, maxAbs = 0;
  for (size_t i = 0; i < la.data.size(); ++i) {
    maxDiff = std::max(maxDiff, std::fabs(la.data[i] - lb.data[i]));
    maxAbs = std::max(maxAbs, std::fabs(la.data[i]));
  }
  CHECK(maxAbs > 0.01); // the logits are not trivially zero
  CHECK(maxDiff < 1e-9);
  double lossA = a->at("loss").data[0], lossB = b->at("loss").data[0];
  CHECK(std::isfinite(lossA));
  // Near log(V) for small random weights.
  CHECK(lossA == doctest::Approx(std::log(double(V))).epsilon(0.1));
  CHECK(lossA == doctest::Approx(lossB).epsilon(1e-12));
}
