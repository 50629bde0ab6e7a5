// A small GPT-like graph, built op by op, evaluated end to end: the shape of
// the graphs the interpreter is the oracle for.
#include "InterpreterTestSupport.h"

#include <cmath>

using namespace mgc::ir;
using namespace mgc::ir::testing;

namespace {

struct GptConfig {
  int64_t batch = 2, seq = 64, width = 64, heads = 4, layers = 4, vocab = 512;
};

struct GptBuilder {
  InterpFixture &f;
  GptConfig c;
  uint64_t seed = 1234;

  Value *param(const std::string &name, Shape shape, Init init) {
    Value *p =
        f.module.graph().addParam(name, TensorType(DType::F32, shape), init);
    f.args[name] = initParameter(*p, seed);
    return p;
  }
  Value *op(OpKind kind, llvm::ArrayRef<Value *> operands, Attrs attrs = {}) {
    return f.op(kind, operands, std::move(attrs));
  }
  Value *layernorm(const std::string &prefix, Value *x) {
    Value *g = param(prefix + ".g", {c.width}, Init{InitKind::Ones, 0, 0});
    Value *b = param(prefix + ".b", {c.width}, Init{InitKind::Zeros, 0, 0});
    return op(OpKind::Layernorm, {x, g, b});
  }
  // [B, T, D] -> [B, H, T, D/H] for the slice `part` of the fused qkv.
  Value *head(Value *qkv, int64_t part) {
    int64_t d = c.width, dh = c.width / c.heads;
    Value *s = op(
        OpKind::Slice, {qkv},
        {{"axis", int64_t(2)}, {"start", part * d}, {"end", (part + 1) * d}});
    Value *r =
        op(OpKind::Reshape, {s},
           {{"shape", std::vector<int64_t>{c.batch, c.seq, c.heads, dh}}});
    return op(OpKind::Transpose, {r},
              {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  }
  Value *block(int64_t i, Value *h) {
    std::string p = "blocks." + std::to_string(i);
    Init normal{InitKind::Normal, 0, 0.02};
    Value *qkv = op(OpKind::Matmul,
                    {layernorm(p + ".ln1", h),
                     param(p + ".attn.w_qkv", {c.width, 3 * c.width}, normal)});
    Value *a =
        op(OpKind::Attention, {head(qkv, 0), head(qkv, 1), head(qkv, 2)});
    Value *t = op(OpKind::Transpose, {a},
                  {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
    Value *merged =
        op(OpKind::Reshape, {t},
           {{"shape", std::vector<int64_t>{c.batch, c.seq, c.width}}});
    Value *proj =
        op(OpKind::Matmul,
           {merged, param(p + ".attn.w_o", {c.width, c.width}, normal)});
    h = op(OpKind::Add, {h, proj});
    Value *fc = op(OpKind::Matmul,
                   {layernorm(p + ".ln2", h),
                    param(p + ".mlp.w_fc", {c.width, 4 * c.width}, normal)});
    Value *bias =
        op(OpKind::Broadcast,
           {param(p + ".mlp.b_fc", {4 * c.width}, Init{InitKind::Zeros, 0, 0})},
           {{"shape", std::vector<int64_t>{c.batch, c.seq, 4 * c.width}}});
    Value *g = op(OpKind::Gelu, {op(OpKind::Add, {fc, bias})});
    Value *down =
        op(OpKind::Matmul,
           {g, param(p + ".mlp.w_proj", {4 * c.width, c.width}, normal)});
    return op(OpKind::Add, {h, down});
  }
  // Returns the loss.
  Value *build(Value *tokens, Value *targets) {
    Init normal{InitKind::Normal, 0, 0.02};
    Value *wte = param("wte", {c.vocab, c.width}, normal);
    Value *wpe = param("wpe", {c.seq, c.width}, normal);
    Value *h =
        op(OpKind::Add,
           {op(OpKind::Embedding, {wte, tokens}),
            op(OpKind::Broadcast, {wpe},
               {{"shape", std::vector<int64_t>{c.batch, c.seq, c.width}}})});
    for (int64_t i = 0; i < c.layers; ++i)
      h = block(i, h);
    Value *head = op(OpKind::Transpose, {wte},
                     {{"perm", std::vector<int64_t>{1, 0}}}); // tied LM head
    Value *logits = op(OpKind::Matmul, {layernorm("ln_f", h), head});
    return op(OpKind::CrossEntropy, {logits, targets});
  }
};

} // namespace

TEST_CASE("interp: a GPT-like graph gives a loss near ln(vocab) at init") {
  InterpFixture f;
  GptBuilder gpt{f, GptConfig{}};
  const GptConfig &c = gpt.c;
  std::vector<double> tokens(c.batch * c.seq), targets(c.batch * c.seq);
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<double>((i * 37 + 11) % c.vocab);
    targets[i] = static_cast<double>((i * 53 + 5) % c.vocab);
  }
  Value *tok = f.input("tokens", i32({c.batch, c.seq}), tokens);
  Value *tgt = f.input("targets", i32({c.batch, c.seq}), targets);
  Value *loss = gpt.build(tok, tgt);
  CHECK(f.module.graph().numOps() > 90);

  HostTensor l = f.eval(loss);
  // Small initial weights give nearly uniform predictions.
  double uniform = std::log(static_cast<double>(c.vocab));
  CHECK(std::isfinite(l.data[0]));
  CHECK(std::fabs(l.data[0] - uniform) < 0.1);
  CHECK(l.data[0] != uniform);

  // Same graph, same parameters: bit-identical loss.
  HostTensor again = f.eval(loss);
  CHECK(again.data[0] == l.data[0]);
}
