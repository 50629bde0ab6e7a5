// The interpreter against hand-computed values, op by op.
#include "InterpreterTestSupport.h"

#include <functional>
#include <limits>
#include <map>
#include <numbers>

using namespace mgc::ir;
using namespace mgc::ir::testing;

namespace {

using Ints = std::vector<int64_t>;
const double kInf = std::numeric_limits<double>::infinity();
const double kLn2 = std::numbers::ln2;
} // namespace

TEST_CASE("interp: constant") {
  InterpFixture f;
  checkExact(f.eval(f.builder.constant(2.5, DType::F32)).data, {2.5});
  InterpFixture g;
  HostTensor t = g.eval(g.builder.constant(-3, DType::I64));
  CHECK(t.type == TensorType(DType::I64, {}));
  checkExact(t.data, {-3});
}

TEST_CASE("interp: cast to bf16 rounds the f32 to nearest even") {
  InterpFixture f;
  Value *x = f.input("x", f64({6}),
                     {1.00390625, 1.01171875, 1.0 + 0x1p-8 + 0x1p-20,
                      -1.01171875, 3.4e38, 0.0});
  HostTensor y =
      f.eval(f.op(OpKind::Cast, {x}, {{"dtype", std::string("bf16")}}));
  CHECK(y.type.dtype == DType::BF16);
  checkExact(y.data, {1.0, 1.015625, 1.0078125, -1.015625, kInf, 0.0});
}

TEST_CASE("interp: cast to f16 and f32") {
  InterpFixture f;
  Value *x = f.input("x", f64({8}),
                     {1.0 + 0x1p-11, 1.0 + 3 * 0x1p-11, 65519.0, 65520.0,
                      0x1p-25, 3 * 0x1p-25, 0.1, -0.1});
  checkExact(
      f.eval(f.op(OpKind::Cast, {x}, {{"dtype", std::string("f16")}})).data,
      {1.0, 1.0 + 0x1p-9, 65504.0, kInf, 0.0, 0x1p-23, 0.0999755859375,
       -0.0999755859375});

  InterpFixture g;
  Value *z = g.input("z", f64({4}), {0.1, 1e39, -1e39, 0x1.fffffefp127});
  checkExact(
      g.eval(g.op(OpKind::Cast, {z}, {{"dtype", std::string("f32")}})).data,
      {0.100000001490116119384765625, kInf, -kInf,
       static_cast<double>(std::numeric_limits<float>::max())});
}

TEST_CASE("interp: cast to integers truncates toward zero; f64 unchanged") {
  InterpFixture f;
  Value *x = f.input("x", f64({5}), {2.7, -2.7, 0.5, -0.5, 1e10});
  checkExact(
      f.eval(f.op(OpKind::Cast, {x}, {{"dtype", std::string("i64")}})).data,
      {2, -2, 0, 0, 1e10});
  InterpFixture g;
  Value *y = g.input("y", f32({2}), {0.1, 1e300});
  checkExact(
      g.eval(g.op(OpKind::Cast, {y}, {{"dtype", std::string("f64")}})).data,
      {0.1, 1e300});
}

TEST_CASE("interp: add sub mul div") {
  InterpFixture f;
  Value *a = f.input("a", f64({2, 2}), {1, 2, 3, 4});
  Value *b = f.input("b", f64({2, 2}), {0.5, -2, 8, 16});
  checkExact(f.eval(f.op(OpKind::Add, {a, b})).data, {1.5, 0, 11, 20});
  checkExact(f.eval(f.op(OpKind::Sub, {a, b})).data, {0.5, 4, -5, -12});
  checkExact(f.eval(f.op(OpKind::Mul, {a, b})).data, {0.5, -4, 24, 64});
  checkExact(f.eval(f.op(OpKind::Div, {a, b})).data, {2, -1, 0.375, 0.25});
}

TEST_CASE("interp: integer division truncates toward zero") {
  InterpFixture f;
  Value *a = f.input("a", i32({4}), {7, -7, 7, 6});
  Value *b = f.input("b", i32({4}), {2, 2, -2, 3});
  checkExact(f.eval(f.op(OpKind::Div, {a, b})).data, {3, -3, -3, 2});
  checkExact(f.eval(f.op(OpKind::Neg, {a})).data, {-7, 7, -7, -6});
}

TEST_CASE("interp: unary elementwise ops") {
  InterpFixture f;
  Value *x = f.input("x", f64({3}), {0, 1, -1});
  checkExact(f.eval(f.op(OpKind::Neg, {x})).data, {-0.0, -1, 1});
  checkClose(f.eval(f.op(OpKind::Exp, {x})).data,
             {1, std::numbers::e, 1 / std::numbers::e});
  checkClose(f.eval(f.op(OpKind::Tanh, {x})).data,
             {0, 0.7615941559557649, -0.7615941559557649});
  checkExact(f.eval(f.op(OpKind::Relu, {x})).data, {0, 1, 0});
  checkClose(f.eval(f.op(OpKind::Gelu, {x})).data,
             {0, 0.8411919906082768, -0.15880800939172324});
  Value *p = f.input("p", f64({3}), {1, 4, std::numbers::e});
  checkClose(f.eval(f.op(OpKind::Log, {p})).data, {0, 2 * kLn2, 1});
  checkClose(f.eval(f.op(OpKind::Sqrt, {p})).data,
             {1, 2, std::sqrt(std::numbers::e)});
  checkClose(f.eval(f.op(OpKind::Rsqrt, {p})).data,
             {1, 0.5, 1 / std::sqrt(std::numbers::e)});
  Value *s = f.input("s", f64({3}), {0, std::log(3.0), -std::log(3.0)});
  checkClose(f.eval(f.op(OpKind::Sigmoid, {s})).data, {0.5, 0.75, 0.25});
}

