// The mesh executor on device programs with communication: results against
// the interpreter on the logical computation (dp, dp x tp, uneven parts),
// compute that goes on while a collective is pending, an error on one
// device that stops every device (no hang) and leaves the next run
// working, the trace and its Chrome JSON, determinism.
#include "MeshTestSupport.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstdio>
#include <map>
#include <set>
#include <unistd.h>

namespace mgc::backend::testing {
namespace {

// Device program of dp=2: each device multiplies its rows, then the column
// sums of all rows are all-reduced (a partial sum made whole).
const char *kDataParallel = R"(module @dev {
  input %x : f32[2, 3]
  param %w : f32[3, 5] = zeros
  %h = matmul(%x, %w) : f32[2, 5] scope "layer"
  %p = sum(%h) {axes = [0], keepdims = false} : f32[5]
  %r = all_reduce(%p) {axis = "dp"} : f32[5]
  output h = %h
  output s = %r
})";

const char *kDataParallelLogical = R"(module @logical {
  input %x : f32[4, 3]
  param %w : f32[3, 5] = zeros
  %h = matmul(%x, %w) : f32[4, 5]
  %s = sum(%h) {axes = [0], keepdims = false} : f32[5]
  output h = %h
  output s = %s
})";

struct DataParallelCase {
  ir::TensorMap logical;
  std::vector<NamedTensors> args;
};

DataParallelCase dataParallelCase(uint64_t seed) {
  DataParallelCase c;
  c.logical = {{"x", randomHost(f32({4, 3}), seed)},
               {"w", randomHost(f32({3, 5}), seed + 1)}};
  for (int d = 0; d < 2; ++d)
    c.args.push_back(toTensors(
        {{"x", rows(c.logical.at("x"), 2 * d, 2)}, {"w", c.logical.at("w")}}));
  return c;
}

TEST_CASE("Mesh communication: dp=2 all-reduces a partial sum") {
  auto exe = build(kDataParallel);
  DataParallelCase c = dataParallelCase(3);
  ir::TensorMap want = interpret(kDataParallelLogical, c.logical);
  Runner r(meshOf("dp=2"), {exe.get(), exe.get()});
  std::vector<RunResult> got = r.run(c.args);
  for (int d = 0; d < 2; ++d) {
    INFO("device " << d);
    compareTensors(got[d].outputs.at("h"), rows(want.at("h"), 2 * d, 2), kTol,
                   "h");
    compareTensors(got[d].outputs.at("s"), want.at("s"), kTol, "s");
  }
  // Replicas of an all-reduce are bit-identical.
  CHECK(bitIdentical(got[0].outputs.at("s"), got[1].outputs.at("s")));
}

