// The mesh executor on device programs without communication (each device
// on its own arguments and arena) and its checks of programs and arguments,
// which name the device.
#include "MeshTestSupport.h"

namespace mgc::backend::testing {
namespace {

TEST_CASE("Mesh executor: devices run a shared program on their own "
          "arguments") {
  auto exe = build(R"(module @dev {
  input %x : f32[2, 3]
  param %w : f32[3, 4] = zeros
  %h = matmul(%x, %w) : f32[2, 4]
  %t = tanh(%h) : f32[2, 4]
  output t = %t
  update %w = %w
})");
  ir::HostTensor w = randomHost(f32({3, 4}), 1);
  std::vector<ir::TensorMap> host(4);
  std::vector<NamedTensors> args;
  for (int d = 0; d < 4; ++d) {
    host[d] = {{"x", randomHost(f32({2, 3}), 10 + d)}, {"w", w}};
    args.push_back(toTensors(host[d]));
  }
  Runner r(meshOf("dp=4"), {exe.get(), exe.get(), exe.get(), exe.get()});
  for (int step = 0; step < 2; ++step) {
    std::vector<RunResult> got = r.run(args);
    for (int d = 0; d < 4; ++d) {
      INFO("device " << d);
      ir::TensorMap want = interpret(R"(module @dev {
  input %x : f32[2, 3]
  param %w : f32[3, 4] = zeros
  %h = matmul(%x, %w) : f32[2, 4]
  %t = tanh(%h) : f32[2, 4]
  output t = %t
})",
                                     host[d]);
      compareTensors(got[d].outputs.at("t"), want.at("t"), kTol, "t");
      CHECK(bitIdentical(got[d].updates.at("w"), args[d].at("w")));
    }
    // Each device has its own arena: different arguments, different results.
    CHECK_FALSE(bitIdentical(got[0].outputs.at("t"), got[1].outputs.at("t")));
  }
}

// Devices lent their own argument tensors as update targets write the
// updates there (a fused update in place, the rest copied in) and return
// none of them; the values are those of a run that returns them.
TEST_CASE("Mesh executor: updates written into the devices' own tensors") {
  const char *text = R"IR(module @dev {
  input %g : f32[300]
  param %w : f32[300] = zeros
  state %m : f32[300] = zeros
  %r = all_reduce(%g) {axis = "dp"} : f32[300]
  %0 = fused(%m, %r) {dtype = "f32", expr = "mul(%0, 0.9); add(#0, %1)", shape = [300]} : f32[300]
  %1 = fused(%w, %0) {dtype = "f32", expr = "mul(%1, 0.5); sub(%0, #0)", shape = [300]} : f32[300]
  %2 = sum(%1) {axes = [0], keepdims = false} : f32[]
  output new_w = %2
  update %m = %0
  update %w = %1
})IR";
  auto exe = build(text);
  std::vector<NamedTensors> lent, returned;
  for (int d = 0; d < 2; ++d) {
    ir::TensorMap host = {{"g", randomHost(f32({300}), 20 + d)},
                          {"w", randomHost(f32({300}), 1)},
                          {"m", randomHost(f32({300}), 2)}};
    lent.push_back(toTensors(host));
    returned.push_back(toTensors(host));
  }
  std::vector<UpdateTargets> into(2);
  for (int d = 0; d < 2; ++d)
    for (const char *name : {"w", "m"})
      into[d][name] = &lent[d].at(name);
  Runner inPlace(meshOf("dp=2"), {exe.get(), exe.get()});
  Runner copies(meshOf("dp=2"), {exe.get(), exe.get()});
  for (int step = 0; step < 2; ++step) {
    auto got = inPlace.ex->run(lent, inPlace.diag, "", &into);
    INFO(inPlace.errors());
    REQUIRE(got.succeeded());
    std::vector<RunResult> want = copies.run(returned);
    for (int d = 0; d < 2; ++d) {
      INFO("device " << d << ", step " << step);
      CHECK((*got)[d].updates.empty());
      CHECK(bitIdentical((*got)[d].outputs.at("new_w"),
                         want[d].outputs.at("new_w")));
      for (const char *name : {"w", "m"}) {
        CHECK(bitIdentical(lent[d].at(name), want[d].updates.at(name)));
        returned[d].insert_or_assign(name, want[d].updates.at(name));
      }
    }
  }
}

