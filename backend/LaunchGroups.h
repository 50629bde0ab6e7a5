// Grouped launches: which elementwise ops of an executable a backend may run
// as one kernel over several tensors (a "multi-tensor apply", as in torch's
// fused AdamW and apex), the op order that makes them adjacent, and the
// memory plan that makes one launch of a group safe. Needs no device: the
// CUDA executor runs what this plans, and the CPU test suite checks it.
//
// A group is a run of consecutive ops (in the planned order) with the same
// launch key (launchKey) where no op reads another's result. Its ops run at
// once, so the arena must not hand the bytes of a member's operand to
// another member's result: the plan here keeps every operand of a group
// live to the group's end and every result live from its start.
#pragma once

#include "backend/Executable.h"

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mgc::backend {

// How an operand of a groupable op is read at element i of the result.
enum class OperandClass : uint8_t {
  Full,   // element i (the operand has the result's shape)
  Scalar, // element 0 (one element, broadcast)
  Other,  // any other broadcast: not groupable
};
OperandClass operandClass(const ir::TensorType &operand,
                          const ir::TensorType &result);

// The elementwise expression an op computes (the text of ir/FusedExpr.h):
// a fused op's `expr`, or one instruction for a floating-point elementwise
// op (add ... cos, the elementwise backward ops). Empty for other ops.
std::string elementwiseExpr(const ir::Op &op);

// Ops with the same non-empty key compute the same expression on operands
// of the same element types and classes, into results of the same element
// type: one kernel can run several of them. Empty when the op cannot be
// grouped (not elementwise, integer types, an operand of class Other).
std::string launchKey(const ir::Op &op);

// `order` (a valid schedule of `graph`) with the groupable ops of the
// optimizer's update brought together: when an op whose result is an update
// value (or that feeds one) is reached, every later such op with the same
// key whose operands are already computed is moved up behind it (with the
// broadcasts of computed values it reads, placed before). Every other op
// keeps its relative order; the result is a valid schedule.
std::vector<uint32_t> clusterUpdateOps(const ir::Graph &graph,
                                       llvm::ArrayRef<uint32_t> order);

struct LaunchOptions {
  bool reorder = true; // clusterUpdateOps first
  bool group = true;   // form groups (otherwise every op is its own launch)
};

// The schedule a backend runs.
struct LaunchPlan {
  std::vector<uint32_t> order; // graph op indices, a valid schedule
  // Consecutive runs of `order` covering it: [begin, end) positions; a run
  // of one op is an ordinary launch, a longer one a group.
  struct Run {
    uint32_t begin = 0, end = 0;
    uint32_t size() const { return end - begin; }
  };
  std::vector<Run> runs;
  // Arena offset of every op's result (by graph position) and arena bytes:
  // results only (a backend with its own scratch area), with the lifetimes
  // of the groups.
  std::vector<uint64_t> offsets;
  uint64_t peak = 0;

  // Op launches per step: one per run (an op may still enqueue more than
  // one kernel).
  size_t launches() const { return runs.size(); }
  size_t groups() const;
  size_t groupedOps() const;
};

LaunchPlan planLaunches(const Executable &exe,
                        const LaunchOptions &options = {});

// Checks a plan against its executable: `order` a permutation and valid
// schedule, runs covering it, groups of one key without a member reading
// another's result, and no two results, nor a result and a member's operand,
// sharing bytes while both are needed. Returns "" or what is wrong (tests).
std::string checkLaunchPlan(const Executable &exe, const LaunchPlan &plan);

} // namespace mgc::backend
