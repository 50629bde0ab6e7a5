// The placement algebra of ir/Sharding.h: placements and shardings, the
// mesh text form and its errors, device coordinates and groups, the sizes of
// even, uneven and weighted parts, local types, and shardings in IR text.
#include "ir/Sharding.h"
#include "ir/Printer.h"
#include "ir/TextParser.h"

#include "llvm/Support/raw_ostream.h"

#include <doctest/doctest.h>

#include <numeric>
#include <string>
#include <vector>

using namespace mgc;
using namespace mgc::ir;

namespace {

using Ints = std::vector<int64_t>;

Mesh parseMesh(llvm::StringRef text) {
  std::string error;
  std::optional<Mesh> m = Mesh::parse(text, error);
  INFO(text.str() << ": " << error);
  REQUIRE(m);
  CHECK(error.empty());
  return *m;
}

std::string meshError(llvm::StringRef text) {
  std::string error;
  std::optional<Mesh> m = Mesh::parse(text, error);
  INFO(text.str());
  CHECK(!m);
  return error;
}

Ints sizes(int64_t n, const MeshAxis &axis) { return splitSizes(n, axis); }

std::unique_ptr<Module> parseText(llvm::StringRef text, std::string &diagOut) {
  llvm::raw_string_ostream os(diagOut);
  DiagnosticEngine diag(os);
  auto m = parseModuleText("t.mgir", text, diag);
  os.flush();
  return m;
}

} // namespace

TEST_CASE("sharding: placements print and parse") {
  CHECK(Placement::replicate().str() == "R");
  CHECK(Placement::partial().str() == "P");
  CHECK(Placement::split(3).str() == "S3");
  for (const char *text : {"R", "P", "S0", "S12"}) {
    std::optional<Placement> p = Placement::parse(text);
    REQUIRE(p);
    CHECK(p->str() == text);
  }
  for (const char *text : {"", "S", "Sx", "S-1", "Q", "r", "S1234", "RR"})
    CHECK_FALSE(Placement::parse(text));
  CHECK(Placement::split(1) == Placement::split(1));
  CHECK(Placement::split(1) != Placement::split(0));
  CHECK(Placement::split(0) != Placement::replicate());
  CHECK(Placement::partial() != Placement::replicate());
}

TEST_CASE("sharding: entries by axis") {
  Sharding s;
  CHECK(s.empty());
  CHECK(s.str() == "{}");
  CHECK(s.get("dp") == Placement::replicate());
  s.set("dp", Placement::split(0));
  s.set("tp", Placement::partial());
  CHECK(s.str() == "{dp=S0, tp=P}");
  s.set("dp", Placement::split(1));
  CHECK(s.str() == "{dp=S1, tp=P}");
  REQUIRE(s.find("tp"));
  CHECK(s.find("tp")->isPartial());
  CHECK(s.find("pp") == nullptr);
  CHECK(s.axisSplitting(1) == "dp");
  CHECK(s.axisSplitting(0).empty());
  CHECK(s.erase("dp"));
  CHECK_FALSE(s.erase("dp"));
  CHECK(s.str() == "{tp=P}");
  CHECK(Sharding{{"dp", Placement::split(0)}, {"tp", Placement::replicate()}}
            .str() == "{dp=S0, tp=R}");
}

TEST_CASE("sharding: mesh text round trip") {
  CHECK(parseMesh("dp=4").str() == "dp=4");
  CHECK(parseMesh("dp=2,tp=2").str() == "dp=2,tp=2");
  // The nesting order is dp then tp, whatever the order written.
  CHECK(parseMesh(" tp=3 , dp=2 ").str() == "dp=2,tp=3");
  CHECK(parseMesh("dp=2[3,1]").str() == "dp=2[3,1]");
  CHECK(parseMesh("dp=2[3,1],tp=2").str() == "dp=2[3,1],tp=2");
  // Equal weights are the even split.
  CHECK(parseMesh("dp=3[2,2,2]").str() == "dp=3");
  Mesh m = parseMesh("dp=2[3,1],tp=4");
  CHECK(parseMesh(m.str()) == m);
  CHECK(m.numDevices() == 8);
  CHECK(m.axisIndex("tp") == 1);
  CHECK(m.axisIndex("pp") == -1);
  REQUIRE(m.findAxis("dp"));
  CHECK(m.findAxis("dp")->weights == Ints{3, 1});
  CHECK(parseMesh("dp=1").isTrivial());
  CHECK_FALSE(parseMesh("dp=1,tp=2").isTrivial());
}

TEST_CASE("sharding: mesh text errors name the part that is wrong") {
  CHECK(meshError("sp=2") ==
        "unknown mesh axis 'sp' (expected one of pp, dp, tp)");
  CHECK(meshError("dp=0") ==
        "mesh axis 'dp' has size '0': expected an integer from 1 to 4096");
  CHECK(meshError("dp=two") ==
        "mesh axis 'dp' has size 'two': expected an integer from 1 to 4096");
  CHECK(meshError("dp=2,dp=2") == "mesh axis 'dp' is given twice");
  CHECK(meshError("dp=2[3,1,1]") ==
        "mesh axis 'dp' of size 2 has 3 weights: expected one per device");
  CHECK(meshError("dp=2[3,0]") ==
        "weight '0' of mesh axis 'dp': expected a positive integer");
  CHECK(meshError("dp=2[3,1") == "'dp=2[3,1': missing ']' after the weights");
  CHECK(meshError("dp") == "'dp': expected AXIS=SIZE, such as dp=4");
  CHECK(meshError("") == "empty mesh: expected axes such as dp=4 or dp=2,tp=2");
}

