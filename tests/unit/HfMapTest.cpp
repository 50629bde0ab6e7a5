// Name maps of Hugging Face checkpoints (runtime/HfMap.h): what a map may
// say, and each layout change in and back out, on small tensors whose every
// element is known. The end-to-end check against transformers is
// tests/lit/run/hf-checkpoints.test.
#include "DataTestSupport.h"

#include "runtime/HfMap.h"

#include <doctest/doctest.h>

using namespace mgc;
using namespace mgc::runtime;
using namespace mgc::testing;

namespace {

const char *kMap = R"({
  "model_type": "toy", "architectures": ["ToyForCausalLM"],
  "prefix": "model.", "layers": "L",
  "config": {"vocab": {"constant": "V", "model": "may be larger"},
             "context": {"constant": "T", "model": "may be smaller"},
             "width": "D", "layers": "L"},
  "fixed": {"act": "gelu"},
  "tensors": [
    {"hf": "emb", "mgc": "wte", "pad": 0},
    {"hf": "pos", "mgc": "wpe", "truncate": 0},
    {"hf": "l.{i}.qkv", "split": 1, "mgc": ["b.{i}.q", null, "b.{i}.v"],
     "why": "no key"},
    {"hf": "l.{i}.out", "mgc": "b.{i}.o", "transpose": true}
  ],
  "ignore": ["l.{i}.mask"],
  "tied": {"head": "emb"}
})";

template <typename T> std::string errorOf(llvm::Expected<T> &e) {
  return e ? "" : llvm::toString(e.takeError());
}

Tensor ramp(std::vector<int64_t> shape, double from) {
  return makeTensor(ir::DType::F32, shape,
                    [&](int64_t i) { return from + static_cast<double>(i); });
}

ModelConstants toyConstants(int64_t v, int64_t t) {
  ModelConstants c;
  c.insert_or_assign("V", llvm::json::Value(v));
  c.insert_or_assign("T", llvm::json::Value(t));
  c.insert_or_assign("D", llvm::json::Value(int64_t(2)));
  c.insert_or_assign("L", llvm::json::Value(int64_t(1)));
  return c;
}

ParamTypes toyParams(int64_t v, int64_t t) {
  auto f32 = [](std::vector<int64_t> s) {
    return ir::TensorType(ir::DType::F32, s);
  };
  return {{"wte", f32({v, 2})},
          {"wpe", f32({t, 2})},
          {"b.0.q", f32({2, 2})},
          {"b.0.v", f32({2, 2})},
          {"b.0.o", f32({2, 3})}};
}

// A toy checkpoint: vocabulary 3, context 4, width 2.
TensorMap toyCheckpoint() {
  TensorMap t;
  t["model.emb"] = ramp({3, 2}, 0);
  t["head"] = ramp({3, 2}, 0);
  t["model.pos"] = ramp({4, 2}, 100);
  t["model.l.0.qkv"] = ramp({2, 6}, 200);
  t["model.l.0.out"] = ramp({3, 2}, 300);
  t["model.l.0.mask"] = ramp({1}, 0);
  t["model.extra"] = ramp({1}, 0);
  return t;
}

} // namespace