// A device's part of a tensor split by rows draws the whole tensor's mask
// at its rows: the parts together are the whole tensor's dropout.
TEST_CASE("interp: dropout_part of each part of the rows is the whole "
          "dropout's") {
  std::vector<double> data(5 * 6);
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<double>(i) + 1;
  InterpFixture whole;
  Value *x = whole.input("x", f64({5, 6}), data);
  std::vector<double> expected =
      whole
          .eval(whole.op(OpKind::Dropout, {x},
                         {{"p", 0.4}, {"seed", int64_t(3)}}))
          .data;
  std::vector<int64_t> sizes{2, 0, 3};
  std::vector<double> joined;
  int64_t row = 0;
  for (int64_t part = 0; part < 3; ++part) {
    InterpFixture f;
    int64_t rows = sizes[static_cast<size_t>(part)];
    std::vector<double> mine(data.begin() + row * 6,
                             data.begin() + (row + rows) * 6);
    Value *p = f.input("x", f64({rows, 6}), mine);
    HostTensor y = f.eval(f.op(OpKind::DropoutPart, {p},
                               {{"p", 0.4},
                                {"seed", int64_t(3)},
                                {"axis", std::string("dp")},
                                {"sizes", sizes},
                                {"part", part}}));
    joined.insert(joined.end(), y.data.begin(), y.data.end());
    row += rows;
  }
  checkExact(joined, expected);
  // Without its part the interpreter cannot tell which rows it has.
  InterpFixture f;
  Value *p = f.input("x", f64({2, 6}), std::vector<double>(12, 1.0));
  CHECK(f.evalError(f.op(OpKind::DropoutPart, {p},
                         {{"p", 0.4},
                          {"seed", int64_t(3)},
                          {"axis", std::string("dp")},
                          {"sizes", sizes},
                          {"part", int64_t(-1)}}))
            .find("needs attribute `part`") != std::string::npos);
}

TEST_CASE("interp: dropout follows the counter-based rule") {
  InterpFixture f;
  std::vector<double> data(64);
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<double>(i) + 1;
  Value *x = f.input("x", f64({8, 8}), data);
  checkExact(
      f.eval(f.op(OpKind::Dropout, {x}, {{"p", 0.0}, {"seed", int64_t(7)}}))
          .data,
      data);
  HostTensor y =
      f.eval(f.op(OpKind::Dropout, {x}, {{"p", 0.25}, {"seed", int64_t(7)}}));
  size_t dropped = 0;
  for (size_t i = 0; i < data.size(); ++i) {
    bool drop = mgc::uniform01(7, mgc::hashName("dropout"), i) < 0.25;
    dropped += drop;
    CHECK(y.data[i] == (drop ? 0.0 : data[i] * (1 / 0.75)));
  }
  CHECK(dropped > 0);
  CHECK(dropped < data.size());
}

TEST_CASE("interp: softmax and log_softmax") {
  InterpFixture f;
  double l2 = kLn2, l5 = std::log(5.0);
  Value *x = f.input("x", f64({2, 3}), {0, l2, l5, 100 + l5, 100 + l2, 100});
  checkClose(f.eval(f.op(OpKind::Softmax, {x})).data,
             {0.125, 0.25, 0.625, 0.625, 0.25, 0.125});
  checkClose(f.eval(f.op(OpKind::LogSoftmax, {x})).data,
             {-3 * l2, -2 * l2, l5 - 3 * l2, l5 - 3 * l2, -2 * l2, -3 * l2});
  // Along axis 0: each column is a pair.
  Value *c = f.input("c", f64({2, 2}), {0, 1000, std::log(3.0), 1000});
  checkClose(f.eval(f.op(OpKind::Softmax, {c}, {{"axis", int64_t(0)}})).data,
             {0.25, 0.5, 0.75, 0.5});
}

TEST_CASE("interp: layernorm") {
  InterpFixture f;
  Value *x = f.input("x", f64({2, 2}), {1, 3, -4, 0});
  Value *g = f.input("g", f64({2}), {2, 3});
  Value *b = f.input("b", f64({2}), {1, -1});
  double eps = 1e-5;
  // Row 0: mean 2, variance 1; row 1: mean -2, variance 4.
  double s0 = 1 / std::sqrt(1 + eps), s1 = 2 / std::sqrt(4 + eps);
  checkClose(f.eval(f.op(OpKind::Layernorm, {x, g, b}, {{"eps", eps}})).data,
             {-2 * s0 + 1, 3 * s0 - 1, -2 * s1 + 1, 3 * s1 - 1});
}