TEST_CASE("sharding: device coordinates and groups on dp=2,tp=3") {
  Mesh m = parseMesh("dp=2,tp=3");
  CHECK(m.numDevices() == 6);
  // The last axis varies fastest: a tp group is neighbouring devices.
  for (int64_t d = 0; d < 6; ++d) {
    llvm::SmallVector<int64_t, 4> c = m.coords(d);
    REQUIRE(c.size() == 2);
    CHECK(c[0] == d / 3);
    CHECK(c[1] == d % 3);
    CHECK(m.deviceAt(c) == d);
  }
  CHECK(m.group(4, "tp") == Ints{3, 4, 5});
  CHECK(m.group(4, "dp") == Ints{1, 4});
  CHECK(m.group(0, "dp") == Ints{0, 3});
  CHECK(m.group(2, "pp") == Ints{2});
}

TEST_CASE("sharding: part sizes and offsets") {
  MeshAxis two{"dp", 2, {}}, three{"dp", 3, {}}, weighted{"dp", 2, {3, 1}};
  CHECK(sizes(8, two) == Ints{4, 4});
  CHECK(sizes(7, three) == Ints{3, 2, 2});
  CHECK(sizes(9, three) == Ints{3, 3, 3});
  CHECK(sizes(8, weighted) == Ints{6, 2});
  // 7 * 3/4 = 5.25 and 7 * 1/4 = 1.75: the larger remainder gets the rest.
  CHECK(sizes(7, weighted) == Ints{5, 2});
  // Ties go to the lower coordinate.
  CHECK(sizes(2, weighted) == Ints{2, 0});
  CHECK(sizes(2, three) == Ints{1, 1, 0});
  MeshAxis uneven{"dp", 3, {1, 2, 3}};
  CHECK(sizes(12, uneven) == Ints{2, 4, 6});
  CHECK(sizes(13, uneven) == Ints{2, 4, 7});
  for (int64_t n = 0; n < 40; ++n)
    for (const MeshAxis &a : {two, three, weighted, uneven}) {
      Ints s = sizes(n, a);
      CHECK(std::accumulate(s.begin(), s.end(), int64_t(0)) == n);
    }
  CHECK(splitOffset(7, three, 0) == 0);
  CHECK(splitOffset(7, three, 1) == 3);
  CHECK(splitOffset(7, three, 2) == 5);
  CHECK(splitOffset(7, three, 3) == 7);
  CHECK(splitOffset(8, weighted, 1) == 6);
}

TEST_CASE("sharding: local types") {
  Mesh m = parseMesh("dp=3,tp=2[3,1]");
  TensorType t(DType::F32, {7, 8, 5});
  Sharding s{{"dp", Placement::split(0)}, {"tp", Placement::split(1)}};
  CHECK(localType(t, s, m, {0, 0}) == TensorType(DType::F32, {3, 6, 5}));
  CHECK(localType(t, s, m, {2, 1}) == TensorType(DType::F32, {2, 2, 5}));
  // Replicated, partial and unlisted axes keep the whole dimension.
  Sharding p{{"dp", Placement::partial()}};
  CHECK(localType(t, p, m, {1, 1}) == t);
  CHECK(localType(t, Sharding{}, m, {1, 0}) == t);
  CHECK(localType(t, Sharding{{"tp", Placement::split(2)}}, m, {0, 1}) ==
        TensorType(DType::F32, {7, 8, 1}));
}

TEST_CASE("sharding: placements in IR text round trip") {
  const char *text = R"(module @m {
  input %x : f32[8, 4] {dp=S0}
  param %w : f32[4, 6] {tp=S1} = zeros
  %0 = matmul(%x, %w) : f32[8, 6] {dp=S0, tp=S1}
  %1 = sum(%0) {axes = [0], keepdims = false} : f32[6] {dp=P, tp=R}
  output y = %1
}
)";
  std::string diagText;
  auto m = parseText(text, diagText);
  INFO(diagText);
  REQUIRE(m);
  CHECK(printModuleToString(*m) == text);
  Value *w = m->graph().findArgument("w");
  REQUIRE(w);
  CHECK(w->sharding().get("tp") == Placement::split(1));
  CHECK(w->sharding().find("dp") == nullptr);
  const Value *sum = m->graph().outputs().front().value;
  CHECK(sum->sharding().str() == "{dp=P, tp=R}");
}

TEST_CASE("sharding: IR text errors in a placement") {
  std::string diagText;
  CHECK_FALSE(parseText(R"(module @m {
  input %x : f32[8, 4] {dp=Q}
  output y = %x
}
)",
                        diagText));
  CHECK(diagText.find("expected placement R, P or S<dim> (such as S0)") !=
        std::string::npos);
  CHECK(diagText.find("t.mgir:2:") != std::string::npos);

  diagText.clear();
  CHECK_FALSE(parseText(R"(module @m {
  input %x : f32[8, 4]
  %0 = neg(%x) : f32[8, 4] {dp=S0, dp=R}
  output y = %0
}
)",
                        diagText));
  CHECK(diagText.find("mesh axis 'dp' appears twice in the sharding") !=
        std::string::npos);
  CHECK(diagText.find("t.mgir:3:") != std::string::npos);
}
