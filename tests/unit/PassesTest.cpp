// The canonicalize, cse and dce passes: build graphs with ir::Builder, run a
// pass, check the structure of what is left. Every rule has a case where it
// fires and, where it matters, one where it must not.
#include "ir/Builder.h"
#include "ir/Interpreter.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/PassManager.h"

#include "llvm/Support/raw_ostream.h"

#include <doctest/doctest.h>

#include <cmath>
#include <string>

using namespace mgc;
using namespace mgc::ir;

namespace {

struct PassFixture {
  Module module{"m"};
  Builder b{module.graph()};
  std::string diagText;
  llvm::raw_string_ostream diagStream{diagText};
  DiagnosticEngine diag{diagStream};

  Graph &g() { return module.graph(); }
  Value *input(const std::string &name, TensorType type) {
    return g().addInput(name, std::move(type));
  }
  Value *op(OpKind kind, llvm::ArrayRef<Value *> operands, Attrs attrs = {}) {
    ValueOrError r = b.create(kind, operands, std::move(attrs));
    INFO("creating " << opName(kind).str() << ": " << r.error);
    REQUIRE(r.ok());
    return r.value;
  }
  Value *constant(double v, DType dtype = DType::F32) {
    Value *c = b.constant(v, dtype);
    REQUIRE(c);
    return c;
  }
  Value *splat(double v, llvm::ArrayRef<int64_t> shape,
               DType dtype = DType::F32) {
    return op(
        OpKind::Broadcast, {constant(v, dtype)},
        Attrs{{"shape", std::vector<int64_t>(shape.begin(), shape.end())}});
  }
  void output(const std::string &name, Value *v) { g().addOutput(name, v); }

  // Runs the named registered pass; the module must stay valid.
  void run(llvm::StringRef passName) {
    std::unique_ptr<passes::Pass> pass;
    for (const passes::PassInfo &info : passes::registeredPasses())
      if (info.name == passName)
        pass = info.create();
    REQUIRE(pass);
    REQUIRE(succeeded(verify(module, diag)));
    CHECK(succeeded(pass->run(module, diag)));
    INFO(diagText);
    INFO(printModuleToString(module));
    REQUIRE(succeeded(verify(module, diag)));
  }

  Value *out(unsigned i = 0) { return g().outputs()[i].value; }
  size_t count(OpKind kind) const {
    size_t n = 0;
    for (const auto &op : module.graph().ops())
      n += op->kind() == kind;
    return n;
  }
  std::string text() { return printModuleToString(module); }
};

Op *def(Value *v) { return v->definingOp(); }

double constantOf(Value *v) {
  REQUIRE(def(v));
  REQUIRE(def(v)->kind() == OpKind::Constant);
  return def(v)->attrs().getFloat("value");
}

const TensorType f32x23(DType::F32, {2, 3});

} // namespace

TEST_CASE("canonicalize: transpose of transpose composes the permutations") {
  PassFixture f;
  Value *x = f.input("x", TensorType(DType::F32, {2, 3, 4}));
  Value *t1 = f.op(OpKind::Transpose, {x},
                   Attrs{{"perm", std::vector<int64_t>{1, 2, 0}}});
  // [3, 4, 2] -> [4, 3, 2]; composed: x.perm[2, 1, 0].
  Value *t2 = f.op(OpKind::Transpose, {t1},
                   Attrs{{"perm", std::vector<int64_t>{1, 0, 2}}});
  f.output("y", t2);
  f.run("canonicalize");
  CHECK(f.g().numOps() == 1);
  Op *t = def(f.out());
  REQUIRE(t);
  CHECK(t->kind() == OpKind::Transpose);
  CHECK(t->operand(0) == x);
  CHECK(t->attrs().getInts("perm") == std::vector<int64_t>{2, 1, 0});
  CHECK(t->type() == TensorType(DType::F32, {4, 3, 2}));
}