TEST_CASE("Mesh communication: compute independent of a pending collective "
          "goes on and every result is right") {
  // r and g are issued to the communication queue; a, b, c, d run on the
  // compute queue meanwhile; e waits for r, f for nothing pending.
  auto exe = build(R"(module @dev {
  input %x : f32[16, 32]
  param %w : f32[32, 32] = zeros
  %p = matmul(%x, %w) : f32[16, 32]
  %r = all_reduce(%p) {axis = "dp"} : f32[16, 32]
  %a = tanh(%x) : f32[16, 32]
  %b = matmul(%a, %w) : f32[16, 32]
  %c = tanh(%b) : f32[16, 32]
  %d = matmul(%c, %w) : f32[16, 32]
  %g = all_reduce(%d) {axis = "dp"} : f32[16, 32]
  %e = add(%r, %d) : f32[16, 32]
  %f = mul(%e, %e) : f32[16, 32]
  output e = %e
  output f = %f
  output g = %g
})");
  ir::TensorMap logical = {{"x0", randomHost(f32({16, 32}), 21)},
                           {"x1", randomHost(f32({16, 32}), 22)},
                           {"w", randomHost(f32({32, 32}), 23)}};
  ir::TensorMap want = interpret(R"(module @ref {
  input %x0 : f32[16, 32]
  input %x1 : f32[16, 32]
  param %w : f32[32, 32] = zeros
  %p0 = matmul(%x0, %w) : f32[16, 32]
  %p1 = matmul(%x1, %w) : f32[16, 32]
  %r = add(%p0, %p1) : f32[16, 32]
  %a0 = tanh(%x0) : f32[16, 32]
  %b0 = matmul(%a0, %w) : f32[16, 32]
  %c0 = tanh(%b0) : f32[16, 32]
  %d0 = matmul(%c0, %w) : f32[16, 32]
  %a1 = tanh(%x1) : f32[16, 32]
  %b1 = matmul(%a1, %w) : f32[16, 32]
  %c1 = tanh(%b1) : f32[16, 32]
  %d1 = matmul(%c1, %w) : f32[16, 32]
  %g = add(%d0, %d1) : f32[16, 32]
  %e0 = add(%r, %d0) : f32[16, 32]
  %e1 = add(%r, %d1) : f32[16, 32]
  %f0 = mul(%e0, %e0) : f32[16, 32]
  %f1 = mul(%e1, %e1) : f32[16, 32]
  output e0 = %e0
  output e1 = %e1
  output f0 = %f0
  output f1 = %f1
  output g = %g
})",
                                 logical);
  std::vector<NamedTensors> args;
  for (int d = 0; d < 2; ++d)
    args.push_back(toTensors(
        {{"x", logical.at("x" + std::to_string(d))}, {"w", logical.at("w")}}));
  Runner r(meshOf("dp=2"), {exe.get(), exe.get()});
  for (int step = 0; step < 3; ++step) {
    std::vector<RunResult> got = r.run(args);
    for (int d = 0; d < 2; ++d) {
      INFO("step " << step << ", device " << d);
      std::string k = std::to_string(d);
      compareTensors(got[d].outputs.at("e"), want.at("e" + k), 1e-4, "e");
      compareTensors(got[d].outputs.at("f"), want.at("f" + k), 1e-4, "f");
      compareTensors(got[d].outputs.at("g"), want.at("g"), 1e-4, "g");
    }
  }
}

TEST_CASE("Mesh communication: the compute queue goes on while a "
          "collective waits for a slow peer") {
  // Device 1 computes a long chain before the all-reduce; device 0 issues
  // the all-reduce first, so it is pending all that time, and device 0's
  // independent op runs meanwhile (visible in the trace).
  std::string chain;
  for (int i = 0; i < 16; ++i)
    chain += "  %m" + std::to_string(i + 1) + " = matmul(%m" +
             std::to_string(i) + ", %w) : f32[384, 384]\n";
  auto slow = build(R"(module @slow {
  input %v : f32[4]
  input %m0 : f32[384, 384]
  param %w : f32[384, 384] = zeros
)" + chain + R"(  %r = all_reduce(%v) {axis = "dp"} : f32[4]
  %t = tanh(%v) : f32[4]
  output r = %r
  output t = %t
  output m = %m16
})");
  auto fast = build(R"(module @fast {
  input %v : f32[4]
  input %m0 : f32[384, 384]
  param %w : f32[384, 384] = zeros
  %r = all_reduce(%v) {axis = "dp"} : f32[4]
  %t = tanh(%v) : f32[4]
  output r = %r
  output t = %t
})");
  std::vector<NamedTensors> args;
  for (int d = 0; d < 2; ++d)
    args.push_back(toTensors({{"v", randomHost(f32({4}), 71 + d)},
                              {"m0", randomHost(f32({384, 384}), 73)},
                              {"w", randomHost(f32({384, 384}), 74)}}));
  MeshOptions options;
  options.trace = true;
  Runner r(meshOf("dp=2"), {fast.get(), slow.get()}, options);
  std::vector<RunResult> got = r.run(args);
  CHECK(bitIdentical(got[0].outputs.at("r"), got[1].outputs.at("r")));
  const cpu::TraceEvent *reduce = nullptr, *tanh = nullptr;
  for (const cpu::TraceEvent &e : r.ex->trace())
    if (e.device == 0 && e.name == "all_reduce")
      reduce = &e;
    else if (e.device == 0 && e.name == "tanh")
      tanh = &e;
  REQUIRE(reduce);
  REQUIRE(tanh);
  // tanh comes after the all-reduce in the program and finished while the
  // all-reduce waited for device 1's matmuls.
  INFO("tanh ends at " << tanh->endUs << " us, the all-reduce at "
                       << reduce->endUs << " us");
  CHECK(tanh->endUs < reduce->endUs);
}

