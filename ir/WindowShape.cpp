#include "ir/WindowShape.h"
#include "ir/ShapeRules.h"

#include "llvm/ADT/Twine.h"

#include <string>
#include <variant>

namespace mgc::ir {

namespace {

using DimsOrError = std::variant<WindowDims, std::string>;

bool isConv(OpKind kind) {
  return kind == OpKind::Conv2d || kind == OpKind::Conv2dGradX ||
         kind == OpKind::Conv2dGradW;
}

std::string listStr(const std::vector<int64_t> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// Reads the [height, width] attribute `name` into (a, b): each entry at
// least `least`.
std::string readPair(llvm::StringRef op, const Attrs &attrs,
                     llvm::StringRef name, int64_t least, int64_t &a,
                     int64_t &b) {
  const std::vector<int64_t> &v = attrs.getInts(name);
  if (v.size() != 2 || v[0] < least || v[1] < least)
    return (op + " " + name + " must be [height, width] with entries >= " +
            llvm::Twine(least) + ", got " + listStr(v))
        .str();
  a = v[0];
  b = v[1];
  return "";
}

// The attributes of the window: stride, padding, dilation, groups and
// count_include_pad where the op has them, and the pools' kernel.
std::string readWindow(OpKind kind, llvm::StringRef op, const Attrs &attrs,
                       WindowDims &d) {
  std::string e = readPair(op, attrs, "stride", 1, d.strideH, d.strideW);
  if (e.empty())
    e = readPair(op, attrs, "padding", 0, d.padH, d.padW);
  if (!e.empty())
    return e;
  if (isConv(kind)) {
    if (!(e = readPair(op, attrs, "dilation", 1, d.dilH, d.dilW)).empty())
      return e;
    d.groups = attrs.getInt("groups");
    if (d.groups < 1)
      return (op + " groups must be at least 1, got " +
              llvm::Twine(d.groups))
          .str();
    return "";
  }
  if (!(e = readPair(op, attrs, "kernel", 1, d.r, d.s)).empty())
    return e;
  // As in PyTorch: every window holds at least one pixel of the image.
  if (2 * d.padH > d.r || 2 * d.padW > d.s)
    return (op + " padding must be at most half the kernel, got padding " +
            listStr(attrs.getInts("padding")) + " and kernel " +
            listStr(attrs.getInts("kernel")))
        .str();
  if (attrs.has("count_include_pad"))
    d.countPadding = attrs.getBool("count_include_pad");
  return "";
}

std::string needImage(llvm::StringRef op, llvm::StringRef what,
                      const TensorType &t) {
  if (t.rank() == 4 && isFloat(t.dtype))
    return "";
  return (op + " needs a floating-point " + what + " of rank 4, got " +
          t.str())
      .str();
}

// Sets the output size from the input size and the window, or says that the
// window does not fit.
std::string fitWindow(llvm::StringRef op, WindowDims &d) {
  d.oh = WindowDims::outSize(d.h, d.r, d.strideH, d.padH, d.dilH);
  d.ow = WindowDims::outSize(d.w, d.s, d.strideW, d.padW, d.dilW);
  if (d.oh >= 1 && d.ow >= 1)
    return "";
  return (op + ": a " + llvm::Twine(d.r) + "x" + llvm::Twine(d.s) +
          " window (dilation " + llvm::Twine(d.dilH) + "x" +
          llvm::Twine(d.dilW) + ", padding " + llvm::Twine(d.padH) + "x" +
          llvm::Twine(d.padW) + ") does not fit a " + llvm::Twine(d.h) + "x" +
          llvm::Twine(d.w) + " image")
      .str();
}

// Checks that the cotangent dy is the forward result of the geometry d.
std::string checkCotangent(llvm::StringRef op, const TensorType &dy,
                           const WindowDims &d) {
  std::vector<int64_t> want{d.n, d.k, d.oh, d.ow};
  if (llvm::ArrayRef<int64_t>(dy.shape) == llvm::ArrayRef(want))
    return "";
  return (op + " needs dy of shape " + shapeStr(want) +
          " (the forward result), got " + dy.str())
      .str();
}

// Channels: the filters' input channels times the groups are the image's;
// the groups divide the output channels.
std::string checkChannels(llvm::StringRef op, const TensorType &x,
                          const TensorType &w, const WindowDims &d) {
  if (d.c % d.groups != 0 || d.k % d.groups != 0)
    return (op + " needs input and output channels that the " +
            llvm::Twine(d.groups) + " groups divide, got x " + x.str() +
            " and w " + w.str())
        .str();
  if (w.shape[1] != d.c / d.groups)
    return (op + " of x " + x.str() + " with " + llvm::Twine(d.groups) +
            " group(s) needs w of shape [K, " + llvm::Twine(d.c / d.groups) +
            ", R, S], got " + w.str())
        .str();
  return "";
}

DimsOrError windowOf(OpKind kind, llvm::StringRef op,
                     llvm::ArrayRef<TensorType> operands, const Attrs &attrs) {
  WindowDims d;
  std::string e = readWindow(kind, op, attrs, d);
  if (!e.empty())
    return e;
  const TensorType &a = operands[0];
  switch (kind) {
  case OpKind::Conv2d: {
    const TensorType &w = operands[1];
    if (!(e = needImage(op, "x", a)).empty() ||
        !(e = needImage(op, "w", w)).empty())
      return e;
    if (w.dtype != a.dtype)
      return (op + " needs x and w of one element type, got " + a.str() +
              " and " + w.str())
          .str();
    d.n = a.shape[0], d.c = a.shape[1], d.h = a.shape[2], d.w = a.shape[3];
    d.k = w.shape[0], d.r = w.shape[2], d.s = w.shape[3];
    if (!(e = checkChannels(op, a, w, d)).empty() ||
        !(e = fitWindow(op, d)).empty())
      return e;
    return d;
  }
  case OpKind::Conv2dGradX: {
    const TensorType &w = operands[1];
    if (!(e = needImage(op, "dy", a)).empty() ||
        !(e = needImage(op, "w", w)).empty())
      return e;
    if (!(e = readPair(op, attrs, "in_hw", 1, d.h, d.w)).empty())
      return e;
    d.n = a.shape[0], d.k = w.shape[0], d.c = w.shape[1] * d.groups;
    d.r = w.shape[2], d.s = w.shape[3];
    TensorType x(a.dtype, {d.n, d.c, d.h, d.w});
    if (!(e = checkChannels(op, x, w, d)).empty() ||
        !(e = fitWindow(op, d)).empty() ||
        !(e = checkCotangent(op, a, d)).empty())
      return e;
    return d;
  }
  case OpKind::Conv2dGradW: {
    const TensorType &x = operands[1];
    if (!(e = needImage(op, "dy", a)).empty() ||
        !(e = needImage(op, "x", x)).empty())
      return e;
    if (!(e = readPair(op, attrs, "kernel", 1, d.r, d.s)).empty())
      return e;
    d.n = x.shape[0], d.c = x.shape[1], d.h = x.shape[2], d.w = x.shape[3];
    d.k = a.shape[1];
    if (d.c % d.groups != 0 || d.k % d.groups != 0)
      return (op + " needs channels that the " + llvm::Twine(d.groups) +
              " groups divide, got dy " + a.str() + " and x " + x.str())
          .str();
    if (!(e = fitWindow(op, d)).empty() ||
        !(e = checkCotangent(op, a, d)).empty())
      return e;
    return d;
  }
  case OpKind::MaxPool2d:
  case OpKind::AvgPool2d:
  case OpKind::MaxPool2dGrad: {
    const TensorType &x = kind == OpKind::MaxPool2dGrad ? operands[1] : a;
    if (!(e = needImage(op, "x", x)).empty())
      return e;
    d.n = x.shape[0], d.c = d.k = d.groups = x.shape[1];
    d.h = x.shape[2], d.w = x.shape[3];
    if (d.groups == 0)
      d.groups = 1;
    if (!(e = fitWindow(op, d)).empty())
      return e;
    if (kind == OpKind::MaxPool2dGrad &&
        !(e = checkCotangent(op, a, d)).empty())
      return e;
    return d;
  }
  case OpKind::AvgPool2dGrad: {
    if (!(e = needImage(op, "dy", a)).empty() ||
        !(e = readPair(op, attrs, "in_hw", 1, d.h, d.w)).empty())
      return e;
    d.n = a.shape[0], d.c = d.k = a.shape[1];
    d.groups = d.c > 0 ? d.c : 1;
    if (!(e = fitWindow(op, d)).empty() ||
        !(e = checkCotangent(op, a, d)).empty())
      return e;
    return d;
  }
  default:
    return (op + " is not a window op").str();
  }
}

TypeOrError resultOf(OpKind kind, const ShapeQuery &q) {
  DimsOrError dims = windowOf(kind, q.opName, q.operands, q.attrs);
  if (auto *message = std::get_if<std::string>(&dims))
    return TypeOrError::error(*message);
  const WindowDims &d = std::get<WindowDims>(dims);
  DType dt = q.operands[0].dtype;
  switch (kind) {
  case OpKind::Conv2dGradX:
  case OpKind::MaxPool2dGrad:
  case OpKind::AvgPool2dGrad:
    return TensorType(dt, {d.n, d.c, d.h, d.w});
  case OpKind::Conv2dGradW:
    return TensorType(dt, {d.k, d.cg(), d.r, d.s});
  default:
    return TensorType(dt, {d.n, d.k, d.oh, d.ow});
  }
}

} // namespace

WindowDims windowDims(const Op &op) {
  std::vector<TensorType> types;
  for (unsigned i = 0; i < op.numOperands(); ++i)
    types.push_back(op.operand(i)->type());
  return std::get<WindowDims>(
      windowOf(op.kind(), op.info().name, types, op.attrs()));
}

namespace rules {

TypeOrError inferConv2d(const ShapeQuery &q) {
  return resultOf(OpKind::Conv2d, q);
}
TypeOrError inferConv2dGradX(const ShapeQuery &q) {
  return resultOf(OpKind::Conv2dGradX, q);
}
TypeOrError inferConv2dGradW(const ShapeQuery &q) {
  return resultOf(OpKind::Conv2dGradW, q);
}
TypeOrError inferPool2d(const ShapeQuery &q) {
  return resultOf(*lookupOpKind(q.opName), q);
}
TypeOrError inferPool2dGrad(const ShapeQuery &q) {
  return resultOf(*lookupOpKind(q.opName), q);
}

} // namespace rules

} // namespace mgc::ir
