// attention's shapes: the rules of attention and attention_grad (which
// check q, k, v and the mask against each other) and the AttentionDims of
// an op that passed them, for the interpreter and the kernels.
#pragma once

#include "ir/AttentionDims.h"
#include "ir/Graph.h"

namespace mgc::ir {

// The mask operand of an attention (operand 3) or attention_grad (operand
// 5) op, or null when it has none.
const Value *attentionMask(const Op &op);

// The dimensions of an attention or attention_grad op whose types passed
// the shape rule.
AttentionDims attentionDims(const Op &op);

} // namespace mgc::ir
