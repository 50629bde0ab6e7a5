// What the sharding rule tests share: a signature as text, one op built on
// inputs of given types with the signatures its rule lists, and the axes.
#pragma once

#include "passes/ShardingRules.h"

#include "ir/Builder.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace mgc::shardtest {

using Ints = std::vector<int64_t>;
using Strings = std::vector<std::string>;

inline ir::Placement R() { return ir::Placement::replicate(); }

inline std::string sigStr(const passes::ShardingSignature &s) {
  std::string out = "(";
  for (size_t i = 0; i < s.operands.size(); ++i)
    out += (i ? ", " : "") + s.operands[i].str();
  out += ") -> " + s.result.str();
  if (s.scaleOperand >= 0)
    out += " scale operand " + std::to_string(s.scaleOperand) + " dim " +
           std::to_string(s.scaleDim);
  return out;
}

// The signatures of one op built on inputs of the given types.
struct OneOp {
  ir::Module module;
  ir::Builder builder{module.graph()};
  ir::Op *op = nullptr;

  OneOp(ir::OpKind kind, std::vector<ir::TensorType> types,
        ir::Attrs attrs = {}) {
    std::vector<ir::Value *> operands;
    for (size_t i = 0; i < types.size(); ++i)
      operands.push_back(
          module.graph().addInput("x" + std::to_string(i), types[i]));
    ir::ValueOrError r = builder.create(kind, operands, std::move(attrs));
    INFO(r.error);
    REQUIRE(r.ok());
    op = r.value->definingOp();
  }
  Strings sigs(const ir::MeshAxis &axis) const {
    Strings out;
    for (const passes::ShardingSignature &s :
         passes::legalSignatures(*op, axis))
      out.push_back(sigStr(s));
    return out;
  }
};

inline ir::TensorType f32(ir::Shape shape) {
  return ir::TensorType(ir::DType::F32, shape);
}
inline ir::TensorType f64(ir::Shape shape) {
  return ir::TensorType(ir::DType::F64, shape);
}

inline const ir::MeshAxis kTwo{"tp", 2, {}};
inline const ir::MeshAxis kThree{"tp", 3, {}};
inline const ir::MeshAxis kWeighted{"tp", 2, {3, 1}};

inline bool listed(const Strings &sigs, const std::string &sig) {
  return std::find(sigs.begin(), sigs.end(), sig) != sigs.end();
}

} // namespace mgc::shardtest
