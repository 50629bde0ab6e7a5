// The apply part of a pipelined step (the optimizer's step, once per step,
// passes/Accumulation.h) cut by pipeline device, so that each device holds
// and updates only the parameters of its own stages and their optimizer
// state (Megatron-LM's and torchtitan's per-stage optimizer).
//
// Every value of the apply part has a home: the pipeline devices that can
// compute it from what they hold. An accumulated gradient (an input
// micro.sum.k) is at home on the devices whose stages give it (both ends of
// GPT's tied embedding); parameters, state and constants go anywhere, and
// an op is at home where all its operands are. What no one device can
// compute is a scalar that sums over the stages (the squared norm of every
// gradient, for clipping): such a *global* op, and every scalar after it, is
// computed by every device that needs it, from the same operands in the
// same order, so it is bit for bit the one-device value. Its operands from
// other devices' stages are *shared*: the device that makes one (the first
// of its home) gives it to every other.
//
// So each pipeline device runs two programs:
//   gather  what the device shares (and everything that computes it, such
//           as the gradients' dp all-reduces), made before any device
//           updates; null when it shares nothing;
//   update  the rest of its work: the global scalars, then the updates of
//           the parameters and state it holds, reading the gather
//           program's values it kept and the other devices' shared ones.
// One exchange between the two; a step that would need more (a shared value
// computed from a global one) is refused.
#pragma once

#include "ir/Graph.h"
#include "support/Diagnostics.h"
#include "support/Result.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mgc::passes {

// Prefix of the values a gather program makes for its device's update
// program or for every other device's (outputs of the one, inputs of the
// others).
inline constexpr const char *kApplyValuePrefix = "apply.";

struct ApplyValue {
  std::string name; // "apply.<index>"
  ir::TensorType type;
  int64_t owner = 0; // the pipeline device whose gather program makes it
  // Read by other pipeline devices (given to every other by the exchange);
  // otherwise only kept for the owner's update program.
  bool shared = false;
};

struct ApplySplit {
  int64_t devices = 0;
  // Per pipeline device: its gather program (null when it makes nothing)
  // and its update program. The update program's updates are the
  // parameters and state the device holds; every device's update program
  // gives the outputs (the metrics) it can compute.
  std::vector<std::unique_ptr<ir::Module>> gather, update;
  // values[i] is "apply.<i>", in the order of the apply part's ops.
  std::vector<ApplyValue> values;
};

// Cuts `apply` (one device program of the apply part) for `devices`
// pipeline devices; `givers` names, for each accumulated gradient
// (micro.sum.k), the pipeline devices whose stages give its parts. Reports
// and fails, naming the op, on a step whose update of one tensor reads
// tensors of different devices, or that would need a second exchange.
FailureOr<ApplySplit>
splitApply(const ir::Module &apply, int64_t devices,
           const std::map<std::string, std::vector<int64_t>> &givers,
           DiagnosticEngine &diag);

} // namespace mgc::passes