TEST_CASE(
    "canonicalize: transposes that cancel, and identity transposes, vanish") {
  PassFixture f;
  Value *x = f.input("x", TensorType(DType::F32, {2, 3, 4}));
  Value *t1 = f.op(OpKind::Transpose, {x},
                   Attrs{{"perm", std::vector<int64_t>{1, 2, 0}}});
  // Negative axes count from the end: [-1, 0, 1] is [2, 0, 1], the inverse.
  Value *t2 = f.op(OpKind::Transpose, {t1},
                   Attrs{{"perm", std::vector<int64_t>{-1, 0, 1}}});
  Value *id = f.op(OpKind::Transpose, {x},
                   Attrs{{"perm", std::vector<int64_t>{0, 1, 2}}});
  f.output("y", t2);
  f.output("z", id);
  f.run("canonicalize");
  CHECK(f.g().numOps() == 0);
  CHECK(f.out(0) == x);
  CHECK(f.out(1) == x);
}

TEST_CASE("canonicalize: a transpose that is still used elsewhere stays") {
  PassFixture f;
  Value *x = f.input("x", f32x23);
  Value *t1 =
      f.op(OpKind::Transpose, {x}, Attrs{{"perm", std::vector<int64_t>{1, 0}}});
  Value *t2 = f.op(OpKind::Transpose, {t1},
                   Attrs{{"perm", std::vector<int64_t>{1, 0}}});
  f.output("y", t2);
  f.output("t", t1);
  f.run("canonicalize");
  CHECK(f.out(0) == x);
  CHECK(f.out(1) == t1);
  CHECK(f.count(OpKind::Transpose) == 1);
}

TEST_CASE("canonicalize: reshape rules") {
  PassFixture f;
  Value *x = f.input("x", TensorType(DType::F32, {2, 3, 4}));
  auto reshape = [&](Value *v, std::vector<int64_t> shape) {
    return f.op(OpKind::Reshape, {v}, Attrs{{"shape", shape}});
  };
  Value *chain = reshape(reshape(x, {6, 4}), {4, 6});
  Value *same = reshape(x, {2, 3, 4});
  Value *back = reshape(reshape(x, {24}), {2, 3, 4});
  f.output("chain", chain);
  f.output("same", same);
  f.output("back", back);
  f.run("canonicalize");
  CHECK(f.g().numOps() == 1);
  Op *r = def(f.out(0));
  REQUIRE(r);
  CHECK(r->kind() == OpKind::Reshape);
  CHECK(r->operand(0) == x);
  CHECK(r->attrs().getInts("shape") == std::vector<int64_t>{4, 6});
  CHECK(f.out(1) == x);
  CHECK(f.out(2) == x);
}

TEST_CASE("canonicalize: broadcast rules") {
  PassFixture f;
  Value *x = f.input("x", TensorType(DType::F32, {3}));
  auto broadcast = [&](Value *v, std::vector<int64_t> shape) {
    return f.op(OpKind::Broadcast, {v}, Attrs{{"shape", shape}});
  };
  Value *chain = broadcast(broadcast(x, {2, 3}), {4, 2, 3});
  Value *same = broadcast(x, {3});
  f.output("chain", chain);
  f.output("same", same);
  f.run("canonicalize");
  CHECK(f.g().numOps() == 1);
  Op *bc = def(f.out(0));
  REQUIRE(bc);
  CHECK(bc->kind() == OpKind::Broadcast);
  CHECK(bc->operand(0) == x);
  CHECK(bc->attrs().getInts("shape") == std::vector<int64_t>{4, 2, 3});
  CHECK(f.out(1) == x);
}

TEST_CASE("canonicalize: neg of neg") {
  PassFixture f;
  Value *x = f.input("x", f32x23);
  Value *n1 = f.op(OpKind::Neg, {x});
  Value *n2 = f.op(OpKind::Neg, {n1});
  Value *n3 = f.op(OpKind::Neg, {n2});
  f.output("even", n2);
  f.output("odd", n3);
  f.run("canonicalize");
  CHECK(f.out(0) == x);
  REQUIRE(def(f.out(1)));
  CHECK(def(f.out(1))->kind() == OpKind::Neg);
  CHECK(def(f.out(1))->operand(0) == x);
  CHECK(f.g().numOps() == 1);
}

TEST_CASE("canonicalize: dropout with p = 0 is the identity") {
  PassFixture f;
  Value *x = f.input("x", f32x23);
  f.output("p0",
           f.op(OpKind::Dropout, {x}, Attrs{{"p", 0.0}, {"seed", int64_t(3)}}));
  f.output("p1",
           f.op(OpKind::Dropout, {x}, Attrs{{"p", 0.1}, {"seed", int64_t(3)}}));
  f.run("canonicalize");
  CHECK(f.out(0) == x);
  REQUIRE(def(f.out(1)));
  CHECK(def(f.out(1))->kind() == OpKind::Dropout);
  CHECK(f.g().numOps() == 1);
}

