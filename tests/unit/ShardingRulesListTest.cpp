// The signatures each sharding rule lists, as text: which splits, which
// partial sums, and which not (ShardingRulesTest.cpp checks that every
// listed signature computes the logical op).
#include "ShardingTestSupport.h"

using namespace mgc;
using namespace mgc::ir;
using namespace mgc::shardtest;

TEST_CASE("sharding rules: every op kind has a rule; collectives list none") {
  for (const OpInfo &info : allOpInfos()) {
    INFO(info.name.str());
    bool hasRule = passes::shardingRule(info.kind) != nullptr;
    CHECK(hasRule);
  }
  OneOp reduce(OpKind::AllReduce, {f32({4, 6})}, {{"axis", std::string("tp")}});
  CHECK(reduce.sigs(kTwo) == Strings{"(R) -> R"});
  OneOp constant(OpKind::Constant, {},
                 {{"value", 1.0}, {"dtype", std::string("f32")}});
  CHECK(constant.sigs(kTwo) == Strings{"() -> R"});
}

TEST_CASE("sharding rules: matmul lists rows, columns, contraction, partials") {
  OneOp mm(OpKind::Matmul, {f32({8, 6}), f32({6, 4})});
  CHECK(mm.sigs(kTwo) == Strings{"(S0, R) -> S0", "(R, S1) -> S1",
                                 "(S1, S0) -> P", "(P, R) -> P", "(R, P) -> P",
                                 "(R, R) -> R"});
  // N = 2 cannot split in three.
  OneOp narrow(OpKind::Matmul, {f32({8, 6}), f32({6, 2})});
  CHECK(narrow.sigs(kThree) == Strings{"(S0, R) -> S0", "(S1, S0) -> P",
                                       "(P, R) -> P", "(R, P) -> P",
                                       "(R, R) -> R"});
  // A batched b splits its batch dimension with a's.
  OneOp batched(OpKind::Matmul, {f32({4, 8, 6}), f32({4, 6, 4})});
  Strings b = batched.sigs(kTwo);
  CHECK(listed(b, "(S0, S0) -> S0"));
  CHECK_FALSE(listed(b, "(S0, R) -> S0"));
  CHECK(listed(b, "(S1, R) -> S1"));
  CHECK(listed(b, "(R, S2) -> S2"));
  CHECK(listed(b, "(S2, S1) -> P"));
}

TEST_CASE("sharding rules: reshape splits only whole rows of the same parts") {
  OneOp merge(OpKind::Reshape, {f32({4, 6})}, {{"shape", Ints{24}}});
  CHECK(merge.sigs(kTwo) == Strings{"(S0) -> S0", "(P) -> P", "(R) -> R"});
  // 4 in three parts is 2, 1, 1 rows: 12, 6, 6 elements, not the 8, 8, 8
  // that S0 of [24] means.
  CHECK_FALSE(listed(merge.sigs(kThree), "(S0) -> S0"));
  // Weighted [3, 1]: 3 and 1 rows are 18 and 6, the parts of 24.
  CHECK(listed(merge.sigs(kWeighted), "(S0) -> S0"));

  OneOp unmerge(OpKind::Reshape, {f32({24})}, {{"shape", Ints{4, 6}}});
  CHECK(listed(unmerge.sigs(kTwo), "(S0) -> S0"));
  // Parts of 8 elements are not whole rows of 6.
  CHECK(unmerge.sigs(kThree) == Strings{"(P) -> P", "(R) -> R"});

  // The inner dimension of a merged group is not the outermost: no split.
  OneOp inner(OpKind::Reshape, {f32({4, 6})}, {{"shape", Ints{24}}});
  CHECK_FALSE(listed(inner.sigs(kTwo), "(S1) -> S0"));
  // Dimensions of size 1 do not hide the split after them.
  OneOp ones(OpKind::Reshape, {f32({4, 1, 6})}, {{"shape", Ints{4, 6}}});
  CHECK(ones.sigs(kTwo) ==
        Strings{"(S0) -> S0", "(S2) -> S1", "(P) -> P", "(R) -> R"});
  // Splitting heads keeps the batch split and moves the hidden one.
  OneOp heads(OpKind::Reshape, {f32({4, 5, 6})}, {{"shape", Ints{4, 5, 3, 2}}});
  CHECK(heads.sigs(kThree) == Strings{"(S0) -> S0", "(S1) -> S1", "(S2) -> S2",
                                      "(P) -> P", "(R) -> R"});
}

