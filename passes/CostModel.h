// What a model's work costs, layer by layer: the floating-point operations
// and memory traffic of each forward op, summed over the layers of the
// model (the iterations of its repeat blocks, found by the ops' scopes),
// with what comes before the first layer (the embedding) and after the
// last (the head and the loss). The stage balancer (passes/StageBalance.h)
// and the plan's predictions read it; a device turns the amounts into
// time (roofline: the larger of compute and memory time).
#pragma once

#include "ir/Graph.h"

#include "llvm/ADT/DenseMap.h"

#include <string>
#include <vector>

namespace mgc::passes {

struct WorkAmount {
  double flops = 0; // floating-point operations
  double bytes = 0; // bytes read and written
  WorkAmount &operator+=(const WorkAmount &o) {
    flops += o.flops;
    bytes += o.bytes;
    return *this;
  }
};

// The work of one forward op: matmuls 2 M N K, causal attention 2 B T^2 Dh
// (half of the full score matrix), normalisations and softmax 5 per
// element, elementwise ops 1 per element, layout ops none; bytes are its
// operands' and result's.
WorkAmount opWork(const ir::Op &op);

// The layer a scope names: its first two components when the second is an
// iteration number ("blocks.3.attn" -> "blocks.3"), else "".
std::string layerOfScope(llvm::StringRef scope);

// Where each op of a forward module stands in its layer sequence: the
// layers in order of their first op, and per op its layer's index, or
// kBeforeLayers (unscoped, before the first layer's first op: the
// embedding) or kAfterLayers (unscoped, after the last layer's last op:
// the head and loss). An unscoped op between layers belongs to the layer
// before it. The cost model and the stage assignment both read this.
inline constexpr int64_t kBeforeLayers = -1, kAfterLayers = -2;
struct OpLayers {
  std::vector<std::string> names;
  llvm::DenseMap<const ir::Op *, int64_t> layerOf;
};
OpLayers opLayers(const ir::Module &forward);

struct LayerCost {
  std::string name;           // "blocks.3", "embedding", "head"
  WorkAmount forward;         // one forward of the module's batch
  double activationBytes = 0; // results the backward keeps
  double paramBytes = 0;      // the layer's parameters
};

struct ModelLayers {
  LayerCost first, last;         // before the first layer, after the last
  std::vector<LayerCost> layers; // in order
  // cutBytes[i]: the bytes a forward of the module's batch sends from the
  // layers before i to layer i and on, were the pipeline cut there (its
  // backward sends as much back); 0 for i = 0 and when not measured
  // (passes/PipelineStages.h: measureCuts).
  std::vector<double> cutBytes;
};

// The layers of a forward module (opLayers): `first` holds the ops before
// the layers, `last` those after them. A parameter belongs to the layer of
// the first op that reads it.
ModelLayers forwardLayers(const ir::Module &forward);

} // namespace mgc::passes
