// The one table of built-in functions of the .mg language: each maps a name
// to an IR op kind and says how its arguments become operands and attributes.
#pragma once

#include "ir/OpInfo.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

namespace mgc::frontend {

enum class BuiltinForm : uint8_t {
  // Positional arguments fill the op's operands, then its attributes in the
  // order of OpKinds.def; keyword arguments name attributes.
  Generic,
  // Like the operator: NumPy broadcasting and scalar literals (add, sub, ...).
  Elementwise,
  // Like `@`: batch dimensions broadcast.
  Matmul,
  // transpose(x) swaps the last two axes; transpose(x, a, b) swaps a and b.
  SwapAxes,
  // sum/mean/max: `axes` may be one integer or a list and defaults to every
  // axis.
  Reduce,
  // concat([a, b, ...], axis): the operands come as one list.
  Concat,
  // dropout(x, p, seed = ...): without a seed, each call site instance gets
  // the next number of a per-model counter.
  Dropout,
  // where(cond, a, b): the three broadcast together; a number takes the
  // element type of the other choice.
  Select,
  // arange(n) or arange([d0, ...], axis): `shape` may be one integer.
  Arange,
  // Written with other ops (silu, clamp): `kind` is the last op made.
  Composite,
  // conv2d and the pools: a [height, width] attribute may be one integer
  // for both (stride = 2), and a pool's stride defaults to its kernel, as
  // in PyTorch.
  Window,
  // global_avg_pool(x[N, C, H, W]) -> [N, C]: the mean over H and W.
  GlobalPool,
  // batch_norm(x, gamma, beta, running_mean, running_var, momentum, eps):
  // composed, with the running statistics' updates (LowerBatchNorm.cpp).
  BatchNorm,
};

struct Builtin {
  llvm::StringRef name;
  ir::OpKind kind;
  BuiltinForm form;
  // The names of the tensor arguments, for messages and docs ("x, gamma").
  llvm::StringRef operands;
  // A variadic op called with a fixed number of tensors, the last ones
  // optional (attention's mask): at least minTensors, at most maxTensors.
  // Both 0: the op's arity.
  unsigned minTensors = 0, maxTensors = 0;
};

const Builtin *lookupBuiltin(llvm::StringRef name);
llvm::ArrayRef<Builtin> allBuiltins();

} // namespace mgc::frontend
