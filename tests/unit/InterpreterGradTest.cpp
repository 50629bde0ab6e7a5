// The internal backward ops against hand-computed values: the cases finite
// differences cannot see (ties, kinks, masks) and their run-time errors.
#include "InterpreterTestSupport.h"

#include <limits>

using namespace mgc::ir;
using namespace mgc::ir::testing;

TEST_CASE("interp grad: max_grad shares dy evenly among tied maxima") {
  InterpFixture f;
  Attrs a{{"axes", std::vector<int64_t>{1}}, {"keepdims", false}};
  Value *x = f.input("x", f64({2, 3}), {1, 3, 3, 5, 2, 4});
  Value *y = f.op(OpKind::Max, {x}, a);
  Value *dy = f.input("dy", f64({2}), {6, 10});
  HostTensor g = f.eval(f.op(OpKind::MaxGrad, {dy, x, y}, a));
  checkExact(g.data, {0, 3, 3, 10, 0, 0});
}

TEST_CASE("interp grad: relu_grad is 0 at 0; causal_mask_grad zeros the "
          "upper triangle") {
  InterpFixture f;
  Value *dy = f.input("dy", f64({4}), {1, 2, 3, 4});
  Value *x = f.input("x", f64({4}), {-1, 0, 0.5, 2});
  checkExact(f.eval(f.op(OpKind::ReluGrad, {dy, x})).data, {0, 0, 3, 4});

  InterpFixture m;
  Value *s = m.input("s", f64({2, 2}), {1, 2, 3, 4});
  checkExact(m.eval(m.op(OpKind::CausalMaskGrad, {s})).data, {1, 0, 3, 4});
}

TEST_CASE("interp grad: embedding_grad adds repeated ids; cross_entropy_grad") {
  InterpFixture f;
  Value *dy = f.input("dy", f64({3, 2}), {1, 2, 10, 20, 100, 200});
  Value *ids = f.input("ids", i32({3}), {2, 0, 2});
  HostTensor t =
      f.eval(f.op(OpKind::EmbeddingGrad, {dy, ids}, {{"rows", int64_t(3)}}));
  CHECK(t.type == f64({3, 2}));
  checkExact(t.data, {10, 20, 0, 0, 101, 202});

  // Equal logits: softmax is 1/2 each; two positions, dy = 4.
  InterpFixture c;
  Value *d = c.input("d", f64({}), {4});
  Value *logits = c.input("l", f64({2, 2}), {0, 0, 7, 7});
  Value *targets = c.input("t", i32({2}), {1, 0});
  HostTensor g = c.eval(c.op(OpKind::CrossEntropyGrad, {d, logits, targets}));
  checkClose(g.data, {1, -1, -1, 1});
}

TEST_CASE("interp grad: out-of-range ids and targets are errors") {
  InterpFixture f;
  Value *dy = f.input("dy", f64({1, 2}), {1, 2});
  Value *ids = f.input("ids", i32({1}), {3});
  std::string e = f.evalError(
      f.op(OpKind::EmbeddingGrad, {dy, ids}, {{"rows", int64_t(3)}}));
  CHECK(contains(e, "embedding_grad id 3 is out of range [0, 3) in element 0 "
                    "of input 'ids'"));

  InterpFixture c;
  Value *d = c.input("d", f64({}), {1});
  Value *logits = c.input("l", f64({1, 2}), {0, 0});
  Value *targets = c.input("t", i32({1}), {-1});
  std::string ce =
      c.evalError(c.op(OpKind::CrossEntropyGrad, {d, logits, targets}));
  CHECK(contains(ce, "cross_entropy_grad target -1 is out of range [0, 2)"));
}

TEST_CASE("interp grad: shape rules of the backward ops") {
  TensorType x(DType::F32, {2, 3}), v(DType::F32, {3});
  auto bad = inferResultType(OpKind::ReluGrad, {x, v}, {});
  REQUIRE(!bad.ok());
  CHECK(bad.message() == "relu_grad needs dy and the forward value of one "
                         "type, got f32[2, 3] and f32[3]");
  auto rows =
      inferResultType(OpKind::EmbeddingGrad, {x, TensorType(DType::I32, {2})},
                      {{"rows", int64_t(0)}});
  REQUIRE(!rows.ok());
  CHECK(rows.message() == "embedding_grad rows must be positive, got 0");
  auto mg =
      inferResultType(OpKind::MaxGrad, {v, x, TensorType(DType::F32, {2})},
                      {{"axes", std::vector<int64_t>{1}}, {"keepdims", false}});
  REQUIRE(!mg.ok());
  CHECK(mg.message() == "max_grad of f32[2, 3] needs dy and y of type "
                        "f32[2], got f32[3] and f32[2]");
  auto ce = inferResultType(OpKind::CrossEntropyGrad,
                            {v, x, TensorType(DType::I32, {2})}, {});
  REQUIRE(!ce.ok());
  CHECK(ce.message() ==
        "cross_entropy_grad needs a scalar dy of type f32[], got f32[3]");
  auto cm = inferResultType(OpKind::CausalMaskGrad, {x}, {});
  REQUIRE(!cm.ok());
  CHECK(cm.message() == "causal_mask_grad needs square [..., T, T], got "
                        "f32[2, 3]");
  auto ln = inferResultType(OpKind::LayernormGradX, {x, x, x}, {{"eps", 1e-5}});
  REQUIRE(!ln.ok());
  CHECK(ln.message() == "layernorm_grad_x of f32[2, 3] needs gamma of type "
                        "f32[3], got f32[2, 3]");
}
