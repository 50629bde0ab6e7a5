#include "ir/FusedExpr.h"

#include "ir/Attrs.h"

#include "llvm/ADT/StringExtras.h"

namespace mgc::ir {

namespace {

struct OpName {
  FusedOp op;
  const char *name;
  unsigned arity;
};

constexpr OpName kOps[] = {
    {FusedOp::Add, "add", 2},
    {FusedOp::Sub, "sub", 2},
    {FusedOp::Mul, "mul", 2},
    {FusedOp::Div, "div", 2},
    {FusedOp::Minimum, "minimum", 2},
    {FusedOp::Maximum, "maximum", 2},
    {FusedOp::ReluGrad, "relu_grad", 2},
    {FusedOp::GeluGrad, "gelu_grad", 2},
    {FusedOp::SigmoidGrad, "sigmoid_grad", 2},
    {FusedOp::TanhGrad, "tanh_grad", 2},
    {FusedOp::Neg, "neg", 1},
    {FusedOp::Exp, "exp", 1},
    {FusedOp::Log, "log", 1},
    {FusedOp::Sqrt, "sqrt", 1},
    {FusedOp::Rsqrt, "rsqrt", 1},
    {FusedOp::Tanh, "tanh", 1},
    {FusedOp::Relu, "relu", 1},
    {FusedOp::Gelu, "gelu", 1},
    {FusedOp::Sigmoid, "sigmoid", 1},
    {FusedOp::Cos, "cos", 1},
    {FusedOp::CastBF16, "cast_bf16", 1},
    {FusedOp::CastF16, "cast_f16", 1},
    {FusedOp::CastF32, "cast_f32", 1},
    {FusedOp::CastF64, "cast_f64", 1},
};

const OpName &entry(FusedOp op) {
  for (const OpName &e : kOps)
    if (e.op == op)
      return e;
  return kOps[0];
}

} // namespace

llvm::StringRef fusedOpName(FusedOp op) { return entry(op).name; }
unsigned fusedOpArity(FusedOp op) { return entry(op).arity; }

std::optional<FusedOp> fusedOpByName(llvm::StringRef name) {
  for (const OpName &e : kOps)
    if (name == e.name)
      return e.op;
  return std::nullopt;
}

std::optional<FusedOp> fusedOpOfKind(OpKind kind) {
  using K = OpKind;
  using F = FusedOp;
  // clang-format off
  switch (kind) {
  case K::Add: return F::Add;
  case K::Sub: return F::Sub;
  case K::Mul: return F::Mul;
  case K::Div: return F::Div;
  case K::Minimum: return F::Minimum;
  case K::Maximum: return F::Maximum;
  case K::ReluGrad: return F::ReluGrad;
  case K::GeluGrad: return F::GeluGrad;
  case K::SigmoidGrad: return F::SigmoidGrad;
  case K::TanhGrad: return F::TanhGrad;
  case K::Neg: return F::Neg;
  case K::Exp: return F::Exp;
  case K::Log: return F::Log;
  case K::Sqrt: return F::Sqrt;
  case K::Rsqrt: return F::Rsqrt;
  case K::Tanh: return F::Tanh;
  case K::Relu: return F::Relu;
  case K::Gelu: return F::Gelu;
  case K::Sigmoid: return F::Sigmoid;
  case K::Cos: return F::Cos;
  default: return std::nullopt;
  }
  // clang-format on
}

std::vector<int64_t> broadcastStrides(llvm::ArrayRef<int64_t> from,
                                      llvm::ArrayRef<int64_t> to) {
  std::vector<int64_t> strides(to.size(), 0);
  int64_t lead = static_cast<int64_t>(to.size() - from.size());
  int64_t stride = 1;
  for (int64_t d = static_cast<int64_t>(from.size()) - 1; d >= 0; --d) {
    if (from[d] != 1)
      strides[d + lead] = stride;
    stride *= from[d];
  }
  return strides;
}

std::string FusedExpr::str() const {
  std::string out;
  for (size_t i = 0; i < instrs.size(); ++i) {
    const FusedInstr &in = instrs[i];
    out += (i ? "; " : "") + fusedOpName(in.op).str() + "(";
    for (size_t a = 0; a < in.args.size(); ++a) {
      const FusedArg &arg = in.args[a];
      out += a ? ", " : "";
      switch (arg.kind) {
      case FusedArg::Kind::Operand:
        out += "%" + std::to_string(arg.index);
        break;
      case FusedArg::Kind::Result:
        out += "#" + std::to_string(arg.index);
        break;
      case FusedArg::Kind::Literal:
        out += formatDouble(arg.value);
        break;
      }
    }
    out += ")";
  }
  return out;
}

std::optional<FusedExpr> FusedExpr::parse(llvm::StringRef text,
                                          int64_t numOperands,
                                          std::string &error) {
  FusedExpr expr;
  llvm::SmallVector<llvm::StringRef, 8> parts;
  text.split(parts, ';');
  for (size_t i = 0; i < parts.size(); ++i) {
    llvm::StringRef part = parts[i].trim();
    std::string where = "instruction " + std::to_string(i) + " '" +
                        part.str() + "'";
    size_t open = part.find('(');
    if (open == llvm::StringRef::npos || !part.endswith(")")) {
      error = where + ": expected NAME(ARG, ...)";
      return std::nullopt;
    }
    std::optional<FusedOp> op = fusedOpByName(part.take_front(open).trim());
    if (!op) {
      error = where + ": unknown instruction '" +
              part.take_front(open).trim().str() + "'";
      return std::nullopt;
    }
    FusedInstr in{*op, {}};
    llvm::SmallVector<llvm::StringRef, 2> args;
    part.drop_front(open + 1).drop_back().split(args, ',');
    for (llvm::StringRef a : args) {
      a = a.trim();
      FusedArg arg;
      int64_t index = 0;
      if (a.consume_front("%")) {
        if (a.getAsInteger(10, index) || index < 0 || index >= numOperands) {
          error = where + ": '%" + a.str() + "' is not an operand (the op has " +
                  std::to_string(numOperands) + ")";
          return std::nullopt;
        }
        arg = {FusedArg::Kind::Operand, index, 0};
      } else if (a.consume_front("#")) {
        if (a.getAsInteger(10, index) || index < 0 ||
            index >= static_cast<int64_t>(i)) {
          error = where + ": '#" + a.str() +
                  "' is not the result of an earlier instruction";
          return std::nullopt;
        }
        arg = {FusedArg::Kind::Result, index, 0};
      } else {
        double value = 0;
        if (a.getAsDouble(value)) {
          error = where + ": '" + a.str() +
                  "' is not %OPERAND, #INSTRUCTION or a number";
          return std::nullopt;
        }
        arg = {FusedArg::Kind::Literal, 0, value};
      }
      in.args.push_back(arg);
    }
    if (in.args.size() != fusedOpArity(*op)) {
      error = where + ": " + fusedOpName(*op).str() + " takes " +
              std::to_string(fusedOpArity(*op)) + " argument" +
              (fusedOpArity(*op) == 1 ? "" : "s") + ", got " +
              std::to_string(in.args.size());
      return std::nullopt;
    }
    expr.instrs.push_back(std::move(in));
  }
  return expr;
}

} // namespace mgc::ir