TEST_CASE("hf map: each layout change in and back out") {
  auto map = parseHfMap(kMap, "toy.json");
  REQUIRE(errorOf(map) == "");
  // The model pads the vocabulary to 4 and keeps a context of 2.
  auto in = importHf(*map, toyCheckpoint(), nullptr, toyParams(4, 2),
                     toyConstants(4, 2), "ckpt");
  REQUIRE(errorOf(in) == "");
  const TensorMap &p = in->tensors;
  CHECK(p.size() == 5);
  CHECK(p.at("wte").get(5) == 5); // the file's rows ...
  CHECK(p.at("wte").get(6) == 0); // ... then zero rows
  CHECK(p.at("wpe").numel() == 4);
  CHECK(p.at("wpe").get(3) == 103); // the leading rows
  // qkv [2, 6] = [q | k | v], each [2, 2]: v's first row is elements 4, 5.
  CHECK(p.at("b.0.q").get(1) == 201);
  CHECK(p.at("b.0.v").get(0) == 204);
  CHECK(p.at("b.0.v").get(2) == 210);
  // out [3, 2] transposed: o[0][1] = out[1][0].
  CHECK(p.at("b.0.o").get(1) == 302);
  CHECK(in->unused == std::vector<std::string>{"extra"});
  CHECK(in->notes.size() == 3); // padded, cut, dropped

  HfExportOptions how;
  how.vocabulary = 3;
  TensorMap params = p;
  params["wpe"] = ramp({4, 2}, 100); // a model of context 4 writes 4 rows
  auto out = exportHf(*map, params, toyConstants(4, 4), how);
  REQUIRE(errorOf(out) == "");
  TensorMap original = toyCheckpoint();
  for (const char *name : {"model.emb", "model.pos", "model.l.0.out"}) {
    CAPTURE(name);
    const Tensor &a = original.at(name), &b = out->tensors.at(name);
    REQUIRE(a.type() == b.type());
    CHECK(std::memcmp(a.data(), b.data(), a.nbytes()) == 0);
  }
  // The key's part comes back as zeros.
  const Tensor &qkv = out->tensors.at("model.l.0.qkv");
  CHECK(qkv.get(2) == 0);
  CHECK(qkv.get(1) == 201);
  CHECK(qkv.get(4) == 204);
  CHECK(!out->tensors.count("head")); // tied: transformers ties it
  CHECK(*out->config.getInteger("vocab") == 3);
  CHECK(*out->config.getInteger("context") == 4);
  CHECK(*out->config.getString("act") == "gelu");
}

TEST_CASE("hf map: a checkpoint that does not fit is refused") {
  auto map = parseHfMap(kMap, "toy.json");
  REQUIRE(errorOf(map) == "");
  llvm::json::Object config{{"vocab", 3},
                            {"context", 4},
                            {"width", 8},
                            {"layers", 1},
                            {"act", "relu"}};
  auto in = importHf(*map, toyCheckpoint(), &config, toyParams(2, 8),
                     toyConstants(2, 8), "ckpt");
  std::string err = errorOf(in);
  CHECK(err.find("context 4 (the model's T is 8)") != std::string::npos);
  CHECK(err.find("vocab 3 (the model's V is 2)") != std::string::npos);
  CHECK(err.find("width 8 (the model's D is 2)") != std::string::npos);
  CHECK(err.find("act \"relu\" (the model computes \"gelu\")") !=
        std::string::npos);
  CHECK(err.find("run with -D T=4 -D V=3 -D D=8") != std::string::npos);

  TensorMap untied = toyCheckpoint();
  untied["head"] = ramp({3, 2}, 1);
  in = importHf(*map, untied, nullptr, toyParams(4, 2), toyConstants(4, 2),
                "ckpt");
  CHECK(errorOf(in).find("which the model ties it to") != std::string::npos);

  // Parameters that no rule writes would be lost.
  TensorMap params;
  for (const auto &[name, type] : toyParams(3, 4))
    params.emplace(name, Tensor(type));
  params.emplace("new_head", Tensor(ir::TensorType(ir::DType::F32, {2})));
  auto out = exportHf(*map, params, toyConstants(3, 4), {});
  CHECK(errorOf(out).find("writes no tensor for the parameters 'new_head'") !=
        std::string::npos);
}

TEST_CASE("hf map: what a map may not say") {
  auto refused = [](const std::string &text) {
    auto map = parseHfMap(text, "m.json");
    return errorOf(map);
  };
  CHECK(refused("[]").find("not a JSON object") != std::string::npos);
  CHECK(refused(R"({"model_type": "x"})").find("no list \"tensors\"") !=
        std::string::npos);
  CHECK(refused(R"({"model_type": "x", "tensors": [{"hf": "a", "mgc": "b",
                  "tranpose": true}]})")
            .find("unknown key \"tranpose\"") != std::string::npos);
  CHECK(refused(R"({"model_type": "x", "tensors": [{"hf": "a",
                  "mgc": ["b", "c"]}]})")
            .find("needs \"split\"") != std::string::npos);
  CHECK(refused(R"({"model_type": "x", "tensors": [{"hf": "a", "split": 0,
                  "mgc": ["b", null]}]})")
            .find("without saying why") != std::string::npos);
  CHECK(refused(R"({"model_type": "x", "tensors": [{"hf": "l.{i}.a",
                  "mgc": "b"}]})")
            .find("names no \"layers\" constant") != std::string::npos);
  CHECK(refused(R"({"model_type": "x", "config": {"v": {"constant": "V",
                  "model": "bigger"}}, "tensors": []})")
            .find("not 'may be larger' or 'may be smaller'") !=
        std::string::npos);
}