TEST_CASE("canonicalize: additive and multiplicative identities") {
  PassFixture f;
  Value *x = f.input("x", f32x23);
  f.output("x_plus_0", f.op(OpKind::Add, {x, f.splat(0, {2, 3})}));
  f.output("0_plus_x", f.op(OpKind::Add, {f.splat(0, {2, 3}), x}));
  f.output("x_minus_0", f.op(OpKind::Sub, {x, f.splat(0, {2, 3})}));
  f.output("x_times_1", f.op(OpKind::Mul, {x, f.splat(1, {2, 3})}));
  f.output("1_times_x", f.op(OpKind::Mul, {f.splat(1, {2, 3}), x}));
  f.output("x_div_1", f.op(OpKind::Div, {x, f.splat(1, {2, 3})}));
  // Through a chain of broadcasts too.
  Value *c = f.op(OpKind::Broadcast, {f.constant(0)},
                  Attrs{{"shape", std::vector<int64_t>{3}}});
  c = f.op(OpKind::Broadcast, {c},
           Attrs{{"shape", std::vector<int64_t>{2, 3}}});
  f.output("x_plus_bb0", f.op(OpKind::Add, {x, c}));
  // Scalars: the constant is used directly.
  Value *s = f.input("s", TensorType(DType::F32, {}));
  f.output("s_plus_0", f.op(OpKind::Add, {s, f.constant(0)}));
  f.run("canonicalize");
  for (unsigned i = 0; i < 7; ++i)
    CHECK(f.out(i) == x);
  CHECK(f.out(7) == s);
  CHECK(f.g().numOps() == 0);
}

TEST_CASE("canonicalize: identities that must not fire") {
  PassFixture f;
  Value *x = f.input("x", f32x23);
  // x * 0 is NaN for x = NaN or inf: not 0.
  f.output("x_times_0", f.op(OpKind::Mul, {x, f.splat(0, {2, 3})}));
  f.output("0_minus_x", f.op(OpKind::Sub, {f.splat(0, {2, 3}), x}));
  f.output("1_div_x", f.op(OpKind::Div, {f.splat(1, {2, 3}), x}));
  f.output("x_plus_1", f.op(OpKind::Add, {x, f.splat(1, {2, 3})}));
  f.output("x_times_2", f.op(OpKind::Mul, {x, f.splat(2, {2, 3})}));
  f.output("x_plus_x", f.op(OpKind::Add, {x, x}));
  std::string before = f.text();
  f.run("canonicalize");
  CHECK(f.text() == before);
  for (unsigned i = 0; i < 6; ++i)
    CHECK(f.out(i) != x);
}

TEST_CASE("canonicalize: constant folding of scalar ops") {
  struct Case {
    OpKind kind;
    std::vector<double> args;
    double expected;
  };
  const Case cases[] = {
      {OpKind::Add, {2, 3}, 5},
      {OpKind::Sub, {2, 3}, -1},
      {OpKind::Mul, {2, 3}, 6},
      {OpKind::Div, {3, 2}, 1.5},
      {OpKind::Neg, {2}, -2},
      {OpKind::Exp, {1}, std::exp(1.0)},
      {OpKind::Log, {2}, std::log(2.0)},
      {OpKind::Sqrt, {2}, std::sqrt(2.0)},
      {OpKind::Rsqrt, {4}, 0.5},
      {OpKind::Tanh, {0.5}, std::tanh(0.5)},
      {OpKind::Relu, {-3}, 0},
      {OpKind::Relu, {3}, 3},
      {OpKind::Sigmoid, {0}, 0.5},
  };
  for (const Case &c : cases) {
    CAPTURE(opName(c.kind).str());
    PassFixture f;
    llvm::SmallVector<Value *, 2> operands;
    for (double a : c.args)
      operands.push_back(f.constant(a, DType::F64));
    f.output("y", f.op(c.kind, operands));
    f.run("canonicalize");
    REQUIRE(f.g().numOps() == 1);
    CHECK(constantOf(f.out()) == c.expected);
    CHECK(f.out()->type() == TensorType(DType::F64, {}));
  }
}

