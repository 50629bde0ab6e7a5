// Feeding a session the runtime's own tensors, for the mgc tool: its data
// sources make runtime::Tensor batches, and Session::feed would copy each
// twice more (into a public Tensor, then back), hundreds of megabytes a
// step for a large batch.
#pragma once

#include "mgc/Session.h"
#include "runtime/Tensor.h"

#include <string>

namespace mgc {

struct SessionInternals {
  // As Session::feed (next = false) and Session::feedNext (next = true),
  // taking `value` as it is.
  static Status feed(Session &session, const std::string &input,
                     runtime::Tensor value, bool next = false);
};

} // namespace mgc