// dp=2 x tp=2: x split on both axes, w split on its rows over tp. The
// tp partial product is all-reduced, the rows all-gathered over dp, then
// reduce-scattered over tp.
const char *kTwoAxes = R"(module @dev {
  input %x : f32[2, 2]
  param %w : f32[2, 3] = zeros
  %h = matmul(%x, %w) : f32[2, 3]
  %r = all_reduce(%h) {axis = "tp"} : f32[2, 3]
  %g = all_gather(%r) {axis = "dp", dim = 0, sizes = [2, 2], part = -1} : f32[4, 3]
  %t = tanh(%g) : f32[4, 3]
  %s = reduce_scatter(%t) {axis = "tp", dim = 0, sizes = [2, 2], part = -1} : f32[2, 3]
  output g = %g
  output s = %s
})";

struct TwoAxesCase {
  ir::TensorMap want;
  std::vector<NamedTensors> args;
};

TwoAxesCase twoAxesCase() {
  ir::TensorMap logical = {{"x", randomHost(f32({4, 4}), 31)},
                           {"w", randomHost(f32({4, 3}), 32)}};
  TwoAxesCase c;
  c.want = interpret(R"(module @logical {
  input %x : f32[4, 4]
  param %w : f32[4, 3] = zeros
  %g = matmul(%x, %w) : f32[4, 3]
  %t = tanh(%g) : f32[4, 3]
  %s = add(%t, %t) : f32[4, 3]
  output g = %g
  output s = %s
})",
                     logical);
  // Device = 2 * dp + tp (the last axis varies fastest).
  for (int dp = 0; dp < 2; ++dp)
    for (int tp = 0; tp < 2; ++tp)
      c.args.push_back(
          toTensors({{"x", block(logical.at("x"), 2 * dp, 2, 2 * tp, 2)},
                     {"w", rows(logical.at("w"), 2 * tp, 2)}}));
  return c;
}

TEST_CASE("Mesh communication: dp=2,tp=2 with collectives on both axes") {
  auto exe = build(kTwoAxes);
  TwoAxesCase c = twoAxesCase();
  Runner r(meshOf("dp=2,tp=2"), std::vector<const Executable *>(4, exe.get()));
  std::vector<RunResult> got = r.run(c.args);
  for (int d = 0; d < 4; ++d) {
    INFO("device " << d);
    compareTensors(got[d].outputs.at("g"), c.want.at("g"), kTol, "g");
    compareTensors(got[d].outputs.at("s"), rows(c.want.at("s"), 2 * (d % 2), 2),
                   kTol, "s");
  }
}

TEST_CASE("Mesh communication: uneven parts, a program per device") {
  // Rows split 3 + 1 (dp weights 3,1): device k holds R rows.
  auto program = [](int k) {
    std::string rowsText = k == 0 ? "3" : "1", cols = k == 0 ? "4" : "2";
    std::string part = std::to_string(k);
    return build(R"(module @dev {
  input %x : f32[)" +
                 rowsText +
                 R"(, 4]
  param %w : f32[4, 6] = zeros
  %h = matmul(%x, %w) : f32[)" +
                 rowsText + R"(, 6]
  %g = all_gather(%h) {axis = "dp", dim = 0, sizes = [3, 1], part = )" +
                 part + R"(} : f32[4, 6]
  %q = mul(%g, %g) : f32[4, 6]
  %s = reduce_scatter(%q) {axis = "dp", dim = 0, sizes = [3, 1], part = )" +
                 part + R"(} : f32[)" + rowsText + R"(, 6]
  %t = all_to_all(%h) {axis = "dp", from = 0, to = 1, from_sizes = [3, 1], to_sizes = [4, 2], part = )" +
                 part + R"(} : f32[4, )" + cols + R"(]
  output g = %g
  output s = %s
  output t = %t
})");
  };
  auto p0 = program(0), p1 = program(1);
  ir::TensorMap logical = {{"x", randomHost(f32({4, 4}), 41)},
                           {"w", randomHost(f32({4, 6}), 42)}};
  ir::TensorMap want = interpret(R"(module @logical {
  input %x : f32[4, 4]
  param %w : f32[4, 6] = zeros
  %g = matmul(%x, %w) : f32[4, 6]
  %q = mul(%g, %g) : f32[4, 6]
  %s = add(%q, %q) : f32[4, 6]
  output g = %g
  output s = %s
})",
                                 logical);
  std::vector<NamedTensors> args = {
      toTensors({{"x", rows(logical.at("x"), 0, 3)}, {"w", logical.at("w")}}),
      toTensors({{"x", rows(logical.at("x"), 3, 1)}, {"w", logical.at("w")}})};
  Runner r(meshOf("dp=2[3,1]"), {p0.get(), p1.get()});
  std::vector<RunResult> got = r.run(args);
  const ir::HostTensor &g = want.at("g");
  for (int d = 0; d < 2; ++d) {
    INFO("device " << d);
    int64_t r0 = d == 0 ? 0 : 3, n = d == 0 ? 3 : 1;
    int64_t c0 = d == 0 ? 0 : 4, nc = d == 0 ? 4 : 2;
    compareTensors(got[d].outputs.at("g"), g, kTol, "g");
    compareTensors(got[d].outputs.at("s"), rows(want.at("s"), r0, n), kTol,
                   "s");
    compareTensors(got[d].outputs.at("t"), block(g, 0, 4, c0, nc), kTol, "t");
  }
}