TEST_CASE("canonicalize: folding agrees with the reference interpreter") {
  PassFixture f;
  Value *a = f.constant(0.3, DType::F32);
  Value *c = f.constant(1.7, DType::F32);
  Value *e = f.op(OpKind::Exp, {f.op(OpKind::Mul, {a, c})});
  Value *y =
      f.op(OpKind::Sigmoid, {f.op(OpKind::Sub, {e, f.op(OpKind::Tanh, {c})})});
  f.output("y", y);
  auto before = interpret(f.module, {}, f.diag);
  REQUIRE(before);
  f.run("canonicalize");
  CHECK(f.g().numOps() == 1);
  auto after = interpret(f.module, {}, f.diag);
  REQUIRE(after);
  CHECK(after->at("y").data == before->at("y").data);
}

TEST_CASE("canonicalize: casts fold to the target type") {
  PassFixture f;
  f.output("f32", f.op(OpKind::Cast, {f.constant(0.1, DType::F64)},
                       Attrs{{"dtype", std::string("f32")}}));
  f.output("bf16", f.op(OpKind::Cast, {f.constant(1.0 / 3.0, DType::F64)},
                        Attrs{{"dtype", std::string("bf16")}}));
  f.output("f16", f.op(OpKind::Cast, {f.constant(1e-6, DType::F64)},
                       Attrs{{"dtype", std::string("f16")}}));
  f.output("i32", f.op(OpKind::Cast, {f.constant(-7, DType::F32)},
                       Attrs{{"dtype", std::string("i32")}}));
  f.output("f64", f.op(OpKind::Cast, {f.constant(3, DType::I64)},
                       Attrs{{"dtype", std::string("f64")}}));
  f.run("canonicalize");
  CHECK(f.g().numOps() == 5);
  CHECK(constantOf(f.out(0)) == static_cast<double>(0.1f));
  CHECK(f.out(0)->type().dtype == DType::F32);
  // bf16 keeps 8 significant bits: 1/3 = 0.0101010101... -> 0.333984375.
  CHECK(constantOf(f.out(1)) == 0.333984375);
  // 1e-6 is subnormal in f16 (quantum 2^-24): 17 * 2^-24.
  CHECK(constantOf(f.out(2)) == std::ldexp(17.0, -24));
  CHECK(constantOf(f.out(3)) == -7);
  CHECK(f.out(3)->type().dtype == DType::I32);
  CHECK(constantOf(f.out(4)) == 3);
}

TEST_CASE("canonicalize: folds that would change behaviour are left alone") {
  PassFixture f;
  // Not finite: division by zero, log of a negative number, f16 overflow.
  f.output("div0", f.op(OpKind::Div, {f.constant(1), f.constant(0)}));
  f.output("log", f.op(OpKind::Log, {f.constant(-1)}));
  f.output("f16", f.op(OpKind::Cast, {f.constant(1e6)},
                       Attrs{{"dtype", std::string("f16")}}));
  // Integers: division by zero, overflow, a cast out of range.
  f.output("idiv0", f.op(OpKind::Div, {f.constant(7, DType::I32),
                                       f.constant(0, DType::I32)}));
  f.output("iover", f.op(OpKind::Mul, {f.constant(65536, DType::I32),
                                       f.constant(65536, DType::I32)}));
  f.output("range", f.op(OpKind::Cast, {f.constant(3e9)},
                         Attrs{{"dtype", std::string("i32")}}));
  // Not in the folding table, or not all operands constant.
  f.output("gelu", f.op(OpKind::Gelu, {f.constant(1)}));
  Value *s = f.input("s", TensorType(DType::F32, {}));
  f.output("half", f.op(OpKind::Add, {s, f.constant(2)}));
  std::string before = f.text();
  f.run("canonicalize");
  CHECK(f.text() == before);
}

