// What the mgc tool reaches inside a session, beyond the public API.
// Feeding the runtime's own tensors: its data sources make runtime::Tensor
// batches, and Session::feed would copy each twice more (into a public
// Tensor, then back), hundreds of megabytes a step for a large batch.
// Reading and writing the whole training state (parameters, optimizer state,
// buffers, the step counter) and the optimizer's settings: for
// --check-single, which starts its one-device run from the mesh's state
// before every step and checks each update against the optimizer's rule.
#pragma once

#include "mgc/Session.h"
#include "passes/Optimizer.h"
#include "runtime/Tensor.h"

#include <map>
#include <string>
#include <vector>

namespace mgc {

struct SessionInternals {
  // As Session::feed (next = false) and Session::feedNext (next = true),
  // taking `value` as it is.
  static Status feed(Session &session, const std::string &input,
                     runtime::Tensor value, bool next = false);
  // A copy of every persistent tensor of the step, by name (with several
  // processes every rank calls it).
  static Result<std::map<std::string, runtime::Tensor>>
  state(const Session &session);
  // Replaces every persistent tensor of the step with the one of the same
  // name in `state`, which must hold each of them with its type.
  static Status setState(Session &session,
                         const std::map<std::string, runtime::Tensor> &state);
  // The training step's optimizer settings (the model's train section with
  // the session's overrides); an error for a session without a step.
  static Result<passes::OptimizerConfig> optimizer(const Session &session);
  // The ops of the model (as written) whose result branches on its
  // operands' values (ir::kBranches: relu, max, minimum, maximum, abs,
  // sign, where), by name, sorted; none for a smooth model.
  static std::vector<std::string> branchOps(const Session &session);
};

} // namespace mgc
