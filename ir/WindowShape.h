// The shapes of conv2d and the 2-d poolings: the rules of the forward and
// backward ops (which check the image, the filters, the window and the
// cotangent against each other) and the WindowDims of an op that passed
// them, for the interpreter and the kernels.
#pragma once

#include "ir/Graph.h"
#include "ir/WindowDims.h"

namespace mgc::ir {

// The geometry of a conv2d, max_pool2d or avg_pool2d op, or of one of their
// backward ops, whose types passed the shape rule.
WindowDims windowDims(const Op &op);

} // namespace mgc::ir