TEST_CASE("canonicalize: integer folding truncates like the interpreter") {
  PassFixture f;
  auto i32 = [&](double v) { return f.constant(v, DType::I32); };
  auto toI32 = Attrs{{"dtype", std::string("i32")}};
  f.output("div", f.op(OpKind::Div, {i32(-8), i32(2)}));
  f.output("neg", f.op(OpKind::Neg, {f.constant(0, DType::I64)}));
  f.output("trunc", f.op(OpKind::Div, {i32(7), i32(2)}));
  f.output("ntrunc", f.op(OpKind::Div, {i32(-7), i32(2)}));
  f.output("cast", f.op(OpKind::Cast, {f.constant(2.5)}, toI32));
  f.output("ncast", f.op(OpKind::Cast, {f.constant(-2.5)}, toI32));
  f.output("big", f.op(OpKind::Mul, {i32(46340), i32(46340)}));
  auto before = interpret(f.module, {}, f.diag);
  REQUIRE(before);
  f.run("canonicalize");
  CHECK(f.count(OpKind::Div) == 0);
  CHECK(f.count(OpKind::Cast) == 0);
  CHECK(f.count(OpKind::Mul) == 0);
  const double expected[] = {-4, 0, 3, -3, 2, -2, 2147395600};
  for (unsigned i = 0; i < 7; ++i) {
    CAPTURE(i);
    CHECK(constantOf(f.out(i)) == expected[i]);
    CHECK(!std::signbit(constantOf(f.out(i))) == (expected[i] >= 0));
    CHECK(before->at(f.g().outputs()[i].name).data[0] == expected[i]);
  }
}

TEST_CASE("canonicalize: new ops keep the location and scope of the op they "
          "replace") {
  PassFixture f;
  Value *x = f.input("x", f32x23);
  Loc inner = Loc::make("model.mg", 3, 7), outer = Loc::make("model.mg", 4, 9);
  f.b.setLoc(inner);
  Value *t1 =
      f.op(OpKind::Transpose, {x}, Attrs{{"perm", std::vector<int64_t>{1, 0}}});
  Value *r1 =
      f.op(OpKind::Reshape, {x}, Attrs{{"shape", std::vector<int64_t>{6}}});
  Value *one = f.constant(1), *two = f.constant(2);
  f.b.setLoc(outer);
  f.b.setScope("blocks.1");
  Value *t2 =
      f.op(OpKind::Reshape, {r1}, Attrs{{"shape", std::vector<int64_t>{3, 2}}});
  Value *folded = f.op(OpKind::Add, {one, two});
  f.output("t", t2);
  f.output("c", folded);
  f.output("keep", t1);
  f.run("canonicalize");
  Op *r = def(f.out(0));
  REQUIRE(r);
  CHECK(r->operand(0) == x);
  CHECK(r->loc() == outer);
  CHECK(r->scope() == "blocks.1");
  Op *c = def(f.out(1));
  REQUIRE(c);
  CHECK(c->kind() == OpKind::Constant);
  CHECK(c->loc() == outer);
  CHECK(c->scope() == "blocks.1");
}

TEST_CASE("canonicalize: rules feed each other up to a fixpoint") {
  PassFixture f;
  Value *x = f.input("x", f32x23);
  // sub(3, 3) folds to 0, so x + broadcast(0) is x; then ((x * 1) / 1) - 0
  // and a chain of six negations also reduce to x.
  Value *zero = f.op(OpKind::Sub, {f.constant(3), f.constant(3)});
  Value *v = f.op(OpKind::Add,
                  {x, f.op(OpKind::Broadcast, {zero},
                           Attrs{{"shape", std::vector<int64_t>{2, 3}}})});
  Value *one = f.op(OpKind::Div, {f.constant(2), f.constant(2)});
  Value *ones = f.op(OpKind::Broadcast, {one},
                     Attrs{{"shape", std::vector<int64_t>{2, 3}}});
  v = f.op(OpKind::Mul, {v, ones});
  v = f.op(OpKind::Div, {v, ones});
  v = f.op(OpKind::Sub, {v, f.splat(0, {2, 3})});
  for (int i = 0; i < 6; ++i)
    v = f.op(OpKind::Neg, {v});
  Value *t =
      f.op(OpKind::Transpose, {v}, Attrs{{"perm", std::vector<int64_t>{1, 0}}});
  t = f.op(OpKind::Transpose, {t}, Attrs{{"perm", std::vector<int64_t>{1, 0}}});
  f.output("y", t);
  f.run("canonicalize");
  CHECK(f.out() == x);
  CHECK(f.g().numOps() == 0);
  // Running again changes nothing.
  Value *n = f.op(OpKind::Neg, {x});
  f.output("n", n);
  f.run("canonicalize");
  std::string once = f.text();
  f.run("canonicalize");
  CHECK(f.text() == once);
}