TEST_CASE("interp: rmsnorm") {
  InterpFixture f;
  Value *x = f.input("x", f64({2, 2}), {3, 4, -1, 1});
  Value *g = f.input("g", f64({2}), {2, 0.5});
  double eps = 1e-5;
  // Row 0: mean of squares 12.5; row 1: 1.
  double s0 = 1 / std::sqrt(12.5 + eps), s1 = 1 / std::sqrt(1 + eps);
  checkClose(f.eval(f.op(OpKind::Rmsnorm, {x, g}, {{"eps", eps}})).data,
             {6 * s0, 2 * s0, -2 * s1, 0.5 * s1});
}

TEST_CASE("interp: rope turns the halves of each row by its position") {
  InterpFixture f;
  // Dh = 4: pairs (x0, x2) and (x1, x3) turn by pos and pos / 100.
  Value *x = f.input("x", f64({2, 4}), {1, 2, 3, 4, 1, 0, 0, 1});
  Value *pos = f.input("pos", i32({2}), {0, 3});
  HostTensor y = f.eval(f.op(OpKind::Rope, {x, pos}, {{"theta", 10000.0}}));
  double c0 = std::cos(3.0), s0 = std::sin(3.0);
  double c1 = std::cos(0.03), s1 = std::sin(0.03);
  checkClose(y.data, {1, 2, 3, 4, c0, -s1, s0, c1});
  // Backwards undoes it.
  Value *back = f.op(OpKind::Rope, {f.op(OpKind::Rope, {x, pos}), pos},
                     {{"inverse", true}});
  checkClose(f.eval(back).data, {1, 2, 3, 4, 1, 0, 0, 1});
}

