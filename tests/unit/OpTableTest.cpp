// The op table is data: check that every row is well formed.
#include "ir/OpInfo.h"

#include <doctest/doctest.h>

#include <set>

using namespace mgc::ir;

TEST_CASE("every op has a unique name and a consistent table row") {
  std::set<std::string> names;
  for (const OpInfo &info : allOpInfos()) {
    CHECK(names.insert(info.name.str()).second);
    CHECK(lookupOpKind(info.name) == info.kind);
    CHECK(&opInfo(info.kind) == &info);
    CHECK(bool(info.shapeRule));
    CHECK(!info.summary.empty());
    std::set<std::string> attrNames;
    for (const AttrSpec &a : info.attrs) {
      CHECK(attrNames.insert(a.name).second);
      if (a.defaultValue)
        CHECK(attrTypeOf(*a.defaultValue) == a.type);
    }
  }
  CHECK(!lookupOpKind("no_such_op"));
}

TEST_CASE("defaults are filled and attributes are checked") {
  Attrs attrs{{"axes", std::vector<int64_t>{1}}};
  fillDefaultAttrs(OpKind::Sum, attrs);
  CHECK(attrs.getBool("keepdims") == false);
  TensorType x(DType::F32, {2, 3, 4});
  auto r = inferResultType(OpKind::Sum, {x}, attrs);
  REQUIRE(r.ok());
  CHECK(r.type() == TensorType(DType::F32, {2, 4}));

  Attrs wrongType{{"axes", int64_t(1)}, {"keepdims", false}};
  auto bad = inferResultType(OpKind::Sum, {x}, wrongType);
  REQUIRE(!bad.ok());
  CHECK(bad.message().find("must be int list") != std::string::npos);

  auto arity = inferResultType(OpKind::Add, {x}, {});
  REQUIRE(!arity.ok());
  CHECK(arity.message() == "add takes 2 operands, got 1");
}

TEST_CASE("matmul shape rule") {
  TensorType a(DType::F32, {8, 16, 32}), w(DType::F32, {32, 64});
  auto r = inferResultType(OpKind::Matmul, {a, w}, {});
  REQUIRE(r.ok());
  CHECK(r.type() == TensorType(DType::F32, {8, 16, 64}));
  auto bad = inferResultType(OpKind::Matmul,
                             {a, TensorType(DType::F32, {31, 64})}, {});
  REQUIRE(!bad.ok());
  CHECK(bad.message() == "matmul contracting dimensions differ (32 vs 31): "
                         "f32[8, 16, 32] @ f32[31, 64]");
}

TEST_CASE("broadcastShapes follows NumPy") {
  CHECK(*broadcastShapes({4, 1, 3}, {5, 1}) == Shape{4, 5, 3});
  CHECK(*broadcastShapes({}, {2, 2}) == Shape{2, 2});
  CHECK(!broadcastShapes({2, 3}, {4, 3}));
}
