// Whole-model gradient checks: the tiny GPT and the MLP samples, compiled
// by the frontend, differentiated by autodiff, and compared with finite
// differences on randomly chosen parameter elements.
#include "GradCheckSupport.h"
#include "SourcePath.h"

#include "frontend/Frontend.h"
#include "ir/Printer.h"
#include "ir/TextParser.h"
#include "passes/PassManager.h"

#include "llvm/Support/MemoryBuffer.h"

using namespace mgc;
using namespace mgc::gradcheck;

namespace {

std::unique_ptr<Module> compileSample(const std::string &file,
                                      const frontend::ConstOverrides &defines) {
  std::string path = mgc::test::sourceDir() + "/" + file;
  auto buf = llvm::MemoryBuffer::getFile(path);
  REQUIRE(buf);
  std::string text;
  llvm::raw_string_ostream os(text);
  DiagnosticEngine diag(os);
  frontend::CompileOptions options;
  options.defines = defines;
  options.warnUnused = false;
  auto m =
      frontend::compileModelSource(path, (*buf)->getBuffer(), options, diag);
  os.flush();
  INFO(text);
  REQUIRE(m);
  return m;
}

// Parameters uniform in [-0.5, 0.5] (larger than the samples' initialisers,
// so that every nonlinearity is exercised away from zero); float inputs
// uniform in [-1, 1); integer inputs from `ints`.
TensorMap
randomArguments(const Module &m, uint64_t seed,
                const std::function<double(const Value &, size_t)> &ints) {
  TensorMap args;
  for (const auto &arg : m.graph().arguments()) {
    size_t n = static_cast<size_t>(arg->type().size());
    std::vector<double> data;
    if (isInteger(arg->type().dtype)) {
      for (size_t i = 0; i < n; ++i)
        data.push_back(ints(*arg, i));
    } else if (arg->kind() == ValueKind::Param) {
      data = randomValues(n, seed, arg->name(), -0.5, 0.5);
    } else {
      data = randomValues(n, seed, arg->name(), -1, 1);
    }
    args[arg->name()] = HostTensor(arg->type(), std::move(data));
  }
  return args;
}

// `count` distinct elements of each parameter (all if it has fewer): the
// first element (row 0 of a table, which the test's ids use) and random
// others.
std::function<std::vector<size_t>(const Value &)>
randomElements(size_t count, uint64_t seed) {
  return [=](const Value &p) {
    size_t n = static_cast<size_t>(p.type().size());
    std::vector<size_t> all(n);
    for (size_t i = 0; i < n; ++i)
      all[i] = i;
    // Partial Fisher-Yates with the counter-based generator.
    for (size_t i = 1; i < std::min(count, n); ++i) {
      size_t j =
          i + static_cast<size_t>(uniform01(seed, hashName(p.name()), i) *
                                  static_cast<double>(n - i));
      std::swap(all[i], all[std::min(j, n - 1)]);
    }
    all.resize(std::min(count, n));
    return all;
  };
}

uint64_t randomBelow(uint64_t seed, const Value &v, size_t i, int64_t limit) {
  return static_cast<uint64_t>(uniform01(seed, hashName(v.name()), i) *
                               static_cast<double>(limit));
}

} // namespace

TEST_CASE("gradcheck model: tiny GPT") {
  for (std::string p : {"0.0", "0.3"}) {
    INFO("dropout " << p);
    frontend::ConstOverrides defines = {{"V", "32"}, {"T", "4"}, {"D", "8"},
                                        {"H", "2"},  {"L", "2"}, {"B", "2"},
                                        {"P", p}};
    auto forward = compileSample("samples/gpt.mg", defines);
    auto differentiated = compileSample("samples/gpt.mg", defines);
    differentiateOrFail(*differentiated);
    TensorMap args =
        randomArguments(*forward, 3, [](const Value &v, size_t i) -> double {
          if (v.name() == "pos")
            return static_cast<double>(i);
          if (v.name() == "tokens") // 0, 1, 2, 0, ...: embedding rows repeat
            return static_cast<double>(i % 3);
          return static_cast<double>(randomBelow(5, v, i, 32));
        });
    // Every parameter has its gradient output, in declaration order, after
    // the forward's own outputs.
    const auto &outs = differentiated->graph().outputs();
    auto params = differentiated->graph().params();
    REQUIRE(outs.size() == forward->graph().outputs().size() + params.size());
    for (size_t i = 0; i < params.size(); ++i)
      CHECK(outs[forward->graph().outputs().size() + i].name ==
            "grad." + params[i]->name());
    CHECK(differentiated->graph().findArgument("blocks.1.attn.w_q"));
    size_t n = compareWithFiniteDifferences(*forward, *differentiated, args,
                                            randomElements(8, 17));
    size_t expected = 0;
    for (Value *param : params)
      expected +=
          std::min<size_t>(8, static_cast<size_t>(param->type().size()));
    CHECK(n == expected);
  }
}