// An embedding between two all-reduces: a device with an id out of range
// fails, while its peer waits in a collective for it.
const char *kLookup = R"(module @dev {
  input %ids : i32[2]
  input %v : f32[3]
  param %table : f32[5, 3] = zeros
  %a = all_reduce(%v) {axis = "dp"} : f32[3]
  %e = embedding(%table, %ids) : f32[2, 3]
  %r = all_reduce(%e) {axis = "dp"} : f32[2, 3]
  %s = sum(%r) {axes = [0], keepdims = false} : f32[3]
  %o = add(%s, %a) : f32[3]
  output o = %o
})";

std::vector<NamedTensors> lookupArgs(int badDevice) {
  std::vector<NamedTensors> args;
  ir::HostTensor table = randomHost(f32({5, 3}), 51);
  for (int d = 0; d < 2; ++d) {
    ir::HostTensor ids(ir::TensorType{ir::DType::I32, {2}});
    ids.data = {double(d), d == badDevice ? 9.0 : 4.0};
    args.push_back(toTensors(
        {{"ids", ids}, {"v", randomHost(f32({3}), 52 + d)}, {"table", table}}));
  }
  return args;
}

TEST_CASE("Mesh communication: an error on one device stops every device "
          "and names it; the next run works") {
  auto exe = build(kLookup);
  Runner r(meshOf("dp=2"), {exe.get(), exe.get()});
  std::vector<RunResult> good = r.run(lookupArgs(-1));
  for (int bad : {1, 0, 1}) {
    INFO("failing device " << bad);
    r.out.clear();
    auto failedRun = r.ex->run(lookupArgs(bad), r.diag);
    CHECK(failedRun.failed());
    std::string text = r.errors();
    std::string other = "device " + std::to_string(1 - bad) + ":";
    CHECK(text.find("device " + std::to_string(bad) + ": op %1 (embedding)") !=
          std::string::npos);
    CHECK(text.find(other) == std::string::npos);
    // One error, the cause, not the peers' aborted collectives.
    CHECK(text.find("aborted") == std::string::npos);
    std::vector<RunResult> again = r.run(lookupArgs(-1));
    for (int d = 0; d < 2; ++d)
      CHECK(bitIdentical(again[d].outputs.at("o"), good[d].outputs.at("o")));
  }
  // The result itself: the sum of both devices' rows plus both v.
  std::vector<NamedTensors> args = lookupArgs(-1);
  for (int c = 0; c < 3; ++c) {
    double want = 0;
    for (int d = 0; d < 2; ++d) {
      const runtime::Tensor &table = args[d].at("table");
      want +=
          table.get(d * 3 + c) + table.get(4 * 3 + c) + args[d].at("v").get(c);
    }
    CHECK(good[0].outputs.at("o").get(c) ==
          doctest::Approx(want).epsilon(1e-6));
  }
}