TEST_CASE("canonicalize leaves ops that were dead before it to dce") {
  PassFixture f;
  Value *x = f.input("x", f32x23);
  f.op(OpKind::Exp, {x}); // dead from the start
  Value *n = f.op(OpKind::Neg, {f.op(OpKind::Neg, {x})});
  f.output("y", n);
  f.run("canonicalize");
  CHECK(f.out() == x);
  CHECK(f.g().numOps() == 1);
  CHECK(f.count(OpKind::Exp) == 1);
  f.run("dce");
  CHECK(f.g().numOps() == 0);
}

TEST_CASE("cse merges identical ops and their users") {
  PassFixture f;
  Value *x = f.input("x", f32x23), *y = f.input("y", f32x23);
  Value *a1 = f.op(OpKind::Add, {x, y});
  Value *a2 = f.op(OpKind::Add, {x, y});
  Value *e1 = f.op(OpKind::Exp, {a1});
  Value *e2 = f.op(OpKind::Exp, {a2}); // equal once a2 is a1
  f.output("e1", e1);
  f.output("e2", e2);
  f.output("a2", a2);
  f.run("cse");
  CHECK(f.g().numOps() == 2);
  CHECK(f.out(0) == e1);
  CHECK(f.out(1) == e1);
  CHECK(f.out(2) == a1);
}

TEST_CASE("cse: commutative ops match in either operand order") {
  PassFixture f;
  Value *x = f.input("x", f32x23), *y = f.input("y", f32x23);
  f.output("xy", f.op(OpKind::Mul, {x, y}));
  f.output("yx", f.op(OpKind::Mul, {y, x}));
  f.output("sxy", f.op(OpKind::Sub, {x, y}));
  f.output("syx", f.op(OpKind::Sub, {y, x}));
  f.run("cse");
  CHECK(f.out(0) == f.out(1));
  CHECK(f.out(2) != f.out(3));
  CHECK(f.count(OpKind::Mul) == 1);
  CHECK(f.count(OpKind::Sub) == 2);
}

TEST_CASE("cse: different attributes, types or operands are kept apart") {
  PassFixture f;
  Value *x = f.input("x", TensorType(DType::F32, {2, 3, 4}));
  f.output("p1", f.op(OpKind::Transpose, {x},
                      Attrs{{"perm", std::vector<int64_t>{1, 0, 2}}}));
  f.output("p2", f.op(OpKind::Transpose, {x},
                      Attrs{{"perm", std::vector<int64_t>{2, 0, 1}}}));
  f.output("s0",
           f.op(OpKind::Sum, {x}, Attrs{{"axes", std::vector<int64_t>{0}}}));
  f.output("s0k",
           f.op(OpKind::Sum, {x},
                Attrs{{"axes", std::vector<int64_t>{0}}, {"keepdims", true}}));
  f.output("c32", f.constant(1, DType::F32));
  f.output("c64", f.constant(1, DType::F64));
  f.output("zero", f.constant(0.0));
  f.output("negzero", f.constant(-0.0));
  f.output("exp", f.op(OpKind::Exp, {x}));
  f.output("log", f.op(OpKind::Log, {x}));
  size_t before = f.g().numOps();
  f.run("cse");
  CHECK(f.g().numOps() == before);
}

TEST_CASE("cse: equal constants merge") {
  PassFixture f;
  Value *x = f.input("x", f32x23);
  f.output("a", f.op(OpKind::Add, {x, f.splat(0.5, {2, 3})}));
  f.output("b", f.op(OpKind::Add, {x, f.splat(0.5, {2, 3})}));
  f.run("cse");
  CHECK(f.count(OpKind::Constant) == 1);
  CHECK(f.count(OpKind::Broadcast) == 1);
  CHECK(f.count(OpKind::Add) == 1);
  CHECK(f.out(0) == f.out(1));
}