TEST_CASE("gradcheck model: MLP") {
  frontend::ConstOverrides defines = {
      {"B", "4"}, {"D", "6"}, {"H", "5"}, {"C", "3"}};
  auto forward = compileSample("samples/mlp.mg", defines);
  auto differentiated = compileSample("samples/mlp.mg", defines);
  differentiateOrFail(*differentiated);
  TensorMap args = randomArguments(*forward, 9, [](const Value &v, size_t i) {
    return static_cast<double>(randomBelow(4, v, i, 3));
  });
  size_t n = compareWithFiniteDifferences(*forward, *differentiated, args,
                                          randomElements(4, 23));
  // w1, b1, w2, b2, w3 have at least 4 elements; b3 has C = 3.
  CHECK(n == 5 * 4 + 3);
}

TEST_CASE("gradcheck model: the differentiated GPT round-trips and gives the "
          "same gradients") {
  frontend::ConstOverrides defines = {{"V", "16"}, {"T", "3"}, {"D", "4"},
                                      {"H", "2"},  {"L", "1"}, {"B", "1"}};
  auto m = compileSample("samples/gpt.mg", defines);
  differentiateOrFail(*m);
  PrintOptions opts;
  opts.locations = true;
  std::string text = printModuleToString(*m, opts);
  std::string diagText;
  llvm::raw_string_ostream os(diagText);
  DiagnosticEngine diag(os);
  auto parsed = parseModuleText("gpt.mgir", text, diag);
  os.flush();
  INFO(diagText);
  REQUIRE(parsed);
  CHECK(succeeded(verify(*parsed, diag)));
  CHECK(printModuleToString(*parsed, opts) == text);
  TensorMap args = randomArguments(*m, 1, [](const Value &v, size_t i) {
    return v.name() == "pos" ? static_cast<double>(i)
                             : static_cast<double>(randomBelow(2, v, i, 16));
  });
  TensorMap a = evaluate(*m, args), b = evaluate(*parsed, args);
  REQUIRE(a.size() == b.size());
  for (const auto &[name, t] : a) {
    INFO(name);
    CHECK(b.at(name).data == t.data);
  }
}

TEST_CASE("gradcheck model: composed and fused attention give the same "
          "gradients") {
  // tests/lit/frontend/gpt_composed.mg is samples/gpt.mg with the attention
  // written out (matmul, div, causal_mask, softmax, matmul): the same
  // parameters, so the same loss and gradients.
  frontend::ConstOverrides defines = {{"V", "32"}, {"T", "4"}, {"D", "8"},
                                      {"H", "2"},  {"L", "2"}, {"B", "2"}};
  auto fused = compileSample("samples/gpt.mg", defines);
  auto composedForward =
      compileSample("tests/lit/frontend/gpt_composed.mg", defines);
  auto composed = compileSample("tests/lit/frontend/gpt_composed.mg", defines);
  differentiateOrFail(*fused);
  differentiateOrFail(*composed);
  TensorMap args = randomArguments(*fused, 4, [](const Value &v, size_t i) {
    if (v.name() == "pos")
      return static_cast<double>(i);
    return static_cast<double>(randomBelow(6, v, i, 32));
  });
  TensorMap a = evaluate(*fused, args), b = evaluate(*composed, args);
  REQUIRE(a.size() == b.size());
  size_t grads = 0;
  for (const auto &[name, t] : a) {
    INFO(name);
    REQUIRE(b.count(name) == 1);
    REQUIRE(b.at(name).data.size() == t.data.size());
    for (size_t i = 0; i < t.data.size(); ++i)
      CHECK(std::fabs(b.at(name).data[i] - t.data[i]) <=
            1e-12 * std::max(1.0, std::fabs(t.data[i])));
    grads += llvm::StringRef(name).startswith("grad.");
  }
  CHECK(grads == fused->graph().params().size());
  // And the composed form's gradients against finite differences.
  compareWithFiniteDifferences(*composedForward, *composed, args,
                               randomElements(2, 29));
}

TEST_CASE("gradcheck model: canonicalize, cse and dce keep the gradients") {
  frontend::ConstOverrides defines = {{"V", "32"}, {"T", "4"}, {"D", "8"},
                                      {"H", "2"},  {"L", "2"}, {"B", "2"},
                                      {"P", "0.2"}};
  auto plain = compileSample("samples/gpt.mg", defines);
  auto optimized = compileSample("samples/gpt.mg", defines);
  differentiateOrFail(*plain);
  std::string diagText;
  llvm::raw_string_ostream os(diagText);
  DiagnosticEngine diag(os);
  passes::PassManager pm;
  bool ok =
      succeeded(pm.parsePipeline("autodiff,canonicalize,cse,dce", diag)) &&
      succeeded(pm.run(*optimized, diag));
  os.flush();
  INFO(diagText);
  REQUIRE(ok);
  CHECK(optimized->graph().numOps() < plain->graph().numOps());
  TensorMap args = randomArguments(*plain, 8, [](const Value &v, size_t i) {
    if (v.name() == "pos")
      return static_cast<double>(i);
    return static_cast<double>(randomBelow(3, v, i, 32));
  });
  TensorMap a = evaluate(*plain, args), b = evaluate(*optimized, args);
  REQUIRE(a.size() == b.size());
  for (const auto &[name, t] : a) {
    INFO(name);
    REQUIRE(b.count(name) == 1);
    for (size_t i = 0; i < t.data.size(); ++i)
      CHECK(std::fabs(b.at(name).data[i] - t.data[i]) <=
            1e-12 * std::max(1.0, std::fabs(t.data[i])));
  }
}
