// Hand-written examples for the plan report tests: sharded logical steps
// (placements on every value, communication ops in place) and their device
// programs, as the shard pass and the partitioner make them. An MLP step on
// dp=2 (gradients all-reduced), a tp=2 MLP with an uneven hidden size
// (column- then row-parallel), and a dp=2,tp=2 step with a reduce-scatter,
// a local split and an all-gather of the updated weight.
#pragma once

#include "backend/Executable.h"
#include "backend/PlanReport.h"
#include "backend/cpu/Kernels.h"
#include "ir/TextParser.h"

#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

namespace mgc::backend::plantest {

// dp=2: batch split, weights replicated, gradients all-reduced, SGD with
// momentum (state).
inline const char *kDpSharded = R"(
module @mlp attributes {mesh = "dp=2"} {
  input %x : f32[8, 4] {dp=S0}
  input %y : i32[8] {dp=S0}
  param %w : f32[4, 3] {dp=R} = normal(0.0, 0.02)
  param %b : f32[3] {dp=R} = zeros
  state %opt.m.w : f32[4, 3] {dp=R} = zeros
  state %opt.m.b : f32[3] {dp=R} = zeros
  %0 = matmul(%x, %w) : f32[8, 3] {dp=S0}
  %1 = broadcast(%b) {shape = [8, 3]} : f32[8, 3] {dp=S0}
  %2 = add(%0, %1) : f32[8, 3] {dp=S0}
  %3 = cross_entropy(%2, %y) : f32[] {dp=P}
  %4 = all_reduce(%3) {axis = "dp"} : f32[] {dp=R}
  %5 = constant() {dtype = "f32", value = 1.0} : f32[] {dp=R}
  %6 = cross_entropy_grad(%5, %2, %y) : f32[8, 3] {dp=S0}
  %7 = sum(%6) {axes = [0], keepdims = false} : f32[3] {dp=P}
  %8 = transpose(%x) {perm = [1, 0]} : f32[4, 8] {dp=S1}
  %9 = matmul(%8, %6) : f32[4, 3] {dp=P} scope "head"
  %10 = all_reduce(%9) {axis = "dp"} : f32[4, 3] {dp=R}
  %11 = all_reduce(%7) {axis = "dp"} : f32[3] {dp=R}
  %12 = constant() {dtype = "f32", value = 0.9} : f32[] {dp=R}
  %13 = broadcast(%12) {shape = [4, 3]} : f32[4, 3] {dp=R}
  %14 = mul(%opt.m.w, %13) : f32[4, 3] {dp=R}
  %15 = add(%14, %10) : f32[4, 3] {dp=R}
  %16 = sub(%w, %15) : f32[4, 3] {dp=R}
  %17 = broadcast(%12) {shape = [3]} : f32[3] {dp=R}
  %18 = mul(%opt.m.b, %17) : f32[3] {dp=R}
  %19 = add(%18, %11) : f32[3] {dp=R}
  %20 = sub(%b, %19) : f32[3] {dp=R}
  output loss = %4 [loss]
  update %w = %16
  update %opt.m.w = %15
  update %b = %20
  update %opt.m.b = %19
}
)";