TEST_CASE("cse: dropout merges only with an equal seed") {
  PassFixture f;
  Value *x = f.input("x", f32x23);
  auto dropout = [&](int64_t seed) {
    return f.op(OpKind::Dropout, {x}, Attrs{{"p", 0.1}, {"seed", seed}});
  };
  f.output("a", dropout(1));
  f.output("b", dropout(2));
  f.output("c", dropout(1));
  f.run("cse");
  CHECK(f.count(OpKind::Dropout) == 2);
  CHECK(f.out(0) == f.out(2));
  CHECK(f.out(0) != f.out(1));
}

TEST_CASE("dce removes what no output needs and keeps arguments") {
  PassFixture f;
  Value *x = f.input("x", f32x23);
  Value *w = f.g().addParam("w", f32x23, Init{InitKind::Ones});
  Value *unusedIn = f.input("unused", f32x23);
  (void)unusedIn;
  Value *live = f.op(OpKind::Add, {x, w});
  Value *deadRoot = f.op(OpKind::Mul, {live, x});
  Value *deadLeaf = f.op(OpKind::Exp, {deadRoot});
  (void)deadLeaf;
  Value *onlyDead = f.op(OpKind::Neg, {w}); // used only by a dead op
  f.op(OpKind::Sub, {onlyDead, x});
  Value *y = f.op(OpKind::Tanh, {live});
  f.output("y", y);
  f.run("dce");
  CHECK(f.g().numOps() == 2);
  CHECK(f.count(OpKind::Add) == 1);
  CHECK(f.count(OpKind::Tanh) == 1);
  CHECK(f.g().arguments().size() == 3);
  CHECK(f.out() == y);
  CHECK(def(y)->operand(0) == live);
}

TEST_CASE("dce of a module without outputs leaves only the arguments") {
  PassFixture f;
  Value *x = f.input("x", f32x23);
  f.op(OpKind::Exp, {x});
  f.run("dce");
  CHECK(f.g().numOps() == 0);
  CHECK(f.g().arguments().size() == 1);
}

TEST_CASE("the passes preserve what the interpreter computes") {
  PassFixture f;
  TensorType t(DType::F64, {2, 3});
  Value *x = f.input("x", t);
  Value *w = f.input("w", TensorType(DType::F64, {3, 2}));
  Value *xt =
      f.op(OpKind::Transpose, {x}, Attrs{{"perm", std::vector<int64_t>{1, 0}}});
  Value *xtt = f.op(OpKind::Transpose, {xt},
                    Attrs{{"perm", std::vector<int64_t>{1, 0}}});
  Value *m1 = f.op(OpKind::Matmul, {xtt, w});
  Value *m2 = f.op(OpKind::Matmul, {x, w});
  Value *half =
      f.op(OpKind::Div, {f.constant(1, DType::F64), f.constant(2, DType::F64)});
  Value *h = f.op(OpKind::Broadcast, {half},
                  Attrs{{"shape", std::vector<int64_t>{2, 2}}});
  Value *s = f.op(OpKind::Add,
                  {f.op(OpKind::Mul, {m1, h}), f.op(OpKind::Mul, {h, m2})});
  Value *z = f.op(OpKind::Add, {s, f.splat(0, {2, 2}, DType::F64)});
  f.op(OpKind::Exp, {z}); // dead
  f.output("y", f.op(OpKind::Tanh, {z}));
  f.output("loss", f.op(OpKind::Mean, {z},
                        Attrs{{"axes", std::vector<int64_t>{0, 1}}}));
  TensorMap args;
  args["x"] = HostTensor(t, {0.5, -1, 2, 0.25, 3, -0.75});
  args["w"] =
      HostTensor(TensorType(DType::F64, {3, 2}), {1, 2, -1, 0.5, 0.125, 4});
  auto before = interpret(f.module, args, f.diag);
  REQUIRE(before);
  for (const char *pass : {"canonicalize", "cse", "dce"})
    f.run(pass);
  // transpose pair, zero add, the folded 1/2, one matmul and one multiply
  // gone; the dead exp gone.
  CHECK(f.count(OpKind::Transpose) == 0);
  CHECK(f.count(OpKind::Matmul) == 1);
  CHECK(f.count(OpKind::Mul) == 1);
  CHECK(f.count(OpKind::Exp) == 0);
  CHECK(f.count(OpKind::Div) == 0);
  auto after = interpret(f.module, args, f.diag);
  REQUIRE(after);
  CHECK(after->at("y").data == before->at("y").data);
  CHECK(after->at("loss").data == before->at("loss").data);
}