TEST_CASE("sharding rules: broadcast splits new and kept dimensions") {
  OneOp row(OpKind::Broadcast, {f32({6})}, {{"shape", Ints{5, 6}}});
  CHECK(row.sigs(kTwo) ==
        Strings{"(S0) -> S1", "(R) -> S0", "(P) -> P", "(R) -> R"});
  OneOp col(OpKind::Broadcast, {f32({5, 1})}, {{"shape", Ints{5, 6}}});
  CHECK(col.sigs(kTwo) ==
        Strings{"(S0) -> S0", "(R) -> S1", "(P) -> P", "(R) -> R"});
}

TEST_CASE("sharding rules: no empty parts") {
  OneOp small(OpKind::Add, {f32({2, 5}), f32({2, 5})});
  CHECK(small.sigs(kTwo).front() == "(S0, S0) -> S0");
  CHECK(small.sigs(kThree).front() == "(S1, S1) -> S1");
  // [3, 1] of 2 is 2 and 0.
  CHECK(small.sigs(kWeighted).front() == "(S1, S1) -> S1");
  OneOp one(OpKind::Neg, {f32({1})});
  CHECK(one.sigs(kTwo) == Strings{"(P) -> P", "(R) -> R"});
}

TEST_CASE("sharding rules: partial sums only through linear ops") {
  OneOp mean(OpKind::Mean, {f32({4, 6})},
             {{"axes", Ints{1}}, {"keepdims", false}});
  CHECK(mean.sigs(kTwo) == Strings{"(S0) -> S0",
                                   "(S1) -> P scale operand 0 dim 1",
                                   "(P) -> P", "(R) -> R"});
  // The maximum over a split dimension leaves partial maxima, never sums.
  OneOp max(OpKind::Max, {f32({4, 6})},
            {{"axes", Ints{1}}, {"keepdims", true}});
  CHECK(max.sigs(kTwo) ==
        Strings{"(S0) -> S0", "(S1) -> Pmax", "(Pmax) -> Pmax", "(R) -> R"});
  OneOp dropout(OpKind::Dropout, {f32({4, 6})},
                {{"p", 0.5}, {"seed", int64_t(1)}});
  CHECK(dropout.sigs(kTwo) == Strings{"(R) -> R"});
  OneOp exp(OpKind::Exp, {f32({4, 6})});
  CHECK(exp.sigs(kTwo) == Strings{"(S0) -> S0", "(S1) -> S1", "(R) -> R"});
  // Narrowing rounds each part instead of the sum, as bf16 steps on a mesh
  // are meant to (passes/ShardingRules.cpp castKeepsSums).
  OneOp narrowing(OpKind::Cast, {f64({4})}, {{"dtype", std::string("f32")}});
  CHECK(narrowing.sigs(kTwo) == Strings{"(S0) -> S0", "(P) -> P", "(R) -> R"});
  OneOp toBF16(OpKind::Cast, {f32({4})}, {{"dtype", std::string("bf16")}});
  CHECK(toBF16.sigs(kTwo) == Strings{"(S0) -> S0", "(P) -> P", "(R) -> R"});
  OneOp widening(OpKind::Cast, {f32({4})}, {{"dtype", std::string("f64")}});
  CHECK(widening.sigs(kTwo) == Strings{"(S0) -> S0", "(P) -> P", "(R) -> R"});
  OneOp toInt(OpKind::Cast, {f32({4})}, {{"dtype", std::string("i32")}});
  CHECK_FALSE(listed(toInt.sigs(kTwo), "(P) -> P"));
  OneOp ce(OpKind::CrossEntropy, {f32({4, 6}), TensorType(DType::I32, {4})});
  CHECK(ce.sigs(kTwo) ==
        Strings{"(S0, S0) -> P scale operand 1 dim 0", "(R, R) -> R"});
  OneOp emb(OpKind::Embedding, {f32({10, 4}), TensorType(DType::I32, {6})});
  // A vocabulary split (S0 of the table) gives partial sums.
  CHECK(emb.sigs(kTwo) == Strings{"(R, S0) -> S0", "(S1, R) -> S1",
                                  "(S0, R) -> P", "(P, R) -> P",
                                  "(R, R) -> R"});
}