inline const char *kDpProgram = R"(
module @mlp attributes {devices = "0,1", mesh = "dp=2"} {
  input %x : f32[4, 4] {dp=S0}
  input %y : i32[4] {dp=S0}
  param %w : f32[4, 3] {dp=R} = normal(0.0, 0.02)
  param %b : f32[3] {dp=R} = zeros
  state %opt.m.w : f32[4, 3] {dp=R} = zeros
  state %opt.m.b : f32[3] {dp=R} = zeros
  %0 = matmul(%x, %w) : f32[4, 3]
  %1 = broadcast(%b) {shape = [4, 3]} : f32[4, 3]
  %2 = add(%0, %1) : f32[4, 3]
  %3 = cross_entropy(%2, %y) : f32[]
  %4 = all_reduce(%3) {axis = "dp"} : f32[]
  %5 = constant() {dtype = "f32", value = 1.0} : f32[]
  %6 = cross_entropy_grad(%5, %2, %y) : f32[4, 3]
  %7 = sum(%6) {axes = [0], keepdims = false} : f32[3]
  %8 = transpose(%x) {perm = [1, 0]} : f32[4, 4]
  %9 = matmul(%8, %6) : f32[4, 3] scope "head"
  %10 = all_reduce(%9) {axis = "dp"} : f32[4, 3]
  %11 = all_reduce(%7) {axis = "dp"} : f32[3]
  %12 = constant() {dtype = "f32", value = 0.9} : f32[]
  %13 = broadcast(%12) {shape = [4, 3]} : f32[4, 3]
  %14 = mul(%opt.m.w, %13) : f32[4, 3]
  %15 = add(%14, %10) : f32[4, 3]
  %16 = sub(%w, %15) : f32[4, 3]
  %17 = broadcast(%12) {shape = [3]} : f32[3]
  %18 = mul(%opt.m.b, %17) : f32[3]
  %19 = add(%18, %11) : f32[3]
  %20 = sub(%b, %19) : f32[3]
  output loss = %4 [loss]
  update %w = %16
  update %opt.m.w = %15
  update %b = %20
  update %opt.m.b = %19
}
)";

// tp=2, Megatron MLP: w1 column-parallel, w2 row-parallel, one all-reduce
// forward. The hidden size 5 splits 3 + 2, so the devices differ. The
// gradient of w1 is gathered for a norm output.
inline const char *kTpSharded = R"(
module @tp attributes {mesh = "tp=2"} {
  input %x : f32[8, 4] {tp=R}
  input %y : i32[8] {tp=R}
  param %w1 : f32[4, 5] {tp=S1} = normal(0.0, 0.02)
  param %b1 : f32[5] {tp=S0} = zeros
  param %w2 : f32[5, 3] {tp=S0} = normal(0.0, 0.02)
  %0 = matmul(%x, %w1) : f32[8, 5] {tp=S1} scope "mlp"
  %1 = broadcast(%b1) {shape = [8, 5]} : f32[8, 5] {tp=S1} scope "mlp"
  %2 = add(%0, %1) : f32[8, 5] {tp=S1} scope "mlp"
  %3 = relu(%2) : f32[8, 5] {tp=S1} scope "mlp"
  %4 = matmul(%3, %w2) : f32[8, 3] {tp=P} scope "mlp"
  %5 = all_reduce(%4) {axis = "tp"} : f32[8, 3] {tp=R} scope "mlp"
  %6 = cross_entropy(%5, %y) : f32[] {tp=R}
  %7 = constant() {dtype = "f32", value = 1.0} : f32[] {tp=R}
  %8 = cross_entropy_grad(%7, %5, %y) : f32[8, 3] {tp=R}
  %9 = transpose(%3) {perm = [1, 0]} : f32[5, 8] {tp=S0}
  %10 = matmul(%9, %8) : f32[5, 3] {tp=S0}
  %11 = transpose(%w2) {perm = [1, 0]} : f32[3, 5] {tp=S1}
  %12 = matmul(%8, %11) : f32[8, 5] {tp=S1}
  %13 = relu_grad(%12, %2) : f32[8, 5] {tp=S1}
  %14 = sum(%13) {axes = [0], keepdims = false} : f32[5] {tp=S0}
  %15 = transpose(%x) {perm = [1, 0]} : f32[4, 8] {tp=R}
  %16 = matmul(%15, %13) : f32[4, 5] {tp=S1}
  %17 = all_gather(%16) {axis = "tp", dim = 1, part = -1, sizes = []} : f32[4, 5] {tp=R}
  %18 = mul(%17, %17) : f32[4, 5] {tp=R}
  %19 = sum(%18) {axes = [0, 1], keepdims = false} : f32[] {tp=R}
  %20 = constant() {dtype = "f32", value = 0.1} : f32[] {tp=R}
  %21 = broadcast(%20) {shape = [4, 5]} : f32[4, 5] {tp=S1}
  %22 = mul(%16, %21) : f32[4, 5] {tp=S1}
  %23 = sub(%w1, %22) : f32[4, 5] {tp=S1}
  %24 = broadcast(%20) {shape = [5]} : f32[5] {tp=S0}
  %25 = mul(%14, %24) : f32[5] {tp=S0}
  %26 = sub(%b1, %25) : f32[5] {tp=S0}
  %27 = broadcast(%20) {shape = [5, 3]} : f32[5, 3] {tp=S0}
  %28 = mul(%10, %27) : f32[5, 3] {tp=S0}
  %29 = sub(%w2, %28) : f32[5, 3] {tp=S0}
  output loss = %6 [loss]
  output gnorm = %19
  update %w1 = %23
  update %b1 = %26
  update %w2 = %29
}
)";

