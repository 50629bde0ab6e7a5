// The cases of attention beyond causal self-attention (grouped-query
// heads, differing lengths, no causal mask, broadcast masks, rows that see
// no key), shared by the CPU and CUDA kernel tests.
#pragma once

#include "CpuTestSupport.h"

#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace mgc::backend::testing::attention {

using ir::OpKind;
using ir::Shape;
using ir::Value;

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Variant {
  const char *name;
  Shape q, kv;
  std::optional<Shape> mask;
  bool causal;
  // Mask entries (flat indices) set to -inf: padding.
  std::vector<size_t> padded = {};
  // Whether every query row sees a key, so that the composed form (whose
  // softmax of an all -inf row is NaN) is defined.
  bool everyRowSees = true;
};

inline const std::vector<Variant> kVariants = {
    {"grouped", {2, 4, 5, 3}, {2, 2, 5, 3}, std::nullopt, true},
    {"grouped, one key/value head", {1, 3, 4, 2}, {1, 1, 4, 2}, std::nullopt,
     true},
    {"cross, not causal", {2, 2, 3, 4}, {2, 2, 6, 4}, std::nullopt, false},
    {"causal, fewer queries than keys", {1, 2, 2, 4}, {1, 2, 7, 4},
     std::nullopt, true},
    {"padding mask over keys", {2, 2, 5, 3}, {2, 2, 5, 3}, Shape{2, 1, 1, 5},
     false, {8, 9}}, // batch 1's last two keys
    {"bias per head, causal", {2, 3, 4, 2}, {2, 3, 4, 2}, Shape{3, 4, 4},
     true},
    {"grouped cross with a [Tq, Tk] bias", {6, 3, 3}, {2, 5, 3}, Shape{3, 5},
     false},
    {"causal, more queries than keys", {1, 1, 5, 2}, {1, 1, 3, 2},
     std::nullopt, true, {}, false},
    {"a row masked out", {1, 2, 3, 2}, {1, 2, 3, 2}, Shape{1, 1, 3, 3}, false,
     {3, 4, 5}, false}, // every key of row 1
};

// The variant as attention and attention_grad ops of the case's dtype (its
// padding is set by kernelArguments); y = attention(...) as in training.
inline void addKernelCase(OpCase &c, const Variant &var, const std::string &name) {
  Value *q = c.x(name + "q", var.q), *k = c.x(name + "k", var.kv),
        *v = c.x(name + "v", var.kv), *dy = c.x(name + "dy", var.q);
  std::vector<Value *> fwd{q, k, v};
  Value *mask = var.mask ? c.x(name + "mask", *var.mask) : nullptr;
  if (mask)
    fwd.push_back(mask);
  ir::Attrs attrs{{"causal", var.causal}};
  Value *y = c.op(OpKind::Attention, fwd, attrs);
  std::vector<Value *> bwd{q, k, v, y, dy};
  if (mask)
    bwd.push_back(mask);
  c.out(name + "y", y);
  c.out(name + "g", c.op(OpKind::AttentionGrad, bwd, attrs));
}

inline ir::TensorMap kernelArguments(const OpCase &c, uint64_t seed) {
  ir::TensorMap args = randomArguments(c.module, seed, 1);
  for (size_t n = 0; n < kVariants.size(); ++n) {
    auto it = args.find("v" + std::to_string(n) + "mask");
    if (it == args.end())
      continue;
    for (size_t i : kVariants[n].padded)
      it->second.data[i] = -kInf;
  }
  return args;
}

inline void buildKernelCases(OpCase &c) {
  for (size_t n = 0; n < kVariants.size(); ++n)
    addKernelCase(c, kVariants[n], "v" + std::to_string(n));
}

} // namespace mgc::backend::testing::attention
