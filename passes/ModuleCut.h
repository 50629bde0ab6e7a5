// A part of a module as a module of its own: the parts a step is cut into
// (gradient accumulation's micro-batch and apply parts, a pipeline's stage
// programs) are each the ops of the part, the arguments they read, and the
// values other parts make as new inputs.
#pragma once

#include "ir/Graph.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mgc::passes {

// An op as errors about cutting name it: "matmul in blocks.1.attn".
std::string describeOp(const ir::Op &op);

class ModuleExtract {
public:
  // `replaced`: values of `from` that the part takes as inputs of these
  // names instead of computing them, in the order the inputs are declared.
  ModuleExtract(const ir::Module &from,
                std::vector<std::pair<const ir::Value *, std::string>> replaced)
      : from_(from), replaced_(std::move(replaced)) {}

  // Makes `v`, when the part reads it, a recv op of the value `name` from
  // pipeline stage `peer` (ir/OpKinds.def) instead of an input.
  void receive(const ir::Value *v, int64_t peer, std::string name) {
    received_.push_back({v, peer, std::move(name)});
  }

  // A module (attributes and placements kept, no outputs) with the ops of
  // `from` in `ops`, in their order, the arguments of `from` they read, and
  // the replaced values they read as inputs; `alsoRead` are values the
  // caller reads too (an update's target, a result that is an argument).
  std::unique_ptr<ir::Module>
  build(const llvm::DenseSet<const ir::Op *> &ops,
        llvm::ArrayRef<const ir::Value *> alsoRead = {});

  // The copy of a value of `from` in the last module built (null when it
  // has none).
  ir::Value *lookup(const ir::Value *v) const { return map_.lookup(v); }

private:
  const ir::Module &from_;
  std::vector<std::pair<const ir::Value *, std::string>> replaced_;
  struct Received {
    const ir::Value *value;
    int64_t peer;
    std::string name;
  };
  std::vector<Received> received_;
  llvm::DenseMap<const ir::Value *, ir::Value *> map_;
};

} // namespace mgc::passes
