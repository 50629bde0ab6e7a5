// The memory plan of a program with communication ops: a communication op
// runs on the communication queue while the compute queue goes on, so its
// operand stays live up to its wait point (the first op that uses its
// result, or the end) and its result from its own step; plans that give
// those bytes to the ops in between are refused.
#include "MeshTestSupport.h"

#include "backend/Executable.h"
#include "backend/MemoryPlan.h"
#include "backend/cpu/Kernels.h"
#include "ir/TextParser.h"

#include "llvm/Support/raw_ostream.h"

#include <doctest/doctest.h>

namespace mgc::backend {
namespace {

using testing::parse;

std::vector<uint32_t> graphOrder(const ir::Graph &g) {
  std::vector<uint32_t> order;
  for (uint32_t i = 0; i < g.numOps(); ++i)
    order.push_back(i);
  return order;
}

bool overlap(const OpSlot &a, const OpSlot &b) {
  return a.offset < b.offset + b.size && b.offset < a.offset + a.size;
}

// Steps: 0 a, 1 r (communication), 2 b, 3 c, 4 d (first use of r).
const char *kOverlapped = R"(module @m {
  input %x : f32[4, 4]
  %a = exp(%x) : f32[4, 4]
  %r = all_reduce(%a) {axis = "dp"} : f32[4, 4]
  %b = neg(%x) : f32[4, 4]
  %c = exp(%b) : f32[4, 4]
  %d = add(%r, %c) : f32[4, 4]
  output d = %d
})";

TEST_CASE("Mesh memory plan: a communication op is waited for at the first "
          "use of its result") {
  auto m = parse(kOverlapped);
  std::vector<uint32_t> order = graphOrder(m->graph());
  std::vector<uint32_t> waits = waitSteps(m->graph(), order);
  CHECK(waits == std::vector<uint32_t>{0, 4, 2, 3, 4});
  std::vector<BufferRequest> r = resultBuffers(m->graph(), order);
  // The operand of the communication op lives to the wait point, not just
  // to the communication op; its result from its own step.
  CHECK(r[0].first == 0);
  CHECK(r[0].last == 4);
  CHECK(r[1].first == 1);
  CHECK(r[1].last == 4);
  CHECK(r[2].first == 2);
  CHECK(r[2].last == 3);
}

TEST_CASE("Mesh memory plan: ops between a communication op and its wait "
          "point never share its buffers") {
  auto m = parse(kOverlapped);
  std::vector<uint32_t> order = graphOrder(m->graph());
  MemoryPlan plan = planMemory(m->graph(), order, cpu::scratchBytes);
  // a (operand of r) and r (its result) against b and c, which run while
  // the communication queue works.
  for (int busy : {0, 1})
    for (int between : {2, 3}) {
      INFO("buffers " << busy << " and " << between);
      CHECK_FALSE(overlap(plan.slots[busy], plan.slots[between]));
    }
  // Without communication the same shape of program reuses a's bytes for
  // b: the rule is what keeps them apart.
  auto plain = parse(R"(module @m {
  input %x : f32[4, 4]
  %a = exp(%x) : f32[4, 4]
  %r = neg(%a) : f32[4, 4]
  %b = neg(%x) : f32[4, 4]
  %c = exp(%b) : f32[4, 4]
  %d = add(%r, %c) : f32[4, 4]
  output d = %d
})");
  MemoryPlan p2 = planMemory(plain->graph(), order, cpu::scratchBytes);
  CHECK(overlap(p2.slots[0], p2.slots[2]));
  CHECK(plan.peak > p2.peak);
}

TEST_CASE("Mesh memory plan: a result used only as an output is waited for "
          "at the end") {
  auto m = parse(R"(module @m {
  input %x : f32[8]
  %a = exp(%x) : f32[8]
  %r = all_reduce(%a) {axis = "dp"} : f32[8]
  %b = neg(%x) : f32[8]
  %c = exp(%b) : f32[8]
  %u = all_reduce(%c) {axis = "dp"} : f32[8]
  output r = %r
})");
  std::vector<uint32_t> order = graphOrder(m->graph());
  std::vector<uint32_t> waits = waitSteps(m->graph(), order);
  CHECK(waits == std::vector<uint32_t>{0, 5, 2, 3, 5});
  std::vector<BufferRequest> r = resultBuffers(m->graph(), order);
  CHECK(r[0].last == 5);
  CHECK(r[3].last == 5); // operand of an unused communication op
  CHECK(r[4].first == 4);
  CHECK(r[4].last == 5);
  MemoryPlan plan = planMemory(m->graph(), order, cpu::scratchBytes);
  CHECK_FALSE(overlap(plan.slots[0], plan.slots[2]));
  CHECK_FALSE(overlap(plan.slots[0], plan.slots[3]));
}

TEST_CASE("Mesh memory plan: programs without communication are planned as "
          "before") {
  auto m = parse(R"(module @m {
  input %x : f32[4]
  %a = exp(%x) : f32[4]
  %b = neg(%a) : f32[4]
  %c = exp(%b) : f32[4]
  output c = %c
})");
  std::vector<uint32_t> order = graphOrder(m->graph());
  CHECK(waitSteps(m->graph(), order) == std::vector<uint32_t>{0, 1, 2});
  std::vector<BufferRequest> r = resultBuffers(m->graph(), order);
  CHECK(r[0].last == 1);
  CHECK(r[1].last == 2);
  CHECK(r[2].last == 3);
}

TEST_CASE("Mesh memory plan: the executable check accepts the plan and "
          "refuses one that reuses a pending operand") {
  auto exe = buildExecutable(parse(kOverlapped), cpu::scratchBytes);
  std::string out;
  llvm::raw_string_ostream os(out);
  DiagnosticEngine diag(os);
  CHECK(succeeded(checkExecutable(*exe, "overlapped", diag)));
  // b placed on a's bytes: fine for a compute op at a's last use, wrong
  // while the communication queue still reads a.
  exe->plan.slots[2].offset = exe->plan.slots[0].offset;
  CHECK(failed(checkExecutable(*exe, "overlapped", diag)));
  CHECK(os.str().find("overlaps two buffers") != std::string::npos);
}

TEST_CASE("Mesh memory plan: the scratch space of a communication op lasts "
          "to its wait point") {
  std::vector<BufferRequest> results = {{64, 0, 4}, {64, 1, 5}};
  std::vector<uint32_t> waits = {0, 4};
  BufferRequest s = scratchBuffer(128, 1, results, waits);
  CHECK(s.size == 128);
  CHECK(s.first == 1);
  CHECK(s.last == 4);
  BufferRequest c = scratchBuffer(32, 0, results, waits);
  CHECK(c.first == 0);
  CHECK(c.last == 0);
}

} // namespace
} // namespace mgc::backend
