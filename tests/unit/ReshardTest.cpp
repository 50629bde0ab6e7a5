// Reshard, the only creator of communication: every kind of placement
// change makes the expected ops, each result carries its new placement, the
// logical module still computes the same value (the interpreter sees
// communication ops as identities), and impossible changes are refused.
#include "passes/Reshard.h"

#include "ir/Builder.h"
#include "ir/Interpreter.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

#include "llvm/Support/raw_ostream.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace mgc;
using namespace mgc::ir;

namespace {

Mesh meshOf(const char *text) {
  std::string error;
  std::optional<Mesh> m = Mesh::parse(text, error);
  REQUIRE_MESSAGE(m, error);
  return *m;
}

Sharding sh(const char *dp, const char *tp = nullptr) {
  Sharding s;
  s.set("dp", *Placement::parse(dp));
  if (tp)
    s.set("tp", *Placement::parse(tp));
  return s;
}

struct ReshardCase {
  Module module{"m"};
  Builder b{module.graph()};
  Mesh mesh;
  Value *x = nullptr;
  std::string error;

  ReshardCase(const char *meshText, Sharding from) : mesh(meshOf(meshText)) {
    x = module.graph().addInput("x", TensorType(DType::F32, {4, 6, 8}));
    x->setSharding(passes::completeSharding(from, mesh));
  }

  // The kinds of the ops made, in order.
  std::vector<std::string> to(const Sharding &target) {
    Value *y = passes::reshard(b, x, target, mesh, error);
    std::vector<std::string> kinds;
    if (!y)
      return {"<error>"};
    module.graph().addOutput("y", y);
    for (const auto &op : module.graph().ops())
      kinds.push_back(op->name().str());
    CHECK(y->sharding() == passes::completeSharding(target, mesh));
    std::string diagText;
    llvm::raw_string_ostream os(diagText);
    DiagnosticEngine diag(os);
    CHECK_MESSAGE(succeeded(verify(module, diag)), os.str());
    // The value is unchanged: communication ops are identities logically.
    TensorMap args;
    HostTensor in(x->type());
    for (size_t i = 0; i < in.data.size(); ++i)
      in.data[i] = static_cast<double>(i) * 0.5 - 3;
    args["x"] = in;
    auto out = interpret(module, args, diag);
    REQUIRE(!out.failed());
    CHECK(out->at("y").data == in.data);
    return kinds;
  }
};

using Kinds = std::vector<std::string>;

} // namespace

TEST_CASE("reshard: each placement change on one axis") {
  CHECK(ReshardCase("dp=2", sh("P")).to(sh("R")) == Kinds{"all_reduce"});
  CHECK(ReshardCase("dp=2", sh("P")).to(sh("S1")) == Kinds{"reduce_scatter"});
  CHECK(ReshardCase("dp=2", sh("S0")).to(sh("R")) == Kinds{"all_gather"});
  CHECK(ReshardCase("dp=2", sh("R")).to(sh("S2")) == Kinds{"local_split"});
  CHECK(ReshardCase("dp=2", sh("S0")).to(sh("S2")) == Kinds{"all_to_all"});
  CHECK(ReshardCase("dp=2", sh("S0")).to(sh("S0")) == Kinds{});
}

TEST_CASE("reshard: attributes name the axis and the dimensions") {
  ReshardCase c("dp=2,tp=2", sh("S0", "R"));
  REQUIRE(c.to(sh("S0", "S1")) == Kinds{"local_split"});
  const Op &op = *c.module.graph().ops().front();
  CHECK(op.attrs().getString("axis") == "tp");
  CHECK(op.attrs().getInt("dim") == 1);
  ReshardCase d("dp=2", sh("S0"));
  REQUIRE(d.to(sh("S2")) == Kinds{"all_to_all"});
  const Op &a2a = *d.module.graph().ops().front();
  CHECK(a2a.attrs().getInt("from") == 0);
  CHECK(a2a.attrs().getInt("to") == 2);
}

TEST_CASE("reshard: several axes, splits undone before new ones are made") {
  // The gradient all-reduce of data parallelism with a tp-split weight.
  CHECK(ReshardCase("dp=2,tp=2", sh("P", "S1")).to(sh("R", "S1")) ==
        Kinds{"all_reduce"});
  // ZeRO: reduce-scatter on dp while tp keeps its split.
  CHECK(ReshardCase("dp=2,tp=2", sh("P", "S1")).to(sh("S0", "S1")) ==
        Kinds{"reduce_scatter"});
  // Swapping which axis splits which dimension: dp's target dimension is
  // still split on tp, so dp gathers; tp then moves straight to its new
  // dimension; dp splits last.
  CHECK(ReshardCase("dp=2,tp=2", sh("S0", "S1")).to(sh("S1", "S0")) ==
        Kinds{"all_gather", "all_to_all", "local_split"});
  // Partial on both axes to replicated.
  CHECK(ReshardCase("dp=2,tp=2", sh("P", "P")).to(sh("R", "R")) ==
        Kinds{"all_reduce", "all_reduce"});
}

TEST_CASE("reshard: nothing becomes partial sums") {
  ReshardCase c("dp=2", sh("R"));
  CHECK(c.to(sh("P")) == Kinds{"<error>"});
  CHECK(c.error.find("partial") != std::string::npos);
}

TEST_CASE("reshard: the cost model refuses what reshard refuses, on an "
          "axis of any size") {
  // On one device every possible change is free, and making partial sums
  // stays impossible: the shard pass must never plan it (it did, on
  // dp=1 and tp=1, and partitioning then failed).
  for (const char *mesh : {"dp=1", "dp=4"}) {
    INFO(mesh);
    Mesh m = meshOf(mesh);
    const MeshAxis &axis = m.axes()[0];
    for (Placement from : {Placement::replicate(), Placement::split(0)})
      CHECK(std::isinf(
          passes::axisReshardBytes(from, Placement::partial(), axis, 100)));
    if (axis.size == 1)
      CHECK(passes::axisReshardBytes(Placement::partial(),
                                     Placement::replicate(), axis, 100) == 0);
    ReshardCase c(mesh, sh("R"));
    CHECK(c.to(sh("P")) == Kinds{"<error>"});
  }
}

TEST_CASE("reshard: bytes per device") {
  Mesh m = meshOf("dp=4");
  const MeshAxis &axis = m.axes()[0];
  CHECK(passes::axisReshardBytes(Placement::partial(), Placement::replicate(),
                                 axis, 100) == doctest::Approx(150));
  CHECK(passes::axisReshardBytes(Placement::partial(), Placement::split(0),
                                 axis, 100) == doctest::Approx(75));
  CHECK(passes::axisReshardBytes(Placement::split(0), Placement::replicate(),
                                 axis, 25) == doctest::Approx(75));
  CHECK(passes::axisReshardBytes(Placement::replicate(), Placement::split(0),
                                 axis, 100) == 0);
  CHECK(std::isinf(passes::axisReshardBytes(Placement::replicate(),
                                            Placement::partial(), axis, 100)));
  TensorType t(DType::F32, {8, 4});
  CHECK(passes::reshardBytes(t, sh("S0"), sh("R"), m) ==
        doctest::Approx(3 * 2 * 4 * 4));
}