TEST_CASE("interp: conv2d and the pools on hand-computed values") {
  InterpFixture f;
  Value *x = f.input("x", f64({1, 1, 3, 3}), {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Value *w = f.input("w", f64({1, 1, 2, 2}), {1, 0, 0, -1});
  // y[i, j] = x[i, j] - x[i + 1, j + 1].
  checkExact(f.eval(f.op(OpKind::Conv2d, {x, w})).data, {-4, -4, -4, -4});
  // Padding 1, stride 2: the windows start at rows and columns -1 and 1.
  checkExact(f.eval(f.op(OpKind::Conv2d, {x, w},
                         {{"stride", Ints{2, 2}}, {"padding", Ints{1, 1}}}))
                 .data,
             {-1, -3, -7, -4});
  // Dilation 2: one window, x[0, 0] - x[2, 2].
  checkExact(
      f.eval(f.op(OpKind::Conv2d, {x, w}, {{"dilation", Ints{2, 2}}})).data,
      {-8});
  // Two groups of one channel: each output channel sees its own input.
  Value *x2 = f.input("x2", f64({1, 2, 1, 1}), {2, 3});
  Value *w2 = f.input("w2", f64({2, 1, 1, 1}), {10, 100});
  checkExact(
      f.eval(f.op(OpKind::Conv2d, {x2, w2}, {{"groups", int64_t(2)}})).data,
      {20, 300});
  Attrs k2{{"kernel", Ints{2, 2}}, {"stride", Ints{1, 1}}};
  checkExact(f.eval(f.op(OpKind::MaxPool2d, {x}, k2)).data, {5, 6, 8, 9});
  checkExact(f.eval(f.op(OpKind::AvgPool2d, {x}, k2)).data, {3, 4, 6, 7});
  // Padding counts as zeros in the divisor unless count_include_pad is
  // false: the corner window holds x[0, 0] alone.
  Attrs padded{{"kernel", Ints{2, 2}},
               {"stride", Ints{2, 2}},
               {"padding", Ints{1, 1}}};
  checkExact(f.eval(f.op(OpKind::AvgPool2d, {x}, padded)).data,
             {0.25, 5.0 / 4, 11.0 / 4, 28.0 / 4});
  padded.set("count_include_pad", false);
  checkExact(f.eval(f.op(OpKind::AvgPool2d, {x}, padded)).data,
             {1, 5.0 / 2, 11.0 / 2, 28.0 / 4});
  // max_pool2d's gradient goes to the first maximum of each window.
  Value *ties = f.input("ties", f64({1, 1, 2, 2}), {7, 7, 1, 7});
  Value *dy = f.input("dy", f64({1, 1, 1, 1}), {3});
  checkExact(f.eval(f.op(OpKind::MaxPool2dGrad, {dy, ties},
                         {{"kernel", Ints{2, 2}}, {"stride", Ints{2, 2}}}))
                 .data,
             {3, 0, 0, 0});
}

TEST_CASE("interp: matmul, shared and batched right operand") {
  InterpFixture f;
  Value *a = f.input("a", f64({2, 3}), {1, 2, 3, 4, 5, 6});
  Value *b = f.input("b", f64({3, 2}), {7, 8, 9, 10, 11, 12});
  checkExact(f.eval(f.op(OpKind::Matmul, {a, b})).data, {58, 64, 139, 154});

  Value *a3 = f.input("a3", f64({2, 2, 2}), {1, 2, 3, 4, 5, 6, 7, 8});
  Value *w = f.input("w", f64({2, 2}), {1, 0, 1, 1});
  checkExact(f.eval(f.op(OpKind::Matmul, {a3, w})).data,
             {3, 2, 7, 4, 11, 6, 15, 8});
  Value *b3 = f.input("b3", f64({2, 2, 2}), {1, 0, 0, 1, 0, 1, 1, 0});
  checkExact(f.eval(f.op(OpKind::Matmul, {a3, b3})).data,
             {1, 2, 3, 4, 6, 5, 8, 7});
}

TEST_CASE("interp: embedding") {
  InterpFixture f;
  Value *table = f.param("table", f64({3, 2}), {10, 11, 20, 21, 30, 31});
  Value *ids = f.input("ids", i32({2, 2}), {2, 0, 2, 1});
  HostTensor y = f.eval(f.op(OpKind::Embedding, {table, ids}));
  CHECK(y.type.shape == Shape{2, 2, 2});
  checkExact(y.data, {30, 31, 10, 11, 30, 31, 20, 21});
}

TEST_CASE("interp: reshape and transpose") {
  InterpFixture f;
  Value *x = f.input("x", f64({2, 3}), {1, 2, 3, 4, 5, 6});
  HostTensor r = f.eval(
      f.op(OpKind::Reshape, {x}, {{"shape", std::vector<int64_t>{3, 1, 2}}}));
  CHECK(r.type.shape == Shape{3, 1, 2});
  checkExact(r.data, {1, 2, 3, 4, 5, 6});
  checkExact(f.eval(f.op(OpKind::Transpose, {x},
                         {{"perm", std::vector<int64_t>{1, 0}}}))
                 .data,
             {1, 4, 2, 5, 3, 6});
  // in[2, 3, 2] with perm [2, 0, 1]: out[k][i][j] = in[i][j][k].
  std::vector<double> data(12);
  for (int i = 0; i < 12; ++i)
    data[i] = i;
  Value *t = f.input("t", f64({2, 3, 2}), data);
  HostTensor p = f.eval(
      f.op(OpKind::Transpose, {t}, {{"perm", std::vector<int64_t>{2, 0, 1}}}));
  CHECK(p.type.shape == Shape{2, 2, 3});
  checkExact(p.data, {0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9, 11});
}

TEST_CASE("interp: slice and concat") {
  InterpFixture f;
  Value *x = f.input("x", f64({2, 4}), {1, 2, 3, 4, 5, 6, 7, 8});
  checkExact(f.eval(f.op(OpKind::Slice, {x},
                         {{"axis", int64_t(1)},
                          {"start", int64_t(1)},
                          {"end", int64_t(3)}}))
                 .data,
             {2, 3, 6, 7});
  checkExact(f.eval(f.op(OpKind::Slice, {x},
                         {{"axis", int64_t(-2)},
                          {"start", int64_t(1)},
                          {"end", int64_t(2)}}))
                 .data,
             {5, 6, 7, 8});
  Value *y = f.input("y", f64({2, 1}), {9, 10});
  checkExact(
      f.eval(f.op(OpKind::Concat, {x, y, x}, {{"axis", int64_t(1)}})).data,
      {1, 2, 3, 4, 9, 1, 2, 3, 4, 5, 6, 7, 8, 10, 5, 6, 7, 8});
  Value *z = f.input("z", f64({1, 4}), {0, 0, 0, -1});
  checkExact(f.eval(f.op(OpKind::Concat, {z, x}, {{"axis", int64_t(0)}})).data,
             {0, 0, 0, -1, 1, 2, 3, 4, 5, 6, 7, 8});
}

TEST_CASE("interp: broadcast follows NumPy rules") {
  InterpFixture f;
  Value *row = f.input("row", f64({3}), {1, 2, 3});
  checkExact(f.eval(f.op(OpKind::Broadcast, {row},
                         {{"shape", std::vector<int64_t>{2, 3}}}))
                 .data,
             {1, 2, 3, 1, 2, 3});
  Value *col = f.input("col", f64({2, 1}), {1, 2});
  checkExact(f.eval(f.op(OpKind::Broadcast, {col},
                         {{"shape", std::vector<int64_t>{2, 2, 3}}}))
                 .data,
             {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2});
  Value *s = f.builder.constant(4, DType::F64);
  checkExact(f.eval(f.op(OpKind::Broadcast, {s},
                         {{"shape", std::vector<int64_t>{2, 2}}}))
                 .data,
             {4, 4, 4, 4});
}

TEST_CASE("interp: sum, mean, max over axes") {
  InterpFixture f;
  Value *x = f.input("x", f64({2, 3}), {1, 5, 3, 4, 2, 9});
  auto reduce = [&](OpKind kind, std::vector<int64_t> axes, bool keep) {
    return f.eval(
        f.op(kind, {x}, {{"axes", std::move(axes)}, {"keepdims", keep}}));
  };
  checkExact(reduce(OpKind::Sum, {1}, false).data, {9, 15});
  checkExact(reduce(OpKind::Sum, {0}, false).data, {5, 7, 12});
  checkExact(reduce(OpKind::Sum, {0, 1}, false).data, {24});
  checkExact(reduce(OpKind::Sum, {}, false).data, {1, 5, 3, 4, 2, 9});
  HostTensor k = reduce(OpKind::Sum, {-1}, true);
  CHECK(k.type.shape == Shape{2, 1});
  checkExact(k.data, {9, 15});
  checkExact(reduce(OpKind::Mean, {1}, false).data, {3, 5});
  checkExact(reduce(OpKind::Mean, {0}, true).data, {2.5, 3.5, 6});
  checkExact(reduce(OpKind::Max, {1}, false).data, {5, 9});
  checkExact(reduce(OpKind::Max, {0}, false).data, {4, 5, 9});
  checkExact(reduce(OpKind::Max, {1, 0}, true).data, {9});

  Value *n = f.input("n", i32({3}), {1, 2, 2});
  checkExact(
      f.eval(f.op(OpKind::Mean, {n}, {{"axes", std::vector<int64_t>{0}}})).data,
      {1}); // 5 / 3 truncated
}

TEST_CASE("interp: cross_entropy and mse") {
  InterpFixture f;
  Value *logits = f.input("logits", f64({2, 2}), {0, 0, 0, std::log(3.0)});
  Value *y = f.input("y", i32({2}), {0, 1});
  // Row 0: -log(1/2); row 1: -log(3/4).
  checkClose(f.eval(f.op(OpKind::CrossEntropy, {logits, y})).data,
             {(kLn2 + std::log(4.0 / 3.0)) / 2});
  Value *a = f.input("a", f64({3}), {1, 2, 3});
  Value *b = f.input("b", f64({3}), {1, 0, 0});
  checkClose(f.eval(f.op(OpKind::Mse, {a, b})).data, {13.0 / 3.0});
}

TEST_CASE("interp: causal_mask and attention") {
  InterpFixture f;
  Value *s = f.input("s", f64({2, 2, 2}), {1, 2, 3, 4, 5, 6, 7, 8});
  checkExact(f.eval(f.op(OpKind::CausalMask, {s})).data,
             {1, -kInf, 3, 4, 5, -kInf, 7, 8});
  // T = 2, Dh = 1: row 0 attends to itself only; row 1 has scores
  // (1 * 0, 1 * ln 3) -> weights (1/4, 3/4).
  Value *q = f.input("q", f64({2, 1}), {5, 1});
  Value *k = f.input("k", f64({2, 1}), {0, std::log(3.0)});
  Value *v = f.input("v", f64({2, 1}), {8, 4});
  checkClose(f.eval(f.op(OpKind::Attention, {q, k, v})).data, {8, 5});
}

// Every op kind has an evaluation function, and a smoke case here that
// evaluates it: a new row in OpKinds.def fails this test until both exist.
TEST_CASE("interp: every op kind is evaluated") {
  using Case = std::function<Value *(InterpFixture &)>;
  auto unary = [](OpKind kind, Attrs attrs = {}) -> Case {
    return [=](InterpFixture &f) {
      return f.op(kind, {f.randomInput("x", {2, 3}, 1)}, attrs);
    };
  };
  auto unary4 = [](OpKind kind) -> Case {
    return [=](InterpFixture &f) {
      return f.op(kind, {f.randomInput("x", {1, 2, 4, 4}, 1)},
                  {{"kernel", Ints{2, 2}}, {"stride", Ints{1, 2}}});
    };
  };
  auto binary = [](OpKind kind) -> Case {
    return [=](InterpFixture &f) {
      return f.op(
          kind, {f.randomInput("a", {2, 3}, 1), f.randomInput("b", {2, 3}, 2)});
    };
  };
  std::map<OpKind, Case> cases = {
      {OpKind::Constant,
       [](InterpFixture &f) { return f.builder.constant(1, DType::F32); }},
      {OpKind::Cast, unary(OpKind::Cast, {{"dtype", std::string("bf16")}})},
      {OpKind::Add, binary(OpKind::Add)},
      {OpKind::Sub, binary(OpKind::Sub)},
      {OpKind::Mul, binary(OpKind::Mul)},
      {OpKind::Div, binary(OpKind::Div)},
      {OpKind::Neg, unary(OpKind::Neg)},
      {OpKind::Exp, unary(OpKind::Exp)},
      {OpKind::Log, unary(OpKind::Log)},
      {OpKind::Sqrt, unary(OpKind::Sqrt)},
      {OpKind::Rsqrt, unary(OpKind::Rsqrt)},
      {OpKind::Tanh, unary(OpKind::Tanh)},
      {OpKind::Relu, unary(OpKind::Relu)},
      {OpKind::Gelu, unary(OpKind::Gelu)},
      {OpKind::Sigmoid, unary(OpKind::Sigmoid)},
      {OpKind::Dropout, unary(OpKind::Dropout, {{"p", 0.5}, {"seed", int64_t(1)}})},
      {OpKind::DropoutPart,
       unary(OpKind::DropoutPart, {{"p", 0.5},
                                   {"seed", int64_t(1)},
                                   {"axis", std::string("dp")},
                                   {"sizes", std::vector<int64_t>{1, 2}},
                                   {"part", int64_t(1)}})},
      {OpKind::Softmax, unary(OpKind::Softmax)},
      {OpKind::LogSoftmax, unary(OpKind::LogSoftmax)},
      {OpKind::Layernorm,
       [](InterpFixture &f) {
         return f.op(OpKind::Layernorm, {f.randomInput("x", {2, 3}, 1),
                                         f.randomInput("g", {3}, 2),
                                         f.randomInput("b", {3}, 3)});
       }},
      {OpKind::Rmsnorm,
       [](InterpFixture &f) {
         return f.op(OpKind::Rmsnorm, {f.randomInput("x", {2, 3}, 1),
                                       f.randomInput("g", {3}, 2)});
       }},
      {OpKind::Rope,
       [](InterpFixture &f) {
         return f.op(OpKind::Rope, {f.randomInput("x", {2, 3, 4}, 1),
                                    f.input("pos", i32({3}), {2, 0, 1})});
       }},
      {OpKind::RmsnormGradX,
       [](InterpFixture &f) {
         return f.op(OpKind::RmsnormGradX, {f.randomInput("dy", {2, 3}, 1),
                                            f.randomInput("x", {2, 3}, 2),
                                            f.randomInput("g", {3}, 3)});
       }},
      {OpKind::Matmul,
       [](InterpFixture &f) {
         return f.op(OpKind::Matmul, {f.randomInput("a", {2, 3}, 1),
                                      f.randomInput("b", {3, 4}, 2)});
       }},
      {OpKind::Embedding,
       [](InterpFixture &f) {
         return f.op(OpKind::Embedding,
                     {f.randomInput("t", {4, 3}, 1),
                      f.input("ids", i32({2}), {3, 0})});
       }},
      {OpKind::Reshape,
       unary(OpKind::Reshape, {{"shape", std::vector<int64_t>{6}}})},
      {OpKind::Transpose,
       unary(OpKind::Transpose, {{"perm", std::vector<int64_t>{1, 0}}})},
      {OpKind::Slice, unary(OpKind::Slice, {{"axis", int64_t(1)},
                                            {"start", int64_t(0)},
                                            {"end", int64_t(2)}})},
      {OpKind::Concat, unary(OpKind::Concat, {{"axis", int64_t(0)}})},
      {OpKind::Broadcast,
       unary(OpKind::Broadcast, {{"shape", std::vector<int64_t>{4, 2, 3}}})},
      {OpKind::Sum, unary(OpKind::Sum, {{"axes", std::vector<int64_t>{0}}})},
      {OpKind::Mean, unary(OpKind::Mean, {{"axes", std::vector<int64_t>{1}}})},
      {OpKind::Max, unary(OpKind::Max, {{"axes", std::vector<int64_t>{0, 1}}})},
      {OpKind::CrossEntropy,
       [](InterpFixture &f) {
         return f.op(OpKind::CrossEntropy,
                     {f.randomInput("l", {2, 3}, 1),
                      f.input("y", i32({2}), {2, 0})});
       }},
      {OpKind::Mse, binary(OpKind::Mse)},
      {OpKind::CausalMask,
       [](InterpFixture &f) {
         return f.op(OpKind::CausalMask, {f.randomInput("s", {2, 3, 3}, 1)});
       }},
      {OpKind::Attention,
       [](InterpFixture &f) {
         return f.op(OpKind::Attention, {f.randomInput("q", {3, 2}, 1),
                                         f.randomInput("k", {3, 2}, 2),
                                         f.randomInput("v", {3, 2}, 3)});
       }},
      {OpKind::AttentionGrad, // values checked in AttentionGradTest.cpp
       [](InterpFixture &f) {
         return f.op(OpKind::AttentionGrad, {f.randomInput("q", {3, 2}, 1),
                                             f.randomInput("k", {3, 2}, 2),
                                             f.randomInput("v", {3, 2}, 3),
                                             f.randomInput("y", {3, 2}, 4),
                                             f.randomInput("dy", {3, 2}, 5)});
       }},
      // The internal backward ops (their values are checked against finite
      // differences in GradCheckTest.cpp).
      {OpKind::ReluGrad, binary(OpKind::ReluGrad)},
      {OpKind::GeluGrad, binary(OpKind::GeluGrad)},
      {OpKind::SigmoidGrad, binary(OpKind::SigmoidGrad)},
      {OpKind::TanhGrad, binary(OpKind::TanhGrad)},
      {OpKind::SoftmaxGrad, binary(OpKind::SoftmaxGrad)},
      {OpKind::LogSoftmaxGrad, binary(OpKind::LogSoftmaxGrad)},
      {OpKind::LayernormGradX,
       [](InterpFixture &f) {
         return f.op(OpKind::LayernormGradX, {f.randomInput("dy", {2, 3}, 1),
                                              f.randomInput("x", {2, 3}, 2),
                                              f.randomInput("g", {3}, 3)});
       }},
      {OpKind::EmbeddingGrad,
       [](InterpFixture &f) {
         return f.op(OpKind::EmbeddingGrad,
                     {f.randomInput("dy", {2, 3}, 1),
                      f.input("ids", i32({2}), {3, 0})},
                     {{"rows", int64_t(4)}});
       }},
      {OpKind::MaxGrad,
       [](InterpFixture &f) {
         Attrs a{{"axes", std::vector<int64_t>{1}}};
         Value *x = f.randomInput("x", {2, 3}, 1);
         return f.op(OpKind::MaxGrad, {f.randomInput("dy", {2}, 2), x,
                                       f.op(OpKind::Max, {x}, a)},
                     a);
       }},
      {OpKind::CrossEntropyGrad,
       [](InterpFixture &f) {
         return f.op(OpKind::CrossEntropyGrad,
                     {f.randomInput("dy", {}, 3), f.randomInput("l", {2, 3}, 1),
                      f.input("y", i32({2}), {2, 0})});
       }},
      {OpKind::CausalMaskGrad,
       [](InterpFixture &f) {
         return f.op(OpKind::CausalMaskGrad,
                     {f.randomInput("s", {2, 3, 3}, 1)});
       }},
      // The internal ops of the training step (their values are checked in
      // OptimizerTest.cpp).
      {OpKind::Cos, unary(OpKind::Cos)},
      {OpKind::Minimum, binary(OpKind::Minimum)},
      {OpKind::Maximum, binary(OpKind::Maximum)},
      // Rotary embeddings, masks, activations (values in
      // InterpreterMathTest below and the CPU kernel tests).
      {OpKind::Sin, unary(OpKind::Sin)},
      {OpKind::Abs, unary(OpKind::Abs)},
      {OpKind::Sign, unary(OpKind::Sign)},
      {OpKind::Pow, binary(OpKind::Pow)},
      {OpKind::Softplus, unary(OpKind::Softplus)},
      {OpKind::ModeSelect, binary(OpKind::ModeSelect)},
      {OpKind::Where,
       [](InterpFixture &f) {
         return f.op(OpKind::Where, {f.input("c", i32({2}), {1, 0}),
                                     f.randomInput("a", {2}, 1),
                                     f.randomInput("b", {2}, 2)});
       }},
      {OpKind::Iota,
       [](InterpFixture &f) {
         return f.op(OpKind::Iota, {},
                     {{"shape", std::vector<int64_t>{2, 3}},
                      {"axis", int64_t(1)},
                      {"dtype", std::string("f64")}});
       }},
      {OpKind::MinMaxGrad,
       [](InterpFixture &f) {
         return f.op(OpKind::MinMaxGrad,
                     {f.randomInput("dy", {2}, 1), f.randomInput("a", {2}, 2),
                      f.randomInput("b", {2}, 3)},
                     {{"maximum", true}});
       }},
      // Tensor parallelism over a vocabulary (values checked in
      // VocabOpsTest.cpp).
      {OpKind::SumExp,
       [](InterpFixture &f) {
         return f.op(OpKind::SumExp, {f.randomInput("x", {2, 3}, 1),
                                      f.randomInput("m", {2}, 2)});
       }},
      {OpKind::ClassLogit,
       [](InterpFixture &f) {
         return f.op(OpKind::ClassLogit, {f.randomInput("l", {2, 3}, 1),
                                          f.input("y", i32({2}), {2, 0})});
       }},
      {OpKind::CrossEntropyGradStats,
       [](InterpFixture &f) {
         return f.op(OpKind::CrossEntropyGradStats,
                     {f.randomInput("dy", {}, 3), f.randomInput("l", {2, 3}, 1),
                      f.randomInput("m", {2}, 2), f.input("s", f64({2}), {2, 3}),
                      f.input("y", i32({2}), {2, 0})});
       }},
      {OpKind::EmbeddingPart,
       [](InterpFixture &f) {
         return f.op(OpKind::EmbeddingPart,
                     {f.randomInput("table", {2, 3}, 1),
                      f.input("ids", i32({2}), {3, 0})},
                     {{"axis", std::string("tp")},
                      {"sizes", std::vector<int64_t>{2, 2}},
                      {"part", int64_t(1)}});
       }},
      {OpKind::EmbeddingGradPart,
       [](InterpFixture &f) {
         return f.op(OpKind::EmbeddingGradPart,
                     {f.randomInput("dy", {2, 3}, 1),
                      f.input("ids", i32({2}), {3, 0})},
                     {{"axis", std::string("tp")},
                      {"sizes", std::vector<int64_t>{2, 2}},
                      {"part", int64_t(0)}});
       }},
      {OpKind::Fused,
       [](InterpFixture &f) {
         return f.op(OpKind::Fused,
                     {f.randomInput("a", {2, 3}, 1), f.randomInput("b", {3}, 2)},
                     {{"expr", std::string("mul(%0, %1); exp(#0)")},
                      {"shape", std::vector<int64_t>{2, 3}},
                      {"dtype", std::string("f64")}});
       }},
      {OpKind::MatmulEpilogue,
       [](InterpFixture &f) {
         return f.op(OpKind::MatmulEpilogue,
                     {f.randomInput("a", {2, 3}, 1),
                      f.randomInput("b", {3, 4}, 2),
                      f.randomInput("h", {2, 4}, 3)},
                     {{"epilogue", std::string("gelu_grad")}});
       }},
      {OpKind::Conv2d,
       [](InterpFixture &f) {
         return f.op(OpKind::Conv2d, {f.randomInput("x", {1, 2, 4, 4}, 1),
                                      f.randomInput("w", {3, 2, 2, 2}, 2)});
       }},
      {OpKind::Conv2dGradX,
       [](InterpFixture &f) {
         return f.op(OpKind::Conv2dGradX,
                     {f.randomInput("dy", {1, 3, 3, 3}, 1),
                      f.randomInput("w", {3, 2, 2, 2}, 2)},
                     {{"in_hw", Ints{4, 4}}});
       }},
      {OpKind::Conv2dGradW,
       [](InterpFixture &f) {
         return f.op(OpKind::Conv2dGradW,
                     {f.randomInput("dy", {1, 3, 3, 3}, 1),
                      f.randomInput("x", {1, 2, 4, 4}, 2)},
                     {{"kernel", Ints{2, 2}}});
       }},
      {OpKind::MaxPool2d, unary4(OpKind::MaxPool2d)},
      {OpKind::AvgPool2d, unary4(OpKind::AvgPool2d)},
      {OpKind::MaxPool2dGrad,
       [](InterpFixture &f) {
         return f.op(OpKind::MaxPool2dGrad,
                     {f.randomInput("dy", {1, 2, 2, 2}, 1),
                      f.randomInput("x", {1, 2, 4, 4}, 2)},
                     {{"kernel", Ints{2, 2}}, {"stride", Ints{2, 2}}});
       }},
      {OpKind::AvgPool2dGrad,
       [](InterpFixture &f) {
         return f.op(OpKind::AvgPool2dGrad, {f.randomInput("dy", {1, 2, 2, 2}, 1)},
                     {{"kernel", Ints{2, 2}},
                      {"stride", Ints{2, 2}},
                      {"in_hw", Ints{4, 4}}});
       }},
      // Communication ops in a logical module change placements, not values.
      {OpKind::AllReduce, unary(OpKind::AllReduce, {{"axis", std::string("dp")}})},
      {OpKind::AllReduceMax,
       unary(OpKind::AllReduceMax, {{"axis", std::string("tp")}})},
      {OpKind::ReduceScatter,
       unary(OpKind::ReduceScatter,
             {{"axis", std::string("dp")}, {"dim", int64_t(0)}})},
      {OpKind::AllGather,
       unary(OpKind::AllGather,
             {{"axis", std::string("dp")}, {"dim", int64_t(1)}})},
      {OpKind::AllToAll,
       unary(OpKind::AllToAll, {{"axis", std::string("tp")},
                                {"from", int64_t(0)},
                                {"to", int64_t(1)}})},
      {OpKind::LocalSplit,
       unary(OpKind::LocalSplit,
             {{"axis", std::string("tp")}, {"dim", int64_t(1)}})},
      {OpKind::Send, unary(OpKind::Send, {{"peer", int64_t(1)},
                                          {"value", std::string("pipe.0")}})},
      {OpKind::Recv,
       [](InterpFixture &f) {
         return f.op(OpKind::Recv, {},
                     {{"peer", int64_t(0)},
                      {"value", std::string("pipe.0")},
                      {"dtype", std::string("f64")},
                      {"shape", std::vector<int64_t>{2, 3}}});
       }},
  };
  for (const OpInfo &info : allOpInfos()) {
    INFO("op " << info.name.str());
    CHECK(hasEvaluator(info.kind));
    auto it = cases.find(info.kind);
    CHECK(it != cases.end());
    if (it == cases.end())
      continue;
    InterpFixture f;
    // What recv gives comes from another stage's program: an error here.
    if (info.kind == OpKind::Recv)
      CHECK(f.evalError(it->second(f)).find("from pipeline stage 0") !=
            std::string::npos);
    else
      f.eval(it->second(f));
  }
  CHECK(cases.size() == allOpInfos().size());
}

TEST_CASE("interp: roundToDType matches cast") {
  CHECK(roundToDType(1.00390625, DType::BF16) == 1.0);
  CHECK(roundToDType(1.01171875, DType::BF16) == 1.015625);
  CHECK(roundToDType(1.0 + 0x1p-11, DType::F16) == 1.0);
  CHECK(roundToDType(0.1, DType::F32) == static_cast<double>(0.1f));
  CHECK(roundToDType(0.1, DType::F64) == 0.1);
  CHECK(roundToDType(-2.7, DType::I32) == -2);
  CHECK(std::isnan(roundToDType(std::nan(""), DType::BF16)));
  CHECK(roundToDType(-kInf, DType::F16) == -kInf);
}
