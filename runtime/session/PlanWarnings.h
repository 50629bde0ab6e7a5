// What a mesh costs that a user would not expect, said when the plan is
// built: tensor parallelism that does not fit the model (a tp that does not
// divide attention's heads or the hinted dimensions, so that the plan
// reshards values between splits on tp; or a model without tp hints,
// which every tp device then computes whole).
#pragma once

#include "runtime/session/MeshStep.h"

#include <string>
#include <vector>

namespace mgc::session {

// One line per finding, without a "warning:" prefix; none for a plan that
// fits.
std::vector<std::string> planWarnings(const MeshStep &step);

} // namespace mgc::session
