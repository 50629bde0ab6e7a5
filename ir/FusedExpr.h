// The expression of a `fused` op (passes/Fusion.h): a short program of
// elementwise instructions over the op's operands, one element at a time,
// kept in the attribute `expr` as text:
//
//   "mul(%0, %1); add(#0, 0.5); gelu(#1)"
//
// `%i` is operand i (read at the element's position, broadcast as NumPy
// does), `#j` the result of instruction j, a number a literal; the last
// instruction's result is the op's. Intermediate values stay in the compute
// type (f32, or f64 for an f64 result) and are rounded only by the cast
// instructions (cast_bf16, cast_f16, cast_f32, cast_f64) and once at the
// end, into the result's dtype.
#pragma once

#include "ir/Interpreter.h" // roundToDType
#include "ir/OpInfo.h"
#include "ir/ScalarMath.h"
#include "ir/Types.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mgc::ir {

enum class FusedOp : uint8_t {
  Add, Sub, Mul, Div, Minimum, Maximum,                  // binary
  ReluGrad, GeluGrad, SigmoidGrad, TanhGrad,             // binary (dy, x)
  Neg, Exp, Log, Sqrt, Rsqrt, Tanh, Relu, Gelu, Sigmoid, // unary
  Cos, CastBF16, CastF16, CastF32, CastF64,              // unary
};

// The instruction name ("add", "cast_bf16") and its number of arguments.
llvm::StringRef fusedOpName(FusedOp op);
unsigned fusedOpArity(FusedOp op);
std::optional<FusedOp> fusedOpByName(llvm::StringRef name);
// The instruction that computes a floating-point elementwise op of this
// kind in its result's compute type (add ... cos); none for a cast (its
// instruction depends on the result type) and for other ops.
std::optional<FusedOp> fusedOpOfKind(OpKind kind);

struct FusedArg {
  enum class Kind : uint8_t { Operand, Result, Literal } kind = Kind::Operand;
  int64_t index = 0; // Operand: the op's operand; Result: the instruction
  double value = 0;  // Literal
};

struct FusedInstr {
  FusedOp op = FusedOp::Add;
  llvm::SmallVector<FusedArg, 2> args;
};

struct FusedExpr {
  std::vector<FusedInstr> instrs;

  std::string str() const;
  // Parses and checks the text: known instructions with their number of
  // arguments, operands below `numOperands`, results of earlier
  // instructions only, at least one instruction. On error returns nullopt
  // and sets `error` to what is wrong and where.
  static std::optional<FusedExpr> parse(llvm::StringRef text,
                                        int64_t numOperands,
                                        std::string &error);
};

// For each dimension of `to`, the stride of a tensor of shape `from`
// broadcast to it NumPy-style (0 where it is broadcast).
std::vector<int64_t> broadcastStrides(llvm::ArrayRef<int64_t> from,
                                      llvm::ArrayRef<int64_t> to);

// One instruction on values of the compute type C.
template <typename C> C applyFused(FusedOp op, C a, C b) {
  switch (op) {
  case FusedOp::Add: return a + b;
  case FusedOp::Sub: return a - b;
  case FusedOp::Mul: return a * b;
  case FusedOp::Div: return a / b;
  case FusedOp::Minimum: return scalar::pick<true>(a, b);
  case FusedOp::Maximum: return scalar::pick<false>(a, b);
  case FusedOp::ReluGrad: return scalar::reluGrad(a, b);
  case FusedOp::GeluGrad: return scalar::geluGrad(a, b);
  case FusedOp::SigmoidGrad: return scalar::sigmoidGrad(a, b);
  case FusedOp::TanhGrad: return scalar::tanhGrad(a, b);
  case FusedOp::Neg: return C(0) - a; // as the neg kernel: 0 - 0 is +0
  case FusedOp::Exp: return C(std::exp(a));
  case FusedOp::Log: return C(std::log(a));
  case FusedOp::Sqrt: return C(std::sqrt(a));
  case FusedOp::Rsqrt: return scalar::rsqrt(a);
  case FusedOp::Tanh: return scalar::tanhOf(a);
  case FusedOp::Relu: return scalar::relu(a);
  case FusedOp::Gelu: return scalar::gelu(a);
  case FusedOp::Sigmoid: return scalar::sigmoid(a);
  case FusedOp::Cos: return C(std::cos(a));
  case FusedOp::CastBF16:
    if constexpr (std::is_same_v<C, float>) // the same rounding, inline
      return scalar::floatOfBF16(scalar::bf16BitsOf(a));
    else
      return C(roundToDType(a, DType::BF16));
  case FusedOp::CastF16: return C(roundToDType(a, DType::F16));
  case FusedOp::CastF32: return C(roundToDType(a, DType::F32));
  case FusedOp::CastF64: return a;
  }
  return a;
}

// applyFused over n elements (b null for a unary instruction), with the
// instruction's case chosen once for the whole loop. `out` never overlaps
// `a` or `b` (which may overlap each other): the loops vectorise without
// run-time overlap checks.
template <typename C>
void applyFusedBlock(FusedOp op, const C *__restrict a, const C *__restrict b,
                     C *__restrict out, int64_t n) {
  switch (op) {
#define MGC_FUSED_CASE(K)                                                      \
  case FusedOp::K:                                                             \
    if (b)                                                                     \
      for (int64_t k = 0; k < n; ++k)                                          \
        out[k] = applyFused<C>(FusedOp::K, a[k], b[k]);                        \
    else                                                                       \
      for (int64_t k = 0; k < n; ++k)                                          \
        out[k] = applyFused<C>(FusedOp::K, a[k], C(0));                        \
    break;
    MGC_FUSED_CASE(Add) MGC_FUSED_CASE(Sub) MGC_FUSED_CASE(Mul)
    MGC_FUSED_CASE(Div) MGC_FUSED_CASE(Minimum) MGC_FUSED_CASE(Maximum)
    MGC_FUSED_CASE(ReluGrad) MGC_FUSED_CASE(GeluGrad)
    MGC_FUSED_CASE(SigmoidGrad) MGC_FUSED_CASE(TanhGrad) MGC_FUSED_CASE(Neg)
    MGC_FUSED_CASE(Exp) MGC_FUSED_CASE(Log) MGC_FUSED_CASE(Sqrt)
    MGC_FUSED_CASE(Rsqrt) MGC_FUSED_CASE(Tanh) MGC_FUSED_CASE(Relu)
    MGC_FUSED_CASE(Gelu) MGC_FUSED_CASE(Sigmoid) MGC_FUSED_CASE(Cos)
    MGC_FUSED_CASE(CastBF16) MGC_FUSED_CASE(CastF16) MGC_FUSED_CASE(CastF32)
    MGC_FUSED_CASE(CastF64)
#undef MGC_FUSED_CASE
  }
}

} // namespace mgc::ir
