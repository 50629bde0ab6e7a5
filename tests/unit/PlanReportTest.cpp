// The partition plan report on the hand-written examples of
// PlanReportExamples.h: shard shapes, bytes per device, collectives and
// their bytes, phases and gradients, the table, the JSON and the Graphviz
// output.
#include "PlanReportExamples.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Program.h"

#include <doctest/doctest.h>

#include <map>
#include <set>
#include <string>

namespace mgc::backend {
namespace {

using namespace plantest;

const PlanParam &param(const PlanReport &r, llvm::StringRef name) {
  for (const PlanParam &p : r.params)
    if (p.name == name)
      return p;
  FAIL("no parameter " << name.str());
  return r.params.front();
}

std::string tableOf(const PlanReport &r) {
  std::string s;
  llvm::raw_string_ostream os(s);
  printPlan(r, os);
  return os.str();
}

// --- The model ---------------------------------------------------------------

TEST_CASE("PlanReport: byte formulas and units") {
  using ir::OpKind;
  // all_reduce 2(n-1)/n of the local tensor; the others (n-1)/n of the
  // whole (all_to_all: of the local tensor, which is 1/n of the whole).
  CHECK(commBytes(OpKind::AllReduce, 2, 1000, 1000) == 1000);
  CHECK(commBytes(OpKind::AllReduce, 4, 1000, 1000) == 1500);
  CHECK(commBytes(OpKind::AllReduce, 8, 800, 800) == 1400);
  CHECK(commBytes(OpKind::ReduceScatter, 4, 1000, 250) == 750);
  CHECK(commBytes(OpKind::AllGather, 4, 250, 1000) == 750);
  CHECK(commBytes(OpKind::AllToAll, 4, 1000, 1000) == 750);
  CHECK(commBytes(OpKind::LocalSplit, 4, 1000, 250) == 0);
  CHECK(commBytes(OpKind::AllReduce, 1, 1000, 1000) == 0);
  // No overflow on the product.
  CHECK(commBytes(OpKind::AllReduce, 2, uint64_t(1) << 62, uint64_t(1) << 62) ==
        uint64_t(1) << 62);

  CHECK(formatBytes(0) == "0 B");
  CHECK(formatBytes(1023) == "1023 B");
  CHECK(formatBytes(1024) == "1.0 KiB");
  CHECK(formatBytes(1536) == "1.5 KiB");
  CHECK(formatBytes(3 * 1024 * 1024) == "3.0 MiB");
  CHECK(formatBytes(1024 * 1024 - 1) == "1.0 MiB");
  CHECK(formatBytes(uint64_t(5) << 30) == "5.0 GiB");

  CHECK(formatDeviceList({}) == "");
  CHECK(formatDeviceList({3}) == "3");
  CHECK(formatDeviceList({0, 1}) == "0,1");
  CHECK(formatDeviceList({0, 1, 2, 3, 6, 8, 9}) == "0-3,6,8,9");
}

TEST_CASE("PlanReport: data parallel MLP") {
  Example e = dpExample();
  PlanReport r = e.report();
  CHECK(r.notes.empty());
  CHECK(r.moduleName == "mlp");
  CHECK(r.mesh.str() == "dp=2");
  CHECK(r.numPrograms == 1);

  REQUIRE(r.params.size() == 2);
  const PlanParam &w = param(r, "w");
  CHECK(w.logical.str() == "f32[4, 3]");
  CHECK(w.sharding.str() == "{dp=R}");
  REQUIRE(w.shards.size() == 1);
  CHECK(w.shards[0].str() == "f32[4, 3]");
  CHECK(w.shardOfDevice == std::vector<size_t>{0, 0});

  // The loss and both gradients.
  REQUIRE(r.comms.size() == 3);
  CHECK(r.numCollectives() == 3);
  const PlanComm &loss = r.comms[0], &gw = r.comms[1], &gb = r.comms[2];
  CHECK(loss.opIndex == 4);
  CHECK(loss.kind == ir::OpKind::AllReduce);
  CHECK(loss.axis == "dp");
  CHECK(loss.groupSize == 2);
  CHECK(loss.from.str() == "P");
  CHECK(loss.to.str() == "R");
  CHECK(loss.phase == PlanPhase::Forward);
  CHECK(loss.producer == "cross_entropy %3");
  CHECK(loss.gradientsOf.empty());
  CHECK(loss.bytesByDevice == std::vector<uint64_t>{4, 4});

  CHECK(gw.opIndex == 10);
  CHECK(gw.phase == PlanPhase::Backward);
  CHECK(gw.gradientsOf == std::vector<std::string>{"w"});
  CHECK(gw.producer == "matmul %9");
  CHECK(gw.producerScope == "head");
  CHECK(gw.stream() == "comm");
  CHECK(gw.logical.str() == "f32[4, 3]");
  // 2(n-1)/n * 48 bytes with n = 2.
  CHECK(gw.bytesByDevice == std::vector<uint64_t>{48, 48});
  CHECK(gb.gradientsOf == std::vector<std::string>{"b"});
  CHECK(gb.producer == "sum %7");
  CHECK(gb.maxBytes() == 12);

  REQUIRE(r.devices.size() == 2);
  for (const PlanDeviceMemory &m : r.devices) {
    CHECK(m.program == 0);
    CHECK(m.paramBytes == 48 + 12);
    CHECK(m.stateBytes == 48 + 12);
    CHECK(m.inputBytes == 4 * 4 * 4 + 4 * 4); // half the batch
    REQUIRE(m.arenaPeak);
    CHECK(*m.arenaPeak == e.exes[0]->plan.peak);
    CHECK(*m.arenaPeak > 0);
    CHECK(m.total() == 60 + 60 + 80 + *m.arenaPeak);
    CHECK(m.commBytes == 4 + 48 + 12);
  }
  CHECK(r.maxCommBytesPerDevice() == 64);
}

TEST_CASE("PlanReport: the same module on dp=4 moves more per device") {
  // Only the mesh changes: the bytes follow 2(n-1)/n.
  std::string text = kDpSharded;
  text.replace(text.find("dp=2"), 4, "dp=4");
  Example e;
  e.sharded = parse(text);
  std::string error;
  e.programs.mesh = *ir::Mesh::parse("dp=4", error);
  PlanReport r = buildPlanReport(*e.sharded, e.programs, {});
  REQUIRE(r.comms.size() == 3);
  CHECK(r.comms[1].bytesByDevice == std::vector<uint64_t>(4, 72)); // 48*3/2
  // Without programs the shards come from the placements, and the report
  // says what is missing.
  CHECK(param(r, "w").shards[0].str() == "f32[4, 3]");
  CHECK(!r.notes.empty());
  REQUIRE(r.devices.size() == 4);
  CHECK(!r.devices[0].arenaPeak);
  CHECK(r.devices[0].commBytes == 6 + 72 + 18);
}

// A mesh of more devices than any run can hold is refused where it is
// parsed (ir::kMaxMeshDevices), so no report is ever asked for one.
TEST_CASE("PlanReport: a mesh beyond the device limit cannot be made") {
  std::string error;
  CHECK(!ir::Mesh::parse("dp=4096,tp=32", error));
  CHECK(error == "the mesh has 131072 devices: at most 4096 together");
  CHECK(ir::Mesh::parse("dp=64,tp=64", error));
}

TEST_CASE("PlanReport: a bucket of fused gradients names each gradient") {
  // The gradients of b and c (same type) all-reduced over dp one by one,
  // then flattened, joined, all-reduced over tp once and cut back, as the
  // bucket pass does. Each member must lead to its own parameter only.
  auto m = parse(R"(
module @bucket attributes {mesh = "dp=2,tp=2"} {
  input %x : f32[8, 4] {dp=S0, tp=R}
  input %y : i32[8] {dp=S0, tp=R}
  param %w : f32[4, 3] {dp=R, tp=R} = normal(0.0, 0.02)
  param %b : f32[3] {dp=R, tp=R} = zeros
  param %c : f32[3] {dp=R, tp=R} = zeros
  %0 = matmul(%x, %w) : f32[8, 3] {dp=S0, tp=R}
  %1 = broadcast(%b) {shape = [8, 3]} : f32[8, 3] {dp=S0, tp=R}
  %2 = broadcast(%c) {shape = [8, 3]} : f32[8, 3] {dp=S0, tp=R}
  %3 = add(%0, %1) : f32[8, 3] {dp=S0, tp=R}
  %4 = add(%3, %2) : f32[8, 3] {dp=S0, tp=R}
  %5 = cross_entropy(%4, %y) : f32[] {dp=P, tp=R}
  %6 = all_reduce(%5) {axis = "dp"} : f32[] {dp=R, tp=R}
  %7 = constant() {dtype = "f32", value = 1.0} : f32[] {dp=R, tp=R}
  %8 = cross_entropy_grad(%7, %4, %y) : f32[8, 3] {dp=S0, tp=R}
  %9 = sum(%8) {axes = [0], keepdims = false} : f32[3] {dp=P, tp=P}
  %10 = sum(%8) {axes = [0], keepdims = false} : f32[3] {dp=P, tp=P}
  %11 = all_reduce(%9) {axis = "dp"} : f32[3] {dp=R, tp=P}
  %12 = all_reduce(%10) {axis = "dp"} : f32[3] {dp=R, tp=P}
  %13 = reshape(%11) {shape = [3]} : f32[3] {dp=R, tp=P}
  %14 = reshape(%12) {shape = [3]} : f32[3] {dp=R, tp=P}
  %15 = concat(%13, %14) {axis = 0} : f32[6] {dp=R, tp=P}
  %16 = all_reduce(%15) {axis = "tp"} : f32[6] {dp=R, tp=R}
  %17 = slice(%16) {axis = 0, end = 3, start = 0} : f32[3] {dp=R, tp=R}
  %18 = reshape(%17) {shape = [3]} : f32[3] {dp=R, tp=R}
  %19 = slice(%16) {axis = 0, end = 6, start = 3} : f32[3] {dp=R, tp=R}
  %20 = reshape(%19) {shape = [3]} : f32[3] {dp=R, tp=R}
  %21 = sub(%b, %18) : f32[3] {dp=R, tp=R}
  %22 = sub(%c, %20) : f32[3] {dp=R, tp=R}
  output loss = %6 [loss]
  update %b = %21
  update %c = %22
}
)");
  passes::DevicePrograms none;
  std::string error;
  none.mesh = *ir::Mesh::parse("dp=2,tp=2", error);
  PlanReport r = buildPlanReport(*m, none, {});
  REQUIRE(r.comms.size() == 4);
  CHECK(r.comms[1].gradientsOf == std::vector<std::string>{"b"});
  CHECK(r.comms[2].gradientsOf == std::vector<std::string>{"c"});
  CHECK(r.comms[1].bytesByDevice == std::vector<uint64_t>(4, 12));
  const PlanComm &bucket = r.comms[3];
  CHECK(bucket.axis == "tp");
  CHECK(bucket.producer == "concat %15");
  CHECK(bucket.gradientsOf == std::vector<std::string>{"b", "c"});
  CHECK(bucket.bytesByDevice == std::vector<uint64_t>(4, 24));
  CHECK(tableOf(r).find("gradients of 2 params: b, c (concat %15)") !=
        std::string::npos);
}

TEST_CASE("PlanReport: tensor parallel MLP with an uneven split") {
  Example e = tpExample();
  PlanReport r = e.report();
  CHECK(r.notes.empty());
  CHECK(r.numPrograms == 2);

  const PlanParam &w1 = param(r, "w1");
  CHECK(w1.sharding.str() == "{tp=S1}");
  REQUIRE(w1.shards.size() == 2);
  CHECK(w1.shards[0].str() == "f32[4, 3]");
  CHECK(w1.shards[1].str() == "f32[4, 2]");
  CHECK(w1.shardOfDevice == std::vector<size_t>{0, 1});
  const PlanParam &w2 = param(r, "w2");
  REQUIRE(w2.shards.size() == 2);
  CHECK(w2.shards[1].str() == "f32[2, 3]");

  REQUIRE(r.comms.size() == 2);
  const PlanComm &fwd = r.comms[0], &gather = r.comms[1];
  CHECK(fwd.kind == ir::OpKind::AllReduce);
  CHECK(fwd.phase == PlanPhase::Forward);
  CHECK(fwd.scope == "mlp");
  CHECK(fwd.producer == "matmul %4");
  // The whole [8, 3] partial sum on each device: 96 bytes, times 2(n-1)/n.
  CHECK(fwd.bytesByDevice == std::vector<uint64_t>{96, 96});
  CHECK(gather.kind == ir::OpKind::AllGather);
  CHECK(gather.from.str() == "S1");
  CHECK(gather.to.str() == "R");
  CHECK(gather.phase == PlanPhase::Backward);
  // (n-1)/n of the gathered [4, 5]: 40 bytes.
  CHECK(gather.bytesByDevice == std::vector<uint64_t>{40, 40});
  // Gathered for a norm, not for the update: not claimed as w1's gradient.
  CHECK(gather.gradientsOf.empty());

  REQUIRE(r.devices.size() == 2);
  CHECK(r.devices[0].paramBytes == (12 + 3 + 9) * 4);
  CHECK(r.devices[1].paramBytes == (8 + 2 + 6) * 4);
  CHECK(r.devices[0].program == 0);
  CHECK(r.devices[1].program == 1);
  REQUIRE(r.devices[1].arenaPeak);
  CHECK(*r.devices[0].arenaPeak == e.exes[0]->plan.peak);
  CHECK(*r.devices[1].arenaPeak == e.exes[1]->plan.peak);
  CHECK(r.devices[0].commBytes == 136);
}

TEST_CASE("PlanReport: dp x tp with reduce-scatter, local split, gather") {
  Example e = meshExample();
  PlanReport r = e.report();
  CHECK(r.notes.empty());
  CHECK(r.mesh.numDevices() == 4);
  CHECK(param(r, "w1").shards[0].str() == "f32[4, 3]");
  CHECK(param(r, "w2").shards[0].str() == "f32[3, 4]");
  CHECK(param(r, "w2").shardOfDevice == std::vector<size_t>{0, 0, 0, 0});

  REQUIRE(r.comms.size() == 6);
  CHECK(r.numCollectives() == 5);
  std::vector<std::string> kinds;
  for (const PlanComm &c : r.comms)
    kinds.push_back(ir::opName(c.kind).str() + "@" + c.axis + ":" +
                    std::string(planPhaseName(c.phase)) + ":" +
                    std::to_string(c.maxBytes()));
  CHECK(kinds == std::vector<std::string>{
                     "all_reduce@tp:forward:64", "all_reduce@dp:forward:4",
                     "reduce_scatter@dp:backward:24",
                     "all_reduce@dp:backward:48", "local_split@dp:optimizer:0",
                     "all_gather@dp:optimizer:24"});
  const PlanComm &rs = r.comms[2], &split = r.comms[4], &gather = r.comms[5];
  CHECK(rs.from.str() == "P");
  CHECK(rs.to.str() == "S1");
  CHECK(rs.gradientsOf == std::vector<std::string>{"w2"});
  CHECK(r.comms[3].gradientsOf == std::vector<std::string>{"w1"});
  CHECK(split.stream() == "compute");
  CHECK(split.producer == "param w2");
  CHECK(gather.updateOf == "w2");
  CHECK(gather.gradientsOf.empty());

  for (const PlanDeviceMemory &m : r.devices) {
    CHECK(m.paramBytes == 96);
    CHECK(m.stateBytes == 4);
    CHECK(m.inputBytes == 80);
    CHECK(m.commBytes == 64 + 4 + 24 + 48 + 24);
  }
}

TEST_CASE("PlanReport: inconsistent inputs give notes, not crashes") {
  Example e = dpExample();
  // A device without a program, no executables, and a collective on an
  // axis the mesh lacks.
  e.programs.programOf = {0};
  std::string text = kDpSharded;
  text.replace(text.find("all_reduce(%9) {axis = \"dp\"}"), 28,
               "all_reduce(%9) {axis = \"tp\"}");
  auto sharded = parse(text);
  PlanReport r = buildPlanReport(*sharded, e.programs, {});
  CHECK(r.notes.size() >= 3);
  REQUIRE(r.devices.size() == 2);
  CHECK(r.devices[1].paramBytes == 0);
  REQUIRE(r.comms.size() == 3);
  CHECK(r.comms[1].groupSize == 1);
  CHECK(r.comms[1].maxBytes() == 0);
  std::string table = tableOf(r);
  CHECK(table.find("Notes:") != std::string::npos);
  CHECK(table.find("axis 'tp'") != std::string::npos);
}

// --- The table ---------------------------------------------------------------

TEST_CASE("PlanReport: the table") {
  PlanReport r = tpExample().report();
  std::string table = tableOf(r);
  INFO(table);
  CHECK(llvm::StringRef(table).startswith(
      "Plan of @tp on mesh tp=2: 2 devices, 2 programs\n"));
  CHECK(table.find("Parameters: 3, ") != std::string::npos);
  CHECK(table.find("f32[4, 3] on 0; f32[4, 2] on 1") != std::string::npos);
  CHECK(table.find("Communication: 2 collectives") != std::string::npos);
  CHECK(table.find("Memory per device") != std::string::npos);
  CHECK(table.find("Summary: 2 collectives, 136 B moved per device per "
                   "step") != std::string::npos);

  // Columns line up: every row of a section starts its columns where the
  // header's do.
  llvm::SmallVector<llvm::StringRef> lines;
  llvm::StringRef(table).split(lines, '\n');
  size_t header = 0;
  for (size_t i = 0; i < lines.size(); ++i)
    if (lines[i].startswith("  device"))
      header = i;
  REQUIRE(header > 0);
  size_t col = lines[header].find("arena peak");
  REQUIRE(col != std::string::npos);
  // Right-aligned numbers end where the header ends.
  size_t end = col + std::string("arena peak").size();
  for (size_t i = header + 1; i <= header + 2; ++i) {
    REQUIRE(lines[i].size() > end);
    CHECK(lines[i][end - 1] == 'B');
    CHECK(lines[i][end] == ' ');
  }
  // No line ends in a blank.
  for (llvm::StringRef l : lines)
    CHECK(l == l.rtrim());
}

TEST_CASE("PlanReport: the table names gradients and units") {
  std::string table = tableOf(dpExample().report());
  INFO(table);
  CHECK(table.find("gradient of w (matmul %9)") != std::string::npos);
  CHECK(table.find("P -> R") != std::string::npos);
  CHECK(table.find("backward") != std::string::npos);
  CHECK(table.find("Summary: 3 collectives, 64 B moved") != std::string::npos);
  std::string mesh = tableOf(meshExample().report());
  CHECK(mesh.find("1 local split") != std::string::npos);
  CHECK(mesh.find("new value of w2") != std::string::npos);
  CHECK(mesh.find("dp=1,tp=0") != std::string::npos);
}

// --- JSON --------------------------------------------------------------------

int64_t num(const llvm::json::Object *o, llvm::StringRef key) {
  return o ? o->getInteger(key).getValueOr(-1) : -1;
}

llvm::json::Value jsonOf(const PlanReport &r) {
  std::string s;
  llvm::raw_string_ostream os(s);
  printPlanJson(r, os);
  auto v = llvm::json::parse(os.str());
  if (!v)
    FAIL("not JSON: " << llvm::toString(v.takeError()) << "\n" << s);
  return std::move(*v);
}

TEST_CASE("PlanReport: JSON has the table's content") {
  llvm::json::Value v = jsonOf(meshExample().report());
  const llvm::json::Object *root = v.getAsObject();
  REQUIRE(root);
  for (const char *key :
       {"format", "version", "module", "mesh", "programs", "parameters",
        "communication", "devices", "summary", "notes"})
    CHECK_MESSAGE(root->get(key), key);
  CHECK(root->getString("format") == llvm::StringRef("mgc-plan"));
  CHECK(root->getString("module") == llvm::StringRef("mlp2d"));
  CHECK(root->getObject("mesh")->getString("text") ==
        llvm::StringRef("dp=2,tp=2"));
  CHECK(num(root->getObject("mesh"), "devices") == 4);

  const llvm::json::Array *params = root->getArray("parameters");
  REQUIRE(params);
  REQUIRE(params->size() == 2);
  const llvm::json::Object *w2 = (*params)[1].getAsObject();
  CHECK(w2->getString("name") == llvm::StringRef("w2"));
  CHECK(w2->getString("type") == llvm::StringRef("f32[6, 4]"));
  CHECK(num(w2, "bytes") == 96);
  CHECK(w2->getObject("sharding")->getString("tp") == llvm::StringRef("S0"));
  const llvm::json::Array *shards = w2->getArray("shards");
  REQUIRE(shards->size() == 1);
  CHECK((*shards)[0].getAsObject()->getString("type") ==
        llvm::StringRef("f32[3, 4]"));
  CHECK((*shards)[0].getAsObject()->getArray("devices")->size() == 4);

  const llvm::json::Array *comms = root->getArray("communication");
  REQUIRE(comms->size() == 6);
  const llvm::json::Object *rs = (*comms)[2].getAsObject();
  CHECK(rs->getString("kind") == llvm::StringRef("reduce_scatter"));
  CHECK(rs->getString("axis") == llvm::StringRef("dp"));
  CHECK(num(rs, "group_size") == 2);
  CHECK(rs->getString("from") == llvm::StringRef("P"));
  CHECK(rs->getString("to") == llvm::StringRef("S1"));
  CHECK(rs->getString("phase") == llvm::StringRef("backward"));
  CHECK(rs->getString("stream") == llvm::StringRef("comm"));
  REQUIRE(rs->getArray("gradients_of"));
  REQUIRE(rs->getArray("gradients_of")->size() == 1);
  CHECK((*rs->getArray("gradients_of"))[0].getAsString() ==
        llvm::StringRef("w2"));
  CHECK(rs->get("update_of")->getAsNull());
  CHECK(num(rs, "op") == 10);
  CHECK(num(rs, "bytes_per_device") == 24);
  CHECK(rs->getArray("bytes_by_device")->size() == 4);
  CHECK((*comms)[4].getAsObject()->getString("stream") ==
        llvm::StringRef("compute"));

  const llvm::json::Array *devices = root->getArray("devices");
  REQUIRE(devices->size() == 4);
  const llvm::json::Object *d3 = (*devices)[3].getAsObject();
  CHECK(num(d3, "device") == 3);
  CHECK(num(d3->getObject("coords"), "dp") == 1);
  CHECK(num(d3->getObject("coords"), "tp") == 1);
  CHECK(num(d3, "parameter_bytes") == 96);
  CHECK(num(d3, "optimizer_state_bytes") == 4);
  CHECK(num(d3, "input_bytes") == 80);
  CHECK(num(d3, "arena_peak_bytes") > 0);
  CHECK(num(d3, "total_bytes") == 96 + 4 + 80 + num(d3, "arena_peak_bytes"));
  CHECK(num(d3, "comm_bytes_per_step") == 164);

  const llvm::json::Object *summary = root->getObject("summary");
  CHECK(num(summary, "collectives") == 5);
  CHECK(num(summary, "local_splits") == 1);
  CHECK(num(summary, "comm_bytes_per_device_per_step") == 164);
  CHECK(root->getArray("notes")->empty());
}

TEST_CASE("PlanReport: JSON of an unknown arena peak and odd names") {
  Example e = dpExample();
  PlanReport r = buildPlanReport(*e.sharded, e.programs, {});
  r.params[0].name = "bad\xff name";
  llvm::json::Value v = jsonOf(r);
  const llvm::json::Object *d0 =
      (*v.getAsObject()->getArray("devices"))[0].getAsObject();
  CHECK(d0->get("arena_peak_bytes")->getAsNull());
  CHECK(!v.getAsObject()->getArray("notes")->empty());
}

// --- Graphviz ----------------------------------------------------------------

std::string dotOf(const Example &e) {
  std::string s;
  llvm::raw_string_ostream os(s);
  printPlanDot(*e.sharded, e.programs, os);
  return os.str();
}

// The DOT text, checked by hand: braces balance outside strings, every
// edge joins declared nodes. Returns the edges (dashed ones marked).
struct DotFacts {
  std::set<std::string> nodes;
  std::vector<std::pair<std::string, std::string>> edges, dashed;
  int clusters = 0;
};

DotFacts checkDot(const std::string &dot) {
  DotFacts f;
  int depth = 0;
  bool inString = false;
  for (size_t i = 0; i < dot.size(); ++i) {
    char c = dot[i];
    if (inString) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"')
      inString = true;
    else if (c == '{')
      ++depth;
    else if (c == '}')
      CHECK(--depth >= 0);
  }
  CHECK(depth == 0);
  CHECK(!inString);
  llvm::SmallVector<llvm::StringRef> lines;
  llvm::StringRef(dot).split(lines, '\n');
  for (llvm::StringRef l : lines) {
    l = l.trim();
    if (l.startswith("subgraph cluster_"))
      ++f.clusters;
    if (!l.startswith("d") || !l.endswith(";"))
      continue;
    auto [head, rest] = l.split(' ');
    if (rest.startswith("-> ")) {
      llvm::StringRef to = rest.drop_front(3).split(' ').first;
      to = to.rtrim(';');
      (rest.contains("style=dashed") ? f.dashed : f.edges)
          .push_back({head.str(), to.str()});
    } else if (rest.startswith("[")) {
      CHECK_MESSAGE(f.nodes.insert(head.str()).second, head.str());
    }
  }
  for (const auto &[a, b] : f.edges) {
    CHECK_MESSAGE(f.nodes.count(a), a);
    CHECK_MESSAGE(f.nodes.count(b), b);
  }
  for (const auto &[a, b] : f.dashed) {
    CHECK_MESSAGE(f.nodes.count(a), a);
    CHECK_MESSAGE(f.nodes.count(b), b);
  }
  return f;
}

TEST_CASE("PlanReport: Graphviz of a dp x tp step") {
  Example e = meshExample();
  std::string dot = dotOf(e);
  INFO(dot);
  CHECK(llvm::StringRef(dot).startswith("digraph plan {"));
  DotFacts f = checkDot(dot);
  // Four devices share one program but each has its own cluster.
  CHECK(f.clusters == 4);
  CHECK(dot.find("subgraph cluster_dev3 {") != std::string::npos);
  CHECK(dot.find("label=\"device 2 (dp=1,tp=0), program 0\"") !=
        std::string::npos);
  // Per device: 5 arguments and 26 ops, each declared once.
  CHECK(f.nodes.size() == 4 * (5 + 26));
  // Each of the 5 collectives joins two pairs of devices: (0,1) and (2,3)
  // on tp, (0,2) and (1,3) on dp.
  CHECK(f.dashed.size() == 5 * 2);
  std::set<std::pair<std::string, std::string>> dashed(f.dashed.begin(),
                                                       f.dashed.end());
  CHECK(dashed.count({"d0_n3", "d1_n3"})); // tp all_reduce
  CHECK(dashed.count({"d2_n3", "d3_n3"}));
  CHECK(dashed.count({"d0_n10", "d2_n10"}));  // dp reduce_scatter
  CHECK(dashed.count({"d1_n22", "d3_n22"}));  // dp all_gather
  CHECK(!dashed.count({"d0_n18", "d2_n18"})); // a local split moves nothing
  // Communication ops stand out; the local split in its own colour.
  CHECK(dot.find("d0_n10 [label=\"reduce_scatter dp\\nf32[3, 2]\", "
                 "shape=hexagon") != std::string::npos);
  CHECK(dot.find("d0_n18 [label=\"local_split dp\\nf32[3, 2]\", shape=box, "
                 "style=\"filled,bold\"") != std::string::npos);
  CHECK(dot.find("tooltip=\"logical f32[6, 4] {dp=P, tp=S0} -> {dp=S1, "
                 "tp=S0}\"") != std::string::npos);
  CHECK(dot.find("d0_n0 [label=\"matmul\\nf32[4, 3]\"]") != std::string::npos);
}

TEST_CASE("PlanReport: Graphviz of some devices, without arguments") {
  Example e = meshExample();
  std::string s;
  llvm::raw_string_ostream os(s);
  PlanDotOptions options;
  options.devices = {0, 2};
  options.arguments = false;
  printPlanDot(*e.sharded, e.programs, os, options);
  DotFacts f = checkDot(os.str());
  CHECK(f.clusters == 2);
  CHECK(f.nodes.size() == 2 * 26);
  CHECK(s.find("cluster_dev1") == std::string::npos);
  // Devices 0 and 2 form a dp group: its four collectives are joined; the
  // tp partners are not drawn.
  CHECK(f.dashed.size() == 4);
}

TEST_CASE("PlanReport: Graphviz with uneven programs, run through dot") {
  Example e = tpExample();
  std::string dot = dotOf(e);
  DotFacts f = checkDot(dot);
  CHECK(f.clusters == 2);
  CHECK(f.dashed.size() == 2);
  CHECK(dot.find("d1_n0 [label=\"matmul\\nf32[8, 2]\"]") != std::string::npos);
  CHECK(dot.find("label=\"device 1 (tp=1), program 1\"") != std::string::npos);

  // A broken input (a device whose program index is out of range) still
  // gives valid DOT.
  e.programs.programOf = {0, 7};
  std::string broken = dotOf(e);
  DotFacts g = checkDot(broken);
  CHECK(g.clusters == 2);
  CHECK(g.dashed.empty());
  CHECK(broken.find("no program") != std::string::npos);

  // When Graphviz is installed, it must accept both.
  auto dotExe = llvm::sys::findProgramByName("dot");
  if (!dotExe)
    return;
  for (const std::string &text : {dot, broken}) {
    llvm::SmallString<128> in, out;
    REQUIRE(!llvm::sys::fs::createTemporaryFile("plan", "dot", in));
    REQUIRE(!llvm::sys::fs::createTemporaryFile("plan", "svg", out));
    {
      std::error_code ec;
      llvm::raw_fd_ostream os(in, ec);
      REQUIRE(!ec);
      os << text;
    }
    std::string inS(in.str()), outS(out.str());
    llvm::StringRef args[] = {*dotExe, "-Tsvg", inS, "-o", outS};
    int rc = llvm::sys::ExecuteAndWait(*dotExe, args);
    CHECK(rc == 0);
    uint64_t size = 0;
    CHECK(!llvm::sys::fs::file_size(outS, size));
    CHECK(size > 0);
    llvm::sys::fs::remove(in);
    llvm::sys::fs::remove(out);
  }
}

} // namespace
} // namespace mgc::backend