TEST_CASE("Mesh executor: arguments are checked per device, naming it") {
  auto exe = build(R"(module @dev {
  input %x : f32[2]
  %y = neg(%x) : f32[2]
  output y = %y
})");
  Runner r(meshOf("dp=2"), {exe.get(), exe.get()});
  NamedTensors good{{"x", runtime::Tensor(f32({2}))}};
  NamedTensors wrongType{{"x", runtime::Tensor(f32({3}))}};
  auto bad = r.ex->run({good, wrongType}, r.diag);
  CHECK(bad.failed());
  CHECK(r.errors().find("device 1: tensor 'x' has type f32[3]") !=
        std::string::npos);
  CHECK(r.errors().find("device 0") == std::string::npos);
  auto missing = r.ex->run({NamedTensors{}, good}, r.diag);
  CHECK(missing.failed());
  CHECK(r.errors().find("device 0: missing tensor for input 'x'") !=
        std::string::npos);
  auto count = r.ex->run({good}, r.diag);
  CHECK(count.failed());
  CHECK(
      r.errors().find("runs 2 devices of the mesh dp=2 but arguments for 1") !=
      std::string::npos);
  // And a correct run still works.
  CHECK(r.run({good, good}).size() == 2);
}

TEST_CASE("Mesh executor: programs are checked against the mesh and each "
          "other") {
  auto a = build(R"(module @a {
  input %x : f32[2]
  %r = all_reduce(%x) {axis = "dp"} : f32[2]
  %g = all_gather(%r) {axis = "dp", dim = 0, sizes = [2, 2], part = -1} : f32[4]
  output g = %g
})");
  auto b = build(R"(module @b {
  input %x : f32[2]
  %g = all_gather(%x) {axis = "dp", dim = 0, sizes = [2, 2], part = -1} : f32[4]
  %r = all_reduce(%g) {axis = "dp"} : f32[4]
  output r = %r
})");
  auto c = build(R"(module @c {
  input %x : f32[2]
  %r = all_reduce(%x) {axis = "dp"} : f32[2]
  output r = %r
})");
  auto tp = build(R"(module @tp {
  input %x : f32[2]
  %r = all_reduce(%x) {axis = "tp"} : f32[2]
  output r = %r
})");
  std::string out;
  llvm::raw_string_ostream os(out);
  DiagnosticEngine diag(os);
  CHECK_FALSE(MeshExecutor::create(meshOf("dp=2"), {a.get()}, {}, diag));
  CHECK(os.str().find("has 2 devices but 1 device programs") !=
        std::string::npos);
  CHECK_FALSE(
      MeshExecutor::create(meshOf("dp=2"), {a.get(), b.get()}, {}, diag));
  CHECK(os.str().find("device 1: communication op 1 is all_gather on 'dp' "
                      "where device 0 has all_reduce on 'dp'") !=
        std::string::npos);
  CHECK_FALSE(
      MeshExecutor::create(meshOf("dp=2"), {a.get(), c.get()}, {}, diag));
  CHECK(os.str().find("device 1: the program has 1 communication ops but "
                      "device 0's has 2") != std::string::npos);
  CHECK_FALSE(
      MeshExecutor::create(meshOf("dp=2"), {tp.get(), tp.get()}, {}, diag));
  CHECK(os.str().find("device 0: op %0 (all_reduce on 'tp') communicates "
                      "over an axis that the mesh dp=2 does not have") !=
        std::string::npos);
  CHECK_FALSE(
      MeshExecutor::create(meshOf("dp=2"), {a.get(), nullptr}, {}, diag));
  CHECK(os.str().find("device 1: no program") != std::string::npos);
}

} // namespace
} // namespace mgc::backend::testing
