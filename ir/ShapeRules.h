// Shape and dtype rules named in OpKinds.def. Each returns the result type of
// an op from its operand types and attributes, or says what is wrong.
#pragma once

#include "ir/OpInfo.h"

namespace mgc::ir::rules {

#define MGC_OP(Id, Name, Arity, AttrSpec, Rule, Traits, Summary)               \
  TypeOrError Rule(const ShapeQuery &q);
#include "ir/OpKinds.def"

} // namespace mgc::ir::rules
