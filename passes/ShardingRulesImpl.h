// Internal to the sharding rule table: the rule functions of each op family
// (ShardingRules*.cpp) and the helpers they share. The table itself is in
// ShardingRules.cpp.
#pragma once

#include "passes/ShardingRules.h"

#include <initializer_list>

namespace mgc::passes::sharding {

using ir::Placement;
using Signatures = llvm::SmallVectorImpl<ShardingSignature>;

inline Placement S(int64_t dim) { return Placement::split(dim); }
inline Placement R() { return Placement::replicate(); }
inline Placement P() { return Placement::partial(); }
inline Placement Pmax() { return Placement::partialMax(); }

inline ShardingSignature sig(std::initializer_list<Placement> operands,
                             Placement result, int scaleOperand = -1,
                             int64_t scaleDim = -1) {
  ShardingSignature s;
  s.operands.assign(operands.begin(), operands.end());
  s.result = result;
  s.scaleOperand = scaleOperand;
  s.scaleDim = scaleDim;
  return s;
}

// Every operand with placement `p`.
ShardingSignature uniformSig(const ir::Op &op, Placement p, Placement result);

// Whether a dimension of size `n` splits on `axis` with no empty part.
bool splittable(int64_t n, const ir::MeshAxis &axis);

// A rule with no signature but all-R (communication ops, the constant).
void ruleNone(const ir::Op &op, const ir::MeshAxis &axis, Signatures &out);

#define MGC_SHARDING_RULE(Name)                                                \
  void Name(const ir::Op &op, const ir::MeshAxis &axis, Signatures &out);

// Elementwise and shape ops (ShardingRules.cpp).
MGC_SHARDING_RULE(ruleElementwise)
MGC_SHARDING_RULE(ruleBroadcast)
MGC_SHARDING_RULE(ruleReshape)
MGC_SHARDING_RULE(ruleTranspose)
MGC_SHARDING_RULE(ruleSlice)
MGC_SHARDING_RULE(ruleConcat)
MGC_SHARDING_RULE(ruleReduce)
MGC_SHARDING_RULE(ruleMaxGrad)

// Linear algebra, normalisations, losses, attention (ShardingRulesNN.cpp).
MGC_SHARDING_RULE(ruleAxisOp)
MGC_SHARDING_RULE(ruleAxisGrad)
MGC_SHARDING_RULE(ruleLayernorm)
MGC_SHARDING_RULE(ruleRope)
MGC_SHARDING_RULE(ruleLayernormGradX)
MGC_SHARDING_RULE(ruleMatmul)
MGC_SHARDING_RULE(ruleEmbedding)
MGC_SHARDING_RULE(ruleEmbeddingGrad)
MGC_SHARDING_RULE(ruleCrossEntropy)
MGC_SHARDING_RULE(ruleCrossEntropyGrad)
MGC_SHARDING_RULE(ruleMse)
MGC_SHARDING_RULE(ruleCausalMask)
MGC_SHARDING_RULE(ruleCausalMaskGrad)
MGC_SHARDING_RULE(ruleAttention)
MGC_SHARDING_RULE(ruleAttentionGrad)

// Tensor parallelism over a vocabulary (ShardingRulesVocab.cpp).
MGC_SHARDING_RULE(ruleSumExp)
MGC_SHARDING_RULE(ruleClassLogit)
MGC_SHARDING_RULE(ruleCrossEntropyGradStats)

// Convolution and pooling (ShardingRulesConv.cpp).
MGC_SHARDING_RULE(ruleConv2d)
MGC_SHARDING_RULE(ruleConv2dGradX)
MGC_SHARDING_RULE(ruleConv2dGradW)
MGC_SHARDING_RULE(rulePool2d)

#undef MGC_SHARDING_RULE

} // namespace mgc::passes::sharding
