#include "passes/CostModel.h"

#include "ir/OpInfo.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"

#include <map>

namespace mgc::passes {

namespace {

double elements(const ir::TensorType &t) {
  return static_cast<double>(t.size());
}
double bytesOf(const ir::TensorType &t) {
  return elements(t) * static_cast<double>(ir::dtypeBytes(t.dtype));
}

} // namespace

std::string layerOfScope(llvm::StringRef scope) {
  llvm::SmallVector<llvm::StringRef, 4> parts;
  scope.split(parts, '.');
  unsigned index = 0;
  if (parts.size() < 2 || parts[1].getAsInteger(10, index))
    return "";
  return (parts[0] + "." + parts[1]).str();
}

WorkAmount opWork(const ir::Op &op) {
  WorkAmount w;
  const ir::TensorType &out = op.result()->type();
  for (const ir::Value *v : op.operands())
    w.bytes += bytesOf(v->type());
  w.bytes += bytesOf(out);
  switch (op.kind()) {
  case ir::OpKind::Matmul: {
    const ir::TensorType &a = op.operand(0)->type();
    double k = a.rank() > 0 ? static_cast<double>(a.shape.back()) : 1;
    w.flops = 2 * elements(out) * k;
    break;
  }
  case ir::OpKind::Attention: {
    // q [..., Tq, Dh], k [..., Tk, Dh]: Tq Tk Dh for the scores and as much
    // for the values per head (half of each under a causal mask, which the
    // estimate does not count).
    const ir::TensorType &q = op.operand(0)->type(), &k = op.operand(1)->type();
    double tk = k.rank() >= 2 ? static_cast<double>(k.shape[k.rank() - 2]) : 1;
    w.flops = 2 * elements(q) * tk;
    break;
  }
  case ir::OpKind::Reshape:
  case ir::OpKind::Transpose:
  case ir::OpKind::Broadcast:
  case ir::OpKind::Embedding:
  case ir::OpKind::Send: // a pipeline's messages: the link's time, not a
  case ir::OpKind::Recv: // device's (passes/StageBalance.h counts them)
    break;               // data movement only
  default:
    if (ir::opInfo(op.kind()).has(ir::kElementwise))
      w.flops = elements(out);
    else // normalisations, softmax, reductions, losses
      w.flops = 5 * (op.numOperands() ? elements(op.operand(0)->type())
                                      : elements(out));
  }
  return w;
}

OpLayers opLayers(const ir::Module &forward) {
  OpLayers out;
  std::map<std::string, int64_t> index;
  std::vector<const ir::Op *> unscoped; // since the last layered op
  int64_t current = kBeforeLayers;
  for (const auto &op : forward.graph().ops()) {
    std::string layer = layerOfScope(op->scope());
    if (layer.empty()) {
      out.layerOf[op.get()] = current;
      unscoped.push_back(op.get());
      continue;
    }
    auto [it, added] =
        index.try_emplace(layer, static_cast<int64_t>(out.names.size()));
    if (added)
      out.names.push_back(layer);
    current = it->second;
    out.layerOf[op.get()] = current;
    unscoped.clear();
  }
  // What follows the last layered op is the head.
  if (current != kBeforeLayers)
    for (const ir::Op *op : unscoped)
      out.layerOf[op] = kAfterLayers;
  return out;
}

ModelLayers forwardLayers(const ir::Module &forward) {
  ModelLayers out;
  out.first.name = "embedding";
  out.last.name = "head";
  OpLayers layers = opLayers(forward);
  for (const std::string &name : layers.names) {
    out.layers.emplace_back();
    out.layers.back().name = name;
  }
  llvm::DenseMap<const ir::Value *, bool> seenParam;
  for (const auto &op : forward.graph().ops()) {
    int64_t layer = layers.layerOf[op.get()];
    LayerCost *into = layer >= 0               ? &out.layers[layer]
                      : layer == kBeforeLayers ? &out.first
                                               : &out.last;
    into->forward += opWork(*op);
    into->activationBytes += bytesOf(op->result()->type());
    for (const ir::Value *v : op->operands())
      if (v->isPersistent() && !seenParam[v]) {
        seenParam[v] = true;
        into->paramBytes += bytesOf(v->type());
      }
  }
  return out;
}

} // namespace mgc::passes
