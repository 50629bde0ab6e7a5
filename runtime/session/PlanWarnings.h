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
// fits. `step` was built from `model` for `config`; a tp that does not fit
// is compared with the plan of the largest tp that does (built the same
// way), by the bytes each device sends per step.
std::vector<std::string> planWarnings(const MeshStep &step,
                                      const ir::Module &model,
                                      const MeshConfig &config);

} // namespace mgc::session