// The tp program of part $P, whose hidden part is $H wide.
inline const char *kTpProgram = R"(
module @tp attributes {devices = "$P", mesh = "tp=2"} {
  input %x : f32[8, 4] {tp=R}
  input %y : i32[8] {tp=R}
  param %w1 : f32[4, $H] {tp=S1} = normal(0.0, 0.02)
  param %b1 : f32[$H] {tp=S0} = zeros
  param %w2 : f32[$H, 3] {tp=S0} = normal(0.0, 0.02)
  %0 = matmul(%x, %w1) : f32[8, $H] scope "mlp"
  %1 = broadcast(%b1) {shape = [8, $H]} : f32[8, $H] scope "mlp"
  %2 = add(%0, %1) : f32[8, $H] scope "mlp"
  %3 = relu(%2) : f32[8, $H] scope "mlp"
  %4 = matmul(%3, %w2) : f32[8, 3] scope "mlp"
  %5 = all_reduce(%4) {axis = "tp"} : f32[8, 3] scope "mlp"
  %6 = cross_entropy(%5, %y) : f32[]
  %7 = constant() {dtype = "f32", value = 1.0} : f32[]
  %8 = cross_entropy_grad(%7, %5, %y) : f32[8, 3]
  %9 = transpose(%3) {perm = [1, 0]} : f32[$H, 8]
  %10 = matmul(%9, %8) : f32[$H, 3]
  %11 = transpose(%w2) {perm = [1, 0]} : f32[3, $H]
  %12 = matmul(%8, %11) : f32[8, $H]
  %13 = relu_grad(%12, %2) : f32[8, $H]
  %14 = sum(%13) {axes = [0], keepdims = false} : f32[$H]
  %15 = transpose(%x) {perm = [1, 0]} : f32[4, 8]
  %16 = matmul(%15, %13) : f32[4, $H]
  %17 = all_gather(%16) {axis = "tp", dim = 1, part = $P, sizes = [3, 2]} : f32[4, 5]
  %18 = mul(%17, %17) : f32[4, 5]
  %19 = sum(%18) {axes = [0, 1], keepdims = false} : f32[]
  %20 = constant() {dtype = "f32", value = 0.1} : f32[]
  %21 = broadcast(%20) {shape = [4, $H]} : f32[4, $H]
  %22 = mul(%16, %21) : f32[4, $H]
  %23 = sub(%w1, %22) : f32[4, $H]
  %24 = broadcast(%20) {shape = [$H]} : f32[$H]
  %25 = mul(%14, %24) : f32[$H]
  %26 = sub(%b1, %25) : f32[$H]
  %27 = broadcast(%20) {shape = [$H, 3]} : f32[$H, 3]
  %28 = mul(%10, %27) : f32[$H, 3]
  %29 = sub(%w2, %28) : f32[$H, 3]
  output loss = %6 [loss]
  output gnorm = %19
  update %w1 = %23
  update %b1 = %26
  update %w2 = %29
}
)";

