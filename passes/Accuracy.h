// The accuracy pass (passes/Accuracy.cpp) adds this output to the forward
// program of a classifier: the share of positions whose target has the
// largest logit.
#pragma once

namespace mgc::passes {

inline constexpr const char *kAccuracyOutputName = "accuracy";

} // namespace mgc::passes