TEST_CASE("Mesh communication: devices that disagree on a collective fail "
          "with the communicator's message, every time, without hanging") {
  auto four = build(R"(module @four {
  input %v : f32[4]
  %r = all_reduce(%v) {axis = "dp"} : f32[4]
  output r = %r
})");
  auto three = build(R"(module @three {
  input %v : f32[3]
  %r = all_reduce(%v) {axis = "dp"} : f32[3]
  output r = %r
})");
  Runner r(meshOf("dp=2"), {four.get(), three.get()});
  std::vector<NamedTensors> args = {
      toTensors({{"v", randomHost(f32({4}), 81)}}),
      toTensors({{"v", randomHost(f32({3}), 82)}})};
  for (int run = 0; run < 2; ++run) {
    r.out.clear();
    CHECK(r.ex->run(args, r.diag).failed());
    CHECK(r.errors().find(": op %0 (all_reduce): ") != std::string::npos);
    CHECK(r.errors().find("disagree") != std::string::npos);
  }
}

// A path in the temporary folder, removed when the test ends.
struct TempPath {
  std::string path =
      "/tmp/mgc-mesh-trace-" + std::to_string(::getpid()) + ".json";
  ~TempPath() { std::remove(path.c_str()); }
};

TEST_CASE("Mesh communication: the trace has both queues of every device "
          "and writes Chrome trace JSON") {
  auto exe = build(kTwoAxes);
  TwoAxesCase c = twoAxesCase();
  MeshOptions options;
  options.trace = true;
  Runner r(meshOf("dp=2,tp=2"), std::vector<const Executable *>(4, exe.get()),
           options);
  r.run(c.args);
  // The compute queues' waits for communication are spans of their own
  // ("wait"), as many as the timing gave; the rest is one per op.
  auto opsOf = [](const std::vector<cpu::TraceEvent> &all) {
    std::vector<cpu::TraceEvent> ops;
    for (const cpu::TraceEvent &e : all) {
      if (e.name == "wait") {
        CHECK(e.queue == cpu::TraceEvent::Queue::Compute);
        CHECK(llvm::StringRef(e.detail).startswith("for communication"));
        continue;
      }
      ops.push_back(e);
    }
    return ops;
  };
  std::vector<cpu::TraceEvent> events = opsOf(r.ex->trace());
  // Per device: matmul and tanh on compute, three collectives on comm.
  REQUIRE(events.size() == 4 * 5);
  std::map<std::pair<int64_t, int>, std::vector<std::string>> byQueue;
  double firstEnd = 0;
  for (const cpu::TraceEvent &e : events) {
    CHECK(e.endUs >= e.startUs);
    CHECK(e.startUs >= 0);
    firstEnd = std::max(firstEnd, e.endUs);
    byQueue[{e.device, static_cast<int>(e.queue)}].push_back(e.name);
    if (e.name == "all_reduce")
      CHECK(e.detail == "axis tp, 24 B");
    if (e.name == "all_gather")
      CHECK(e.detail == "axis dp, 24 B"); // half of the 48 B result
  }
  for (int64_t d = 0; d < 4; ++d) {
    CHECK(byQueue[{d, 0}] == std::vector<std::string>{"matmul", "tanh"});
    CHECK(byQueue[{d, 1}] == std::vector<std::string>{
                                 "all_reduce", "all_gather", "reduce_scatter"});
  }
  // A second run follows the first on the same clock.
  r.run(c.args);
  std::vector<cpu::TraceEvent> both = opsOf(r.ex->trace());
  REQUIRE(both.size() == 2 * 4 * 5);
  for (size_t i = 20; i < 40; ++i)
    CHECK(both[i].startUs >= firstEnd - 1e-3);

  TempPath file;
  REQUIRE(succeeded(cpu::writeChromeTrace(r.ex->trace(), file.path, r.diag)));
  auto buffer = llvm::MemoryBuffer::getFile(file.path);
  REQUIRE(buffer);
  auto json = llvm::json::parse((*buffer)->getBuffer());
  REQUIRE(bool(json));
  const llvm::json::Array *list = json->getAsObject()->getArray("traceEvents");
  REQUIRE(list);
  std::set<std::string> names;
  int complete = 0;
  for (const llvm::json::Value &v : *list) {
    const llvm::json::Object *e = v.getAsObject();
    REQUIRE(e);
    llvm::StringRef ph = *e->getString("ph");
    if (ph == "M") {
      names.insert(
          e->getString("name")->str() + ":" +
          std::to_string(*e->getInteger("pid")) + ":" +
          e->getObject("args")->getString("name").getValueOr("").str());
      continue;
    }
    CHECK(ph == "X");
    ++complete;
    CHECK(bool(e->getString("name")));
    CHECK(bool(e->getNumber("ts")));
    CHECK(*e->getNumber("dur") >= 0);
    int64_t pid = *e->getInteger("pid"), tid = *e->getInteger("tid");
    CHECK((pid >= 0 && pid < 4));
    bool comm = e->getString("cat") == llvm::StringRef("communication");
    CHECK(tid == (comm ? 1 : 0));
    if (comm)
      CHECK(e->getObject("args")->getString("detail")->startswith("axis "));
    else if (e->getString("name") == llvm::StringRef("matmul"))
      CHECK_FALSE(bool(e->getObject("args")->getString("detail")));
  }
  CHECK(complete == static_cast<int>(r.ex->trace().size()));
  for (int d = 0; d < 4; ++d) {
    std::string p = std::to_string(d);
    CHECK(names.count("process_name:" + p + ":device " + p));
    CHECK(names.count("thread_name:" + p + ":compute"));
    CHECK(names.count("thread_name:" + p + ":communication"));
  }
  r.ex->clearTrace();
  CHECK(r.ex->trace().empty());
  // A folder that does not exist: an error naming the file.
  CHECK(
      failed(cpu::writeChromeTrace(events, "/nonexistent-dir/t.json", r.diag)));
  CHECK(r.errors().find("/nonexistent-dir/t.json") != std::string::npos);
}