// dp=2,tp=2: the MLP of kTpSharded (even sizes) on a split batch; the
// gradient of w2 is reduce-scattered over dp, each dp rank updates its
// columns (a local split of w2) and the new w2 is gathered back; the
// gradient of w1 is all-reduced. The learning rate comes from a step
// counter (optimizer state).
inline const char *kMeshSharded = R"(
module @mlp2d attributes {mesh = "dp=2,tp=2"} {
  input %x : f32[8, 4] {dp=S0, tp=R}
  input %y : i32[8] {dp=S0, tp=R}
  param %w1 : f32[4, 6] {dp=R, tp=S1} = normal(0.0, 0.02)
  param %w2 : f32[6, 4] {dp=R, tp=S0} = normal(0.0, 0.02)
  state %opt.step : f32[] {dp=R, tp=R} = zeros
  %0 = matmul(%x, %w1) : f32[8, 6] {dp=S0, tp=S1}
  %1 = relu(%0) : f32[8, 6] {dp=S0, tp=S1}
  %2 = matmul(%1, %w2) : f32[8, 4] {dp=S0, tp=P}
  %3 = all_reduce(%2) {axis = "tp"} : f32[8, 4] {dp=S0, tp=R}
  %4 = cross_entropy(%3, %y) : f32[] {dp=P, tp=R}
  %5 = all_reduce(%4) {axis = "dp"} : f32[] {dp=R, tp=R}
  %6 = constant() {dtype = "f32", value = 1.0} : f32[] {dp=R, tp=R}
  %7 = cross_entropy_grad(%6, %3, %y) : f32[8, 4] {dp=S0, tp=R}
  %8 = transpose(%1) {perm = [1, 0]} : f32[6, 8] {dp=S1, tp=S0}
  %9 = matmul(%8, %7) : f32[6, 4] {dp=P, tp=S0}
  %10 = reduce_scatter(%9) {axis = "dp", dim = 1, part = -1, sizes = []} : f32[6, 4] {dp=S1, tp=S0}
  %11 = transpose(%w2) {perm = [1, 0]} : f32[4, 6] {dp=R, tp=S1}
  %12 = matmul(%7, %11) : f32[8, 6] {dp=S0, tp=S1}
  %13 = relu_grad(%12, %0) : f32[8, 6] {dp=S0, tp=S1}
  %14 = transpose(%x) {perm = [1, 0]} : f32[4, 8] {dp=S1, tp=R}
  %15 = matmul(%14, %13) : f32[4, 6] {dp=P, tp=S1}
  %16 = all_reduce(%15) {axis = "dp"} : f32[4, 6] {dp=R, tp=S1}
  %17 = add(%opt.step, %6) : f32[] {dp=R, tp=R}
  %18 = local_split(%w2) {axis = "dp", dim = 1, part = -1, sizes = []} : f32[6, 4] {dp=S1, tp=S0}
  %19 = broadcast(%17) {shape = [6, 4]} : f32[6, 4] {dp=S1, tp=S0}
  %20 = mul(%10, %19) : f32[6, 4] {dp=S1, tp=S0}
  %21 = sub(%18, %20) : f32[6, 4] {dp=S1, tp=S0}
  %22 = all_gather(%21) {axis = "dp", dim = 1, part = -1, sizes = []} : f32[6, 4] {dp=R, tp=S0}
  %23 = broadcast(%17) {shape = [4, 6]} : f32[4, 6] {dp=R, tp=S1}
  %24 = mul(%16, %23) : f32[4, 6] {dp=R, tp=S1}
  %25 = sub(%w1, %24) : f32[4, 6] {dp=R, tp=S1}
  output loss = %5 [loss]
  update %w1 = %25
  update %w2 = %22
  update %opt.step = %17
}
)";

