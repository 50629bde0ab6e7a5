// The decoding program (passes/Decode.h): fed one position at a time with
// the keys and values of the positions before it, it gives the logits the
// whole forward program gives at that position (float64 interpreter), for
// the GPT sample (learned positions, biases) and the LLaMA sample (rope,
// grouped-query attention); models it cannot decode are refused at the
// op's line.
#include "FrontendTestSupport.h"

#include "ir/Interpreter.h"
#include "ir/Verifier.h"
#include "passes/Decode.h"
#include "passes/PassManager.h"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>

using namespace mgc;
using namespace mgc::frontend;
using namespace mgc::frontend::testing;

namespace {

void runPasses(ir::Module &m, const char *pipeline) {
  DiagnosticEngine diag;
  passes::PassManager pm;
  REQUIRE(succeeded(pm.parsePipeline(pipeline, diag)));
  REQUIRE(succeeded(pm.run(m, diag)));
}

// Largest difference between the logits of the whole forward program and
// those decoding gives position by position, relative to the largest logit.
double decodeAgainstForward(const char *sample, const ConstOverrides &defines,
                            const passes::DecodeSpec &spec) {
  Compiled c = compileSample(sample, defines);
  INFO(c.diags);
  REQUIRE(c.module);
  runPasses(*c.module, "eval-mode,canonicalize,cse,dce");
  DiagnosticEngine diag;
  auto program = passes::buildDecodeProgram(*c.module, spec, diag);
  REQUIRE(program.succeeded());
  ir::Module &dec = *program->module;
  runPasses(dec, "canonicalize,cse,dce");
  const int64_t T = program->context;
  CHECK(program->caches.size() == 2); // one per layer

  ir::TensorMap args;
  for (const auto &arg : c.module->graph().arguments())
    if (arg->isPersistent())
      args[arg->name()] = ir::initParameter(*arg, 3);
  const ir::TensorType tokType = c.module->graph().findArgument(spec.tokens)->type();
  const int64_t B = tokType.shape[0], V = 64;
  ir::HostTensor tokens(tokType);
  for (size_t i = 0; i < tokens.data.size(); ++i)
    tokens.data[i] = static_cast<double>((i * 7 + 3) % V);
  ir::TensorMap full = args;
  full[spec.tokens] = tokens;
  full["targets"] = tokens;
  if (!spec.positions.empty()) {
    ir::HostTensor pos(ir::TensorType(ir::DType::I32, {T}));
    for (int64_t t = 0; t < T; ++t)
      pos.data[t] = static_cast<double>(t);
    full[spec.positions] = pos;
  }
  auto whole = ir::interpret(*c.module, full, diag);
  REQUIRE(whole.succeeded());
  const ir::HostTensor &logits = whole->at(spec.logits);

  ir::TensorMap step = args;
  for (const passes::DecodeCache &cache : program->caches) {
    step[cache.keys] = ir::HostTensor(cache.type);
    step[cache.values] = ir::HostTensor(cache.type);
  }
  double worst = 0, scale = 0;
  const double inf = std::numeric_limits<double>::infinity();
  for (int64_t p = 0; p < T; ++p) {
    ir::HostTensor tok(ir::TensorType(ir::DType::I32, {B, 1}));
    for (int64_t b = 0; b < B; ++b)
      tok.data[b] = tokens.data[b * T + p];
    step[spec.tokens] = tok;
    step[passes::kDecodePosition] =
        ir::HostTensor(ir::TensorType(ir::DType::I32, {1}), {double(p)});
    ir::HostTensor mask(ir::TensorType(ir::DType::F32, {1, T + 1}));
    for (int64_t j = 0; j < T; ++j)
      mask.data[j] = j < p ? 0.0 : -inf;
    step[passes::kDecodeMask] = mask;
    auto out = ir::interpret(dec, step, diag);
    REQUIRE(out.succeeded());
    const ir::HostTensor &one = out->at(spec.logits);
    REQUIRE(one.data.size() == static_cast<size_t>(B * V));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t v = 0; v < V; ++v) {
        double want = logits.data[(b * T + p) * V + v];
        worst = std::max(worst, std::fabs(one.data[b * V + v] - want));
        scale = std::max(scale, std::fabs(want));
      }
    // The new keys and values go into the caches at position p.
    for (const passes::DecodeCache &cache : program->caches)
      for (auto [name, fresh] : {std::pair{cache.keys, cache.newKeys},
                                 std::pair{cache.values, cache.newValues}}) {
        ir::HostTensor &store = step[name];
        const ir::HostTensor &row = out->at(fresh);
        int64_t Dh = cache.type.shape.back();
        int64_t heads = row.data.size() / Dh; // [..., Hkv] rows of Dh
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t d = 0; d < Dh; ++d)
            store.data[(h * T + p) * Dh + d] = row.data[h * Dh + d];
      }
  }
  REQUIRE(scale > 0.01);
  return worst / scale;
}

} // namespace

TEST_CASE("decode: the GPT sample, one position at a time, gives the "
          "forward program's logits") {
  passes::DecodeSpec spec;
  spec.positions = "pos";
  double rel = decodeAgainstForward(
      "gpt.mg",
      {{"V", "64"}, {"T", "6"}, {"D", "16"}, {"H", "2"}, {"L", "2"}, {"B", "2"}},
      spec);
  CHECK(rel < 1e-12);
}

TEST_CASE("decode: the LLaMA sample (rope, grouped-query attention)") {
  double rel = decodeAgainstForward("llama.mg",
                                    {{"V", "64"},
                                     {"T", "5"},
                                     {"D", "16"},
                                     {"H", "4"},
                                     {"Hkv", "2"},
                                     {"F", "24"},
                                     {"L", "2"},
                                     {"B", "2"}},
                                    passes::DecodeSpec());
  CHECK(rel < 1e-12);
}

TEST_CASE("decode: a model that mixes positions outside attention is "
          "refused at the op") {
  const char *source = R"(const B = 1, T = 4, V = 8, D = 4
model m {
  input tokens: i32[B, T]
  input targets: i32[B, T]
  param e: f32[V, D] = normal(0, 1)
  h = embedding(e, tokens)
  s = softmax(h @ transpose(h, 1, 2))
  output logits = (s @ h) @ transpose(e)
  loss = cross_entropy(logits, targets)
}
)";
  Compiled c = compileText(source);
  REQUIRE(c.module);
  std::string text;
  llvm::raw_string_ostream os(text);
  DiagnosticEngine diag(os);
  CHECK(passes::buildDecodeProgram(*c.module, passes::DecodeSpec(), diag)
            .failed());
  os.flush();
  INFO(text);
  CHECK(text.find("cannot decode one position at a time through matmul") !=
        std::string::npos);
  CHECK(text.find("attention written with matmuls") != std::string::npos);

  std::string text2;
  llvm::raw_string_ostream os2(text2);
  DiagnosticEngine diag2(os2);
  passes::DecodeSpec spec;
  spec.tokens = "idx";
  CHECK(passes::buildDecodeProgram(*c.module, spec, diag2).failed());
  os2.flush();
  INFO(text2);
  CHECK(text2.find("has no input 'idx' to take the tokens (its inputs: "
                   "tokens, targets)") != std::string::npos);
}
