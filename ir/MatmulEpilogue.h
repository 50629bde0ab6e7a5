// The epilogues of `matmul_epilogue` (docs/ops.md): what follows the
// product a @ b in the same op, and the formula of each on one element, in
// a compute type C (float or double) after the product was rounded to the
// result's type. The CPU kernel, the interpreter and the CUDA fallback use
// these, so a fused op gives what the unfused ops give.
#pragma once

#include "ir/ScalarMath.h"

#include "llvm/ADT/StringRef.h"

#include <optional>

namespace mgc::ir {

enum class MatmulEpilogue {
  Bias,     // a @ b + bias[N]: (a, b, bias)
  BiasGelu, // gelu(a @ b + bias[N]): (a, b, bias)
  GeluGrad, // gelu_grad(a @ b, h) = (a @ b) * gelu'(h): (a, b, h)
};

inline std::optional<MatmulEpilogue> parseMatmulEpilogue(llvm::StringRef s) {
  if (s == "bias")
    return MatmulEpilogue::Bias;
  if (s == "bias_gelu")
    return MatmulEpilogue::BiasGelu;
  if (s == "gelu_grad")
    return MatmulEpilogue::GeluGrad;
  return std::nullopt;
}

inline llvm::StringRef matmulEpilogueName(MatmulEpilogue e) {
  switch (e) {
  case MatmulEpilogue::Bias:
    return "bias";
  case MatmulEpilogue::BiasGelu:
    return "bias_gelu";
  case MatmulEpilogue::GeluGrad:
    break;
  }
  return "gelu_grad";
}

// The name of the third operand, for messages.
inline llvm::StringRef matmulEpilogueOperand(MatmulEpilogue e) {
  return e == MatmulEpilogue::GeluGrad ? "h" : "bias";
}

// One element of the result from the product p (already rounded to the
// result's type), the extra operand's element x (bias[j] or h[i]), and
// `round`, which rounds a value of C to the result's type as the unfused
// op storing it would (the identity for f32 and f64).
template <typename C, typename Round>
C applyMatmulEpilogue(MatmulEpilogue e, C p, C x, Round round) {
  switch (e) {
  case MatmulEpilogue::Bias:
    return round(C(p + x));
  case MatmulEpilogue::BiasGelu:
    return round(scalar::gelu<C>(round(C(p + x))));
  case MatmulEpilogue::GeluGrad:
    break;
  }
  return round(scalar::geluGrad<C>(p, x));
}

} // namespace mgc::ir
