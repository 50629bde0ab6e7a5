#include "frontend/Builtins.h"

namespace mgc::frontend {

using ir::OpKind;
using F = BuiltinForm;

static const Builtin kBuiltins[] = {
    // Constants and conversions.
    {"constant", OpKind::Constant, F::Generic, ""},
    {"cast", OpKind::Cast, F::Generic, "x"},
    // Elementwise arithmetic (the operators + - * / call these).
    {"add", OpKind::Add, F::Elementwise, "a, b"},
    {"sub", OpKind::Sub, F::Elementwise, "a, b"},
    {"mul", OpKind::Mul, F::Elementwise, "a, b"},
    {"div", OpKind::Div, F::Elementwise, "a, b"},
    {"neg", OpKind::Neg, F::Generic, "x"},
    {"exp", OpKind::Exp, F::Generic, "x"},
    {"log", OpKind::Log, F::Generic, "x"},
    {"sqrt", OpKind::Sqrt, F::Generic, "x"},
    {"rsqrt", OpKind::Rsqrt, F::Generic, "x"},
    {"tanh", OpKind::Tanh, F::Generic, "x"},
    {"relu", OpKind::Relu, F::Generic, "x"},
    {"gelu", OpKind::Gelu, F::Generic, "x"},
    {"sigmoid", OpKind::Sigmoid, F::Generic, "x"},
    {"sin", OpKind::Sin, F::Generic, "x"},
    {"cos", OpKind::Cos, F::Generic, "x"},
    {"abs", OpKind::Abs, F::Generic, "x"},
    {"sign", OpKind::Sign, F::Generic, "x"},
    {"softplus", OpKind::Softplus, F::Generic, "x"},
    {"silu", OpKind::Mul, F::Composite, "x"},
    {"pow", OpKind::Pow, F::Elementwise, "a, b"},
    {"minimum", OpKind::Minimum, F::Elementwise, "a, b"},
    {"maximum", OpKind::Maximum, F::Elementwise, "a, b"},
    {"clamp", OpKind::Minimum, F::Composite, "x"},
    {"where", OpKind::Where, F::Select, "cond, a, b"},
    {"arange", OpKind::Iota, F::Arange, ""},
    {"dropout", OpKind::Dropout, F::Dropout, "x"},
    // Normalisations.
    {"softmax", OpKind::Softmax, F::Generic, "x"},
    {"log_softmax", OpKind::LogSoftmax, F::Generic, "x"},
    {"layernorm", OpKind::Layernorm, F::Generic, "x, gamma, beta"},
    {"rmsnorm", OpKind::Rmsnorm, F::Generic, "x, gamma"},
    {"batch_norm", OpKind::Add, F::BatchNorm,
     "x, gamma, beta, running_mean, running_var"},
    {"rope", OpKind::Rope, F::Generic, "x, pos"},
    // Linear algebra and lookups.
    {"matmul", OpKind::Matmul, F::Matmul, "a, b"},
    {"embedding", OpKind::Embedding, F::Generic, "table, ids"},
    // Shapes.
    {"reshape", OpKind::Reshape, F::Generic, "x"},
    {"transpose", OpKind::Transpose, F::SwapAxes, "x"},
    {"permute", OpKind::Transpose, F::Generic, "x"},
    {"slice", OpKind::Slice, F::Generic, "x"},
    {"concat", OpKind::Concat, F::Concat, "[x, ...]"},
    {"broadcast", OpKind::Broadcast, F::Generic, "x"},
    // Convolution and pooling (NCHW).
    {"conv2d", OpKind::Conv2d, F::Window, "x, w"},
    {"max_pool2d", OpKind::MaxPool2d, F::Window, "x"},
    {"avg_pool2d", OpKind::AvgPool2d, F::Window, "x"},
    {"global_avg_pool", OpKind::Mean, F::GlobalPool, "x"},
    // Reductions.
    {"sum", OpKind::Sum, F::Reduce, "x"},
    {"mean", OpKind::Mean, F::Reduce, "x"},
    {"max", OpKind::Max, F::Reduce, "x"},
    // Losses.
    {"cross_entropy", OpKind::CrossEntropy, F::Generic, "logits, targets"},
    {"mse", OpKind::Mse, F::Generic, "a, b"},
    // Attention.
    {"causal_mask", OpKind::CausalMask, F::Generic, "scores"},
    {"causal_attention", OpKind::Attention, F::Generic, "q, k, v[, mask]", 3,
     4},
    {"attention", OpKind::Attention, F::Generic, "q, k, v[, mask]", 3, 4},
};

const Builtin *lookupBuiltin(llvm::StringRef name) {
  for (const Builtin &b : kBuiltins)
    if (b.name == name)
      return &b;
  return nullptr;
}

llvm::ArrayRef<Builtin> allBuiltins() { return kBuiltins; }

} // namespace mgc::frontend