inline const char *kMeshProgram = R"(
module @mlp2d attributes {devices = "0,1,2,3", mesh = "dp=2,tp=2"} {
  input %x : f32[4, 4] {dp=S0, tp=R}
  input %y : i32[4] {dp=S0, tp=R}
  param %w1 : f32[4, 3] {dp=R, tp=S1} = normal(0.0, 0.02)
  param %w2 : f32[3, 4] {dp=R, tp=S0} = normal(0.0, 0.02)
  state %opt.step : f32[] {dp=R, tp=R} = zeros
  %0 = matmul(%x, %w1) : f32[4, 3]
  %1 = relu(%0) : f32[4, 3]
  %2 = matmul(%1, %w2) : f32[4, 4]
  %3 = all_reduce(%2) {axis = "tp"} : f32[4, 4]
  %4 = cross_entropy(%3, %y) : f32[]
  %5 = all_reduce(%4) {axis = "dp"} : f32[]
  %6 = constant() {dtype = "f32", value = 1.0} : f32[]
  %7 = cross_entropy_grad(%6, %3, %y) : f32[4, 4]
  %8 = transpose(%1) {perm = [1, 0]} : f32[3, 4]
  %9 = matmul(%8, %7) : f32[3, 4]
  %10 = reduce_scatter(%9) {axis = "dp", dim = 1, part = -1, sizes = [2, 2]} : f32[3, 2]
  %11 = transpose(%w2) {perm = [1, 0]} : f32[4, 3]
  %12 = matmul(%7, %11) : f32[4, 3]
  %13 = relu_grad(%12, %0) : f32[4, 3]
  %14 = transpose(%x) {perm = [1, 0]} : f32[4, 4]
  %15 = matmul(%14, %13) : f32[4, 3]
  %16 = all_reduce(%15) {axis = "dp"} : f32[4, 3]
  %17 = add(%opt.step, %6) : f32[]
  %18 = local_split(%w2) {axis = "dp", dim = 1, part = -1, sizes = [2, 2]} : f32[3, 2]
  %19 = broadcast(%17) {shape = [3, 2]} : f32[3, 2]
  %20 = mul(%10, %19) : f32[3, 2]
  %21 = sub(%18, %20) : f32[3, 2]
  %22 = all_gather(%21) {axis = "dp", dim = 1, part = -1, sizes = [2, 2]} : f32[3, 4]
  %23 = broadcast(%17) {shape = [4, 3]} : f32[4, 3]
  %24 = mul(%16, %23) : f32[4, 3]
  %25 = sub(%w1, %24) : f32[4, 3]
  output loss = %5 [loss]
  update %w1 = %25
  update %w2 = %22
  update %opt.step = %17
}
)";

inline std::unique_ptr<ir::Module> parse(llvm::StringRef text) {
  DiagnosticEngine diag;
  auto m = ir::parseModuleText("plan.mgir", text, diag);
  REQUIRE(m);
  return m;
}

inline std::string tpProgramText(int part) {
  std::string text = kTpProgram;
  auto replaceAll = [&](llvm::StringRef from, llvm::StringRef to) {
    for (size_t at; (at = text.find(from.str())) != std::string::npos;)
      text.replace(at, from.size(), to.str());
  };
  replaceAll("$H", part == 0 ? "3" : "2");
  replaceAll("$P", std::to_string(part));
  return text;
}

// A sharded module with its device programs and their executables.
struct Example {
  std::unique_ptr<ir::Module> sharded;
  passes::DevicePrograms programs;
  std::vector<std::unique_ptr<Executable>> exes;

  std::vector<const Executable *> exePtrs() const {
    std::vector<const Executable *> out;
    for (const auto &e : exes)
      out.push_back(e.get());
    return out;
  }
  PlanReport report() const {
    return buildPlanReport(*sharded, programs, exePtrs());
  }
};

inline Example makeExample(llvm::StringRef sharded,
                           const std::vector<std::string> &programTexts,
                           std::vector<size_t> programOf) {
  Example e;
  e.sharded = parse(sharded);
  std::string error;
  auto meshText = std::get<std::string>(*e.sharded->attrs().find("mesh"));
  auto mesh = ir::Mesh::parse(meshText, error);
  REQUIRE(mesh);
  e.programs.mesh = *mesh;
  for (const std::string &text : programTexts) {
    e.programs.programs.push_back(parse(text));
    e.exes.push_back(buildExecutable(parse(text), cpu::scratchBytes));
  }
  e.programs.programOf = std::move(programOf);
  return e;
}

inline Example dpExample() {
  return makeExample(kDpSharded, {kDpProgram}, {0, 0});
}
inline Example tpExample() {
  return makeExample(kTpSharded, {tpProgramText(0), tpProgramText(1)}, {0, 1});
}
inline Example meshExample() {
  return makeExample(kMeshSharded, {kMeshProgram}, {0, 0, 0, 0});
}

} // namespace mgc::backend::plantest