TEST_CASE("Mesh communication: the scope of a compute op is its trace "
          "detail") {
  auto exe = build(kDataParallel);
  MeshOptions options;
  options.trace = true;
  Runner r(meshOf("dp=2"), {exe.get(), exe.get()}, options);
  r.run(dataParallelCase(5).args);
  int matmuls = 0;
  for (const cpu::TraceEvent &e : r.ex->trace())
    if (e.name == "matmul") {
      ++matmuls;
      CHECK(e.detail == "layer");
      CHECK(e.queue == cpu::TraceEvent::Queue::Compute);
    } else if (e.name == "all_reduce") {
      CHECK(e.detail == "axis dp, 20 B");
      CHECK(e.queue == cpu::TraceEvent::Queue::Communication);
    }
  CHECK(matmuls == 2);
}

TEST_CASE("Mesh communication: bit-identical run to run and for any number "
          "of threads per device") {
  auto exe = build(kTwoAxes);
  TwoAxesCase c = twoAxesCase();
  std::vector<const Executable *> programs(4, exe.get());
  Runner one(meshOf("dp=2,tp=2"), programs);
  std::vector<RunResult> first = one.run(c.args);
  std::vector<RunResult> second = one.run(c.args);
  MeshOptions two;
  two.threadsPerDevice = 2;
  Runner other(meshOf("dp=2,tp=2"), programs, two);
  std::vector<RunResult> third = other.run(c.args);
  for (int d = 0; d < 4; ++d)
    for (const char *name : {"g", "s"}) {
      INFO("device " << d << ", " << name);
      CHECK(
          bitIdentical(first[d].outputs.at(name), second[d].outputs.at(name)));
      CHECK(bitIdentical(first[d].outputs.at(name), third[d].outputs.at(name)));
    }
}

TEST_CASE("Mesh communication: eight devices on one axis") {
  auto exe = build(R"(module @dev {
  input %x : f32[1, 4]
  %g = all_gather(%x) {axis = "dp", dim = 0, sizes = [1, 1, 1, 1, 1, 1, 1, 1], part = -1} : f32[8, 4]
  %r = all_reduce(%x) {axis = "dp"} : f32[1, 4]
  output g = %g
  output r = %r
})");
  ir::HostTensor x = randomHost(f32({8, 4}), 61);
  std::vector<NamedTensors> args;
  for (int d = 0; d < 8; ++d)
    args.push_back(toTensors({{"x", rows(x, d, 1)}}));
  Runner r(meshOf("dp=8"), std::vector<const Executable *>(8, exe.get()));
  std::vector<RunResult> got = r.run(args);
  for (int d = 0; d < 8; ++d) {
    INFO("device " << d);
    compareTensors(got[d].outputs.at("g"), x, 0, "g");
    for (int c = 0; c < 4; ++c) {
      double want = 0;
      for (int k = 0; k < 8; ++k)
        want += x.data[k * 4 + c];
      CHECK(got[d].outputs.at("r").get(c) ==
            doctest::Approx(want).epsilon(1e-6));
    }
  }
}

} // namespace
} // namespace mgc::backend::testing
