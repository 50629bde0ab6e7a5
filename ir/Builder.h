// Creates ops with their result type inferred by the op's shape rule.
#pragma once

#include "ir/Graph.h"

#include <string>

namespace mgc::ir {

// The created value, or what was wrong with the operands or attributes.
struct ValueOrError {
  Value *value = nullptr;
  std::string error;
  bool ok() const { return value != nullptr; }
};

class Builder {
public:
  explicit Builder(Graph &graph) : graph_(graph), pos_(graph.ops().end()) {}

  // New ops go before `pos` (default: at the end).
  void setInsertionPoint(Graph::OpIterator pos) { pos_ = pos; }
  void setInsertionPointToEnd() { pos_ = graph_.ops().end(); }
  // Location and scope given to the ops created from now on.
  void setLoc(Loc loc) { loc_ = loc; }
  Loc loc() const { return loc_; }
  void setScope(std::string scope) { scope_ = std::move(scope); }
  const std::string &scope() const { return scope_; }

  // Fills in default attributes, checks arity and attributes, infers the
  // result type; creates the op only if all that succeeds.
  ValueOrError create(OpKind kind, llvm::ArrayRef<Value *> operands,
                      Attrs attrs = {});

  // Shorthands for ops that cannot fail on well-typed operands.
  Value *constant(double value, DType dtype);
  // A scalar brought to `type`: cast to its dtype, broadcast to its shape
  // (each only where needed).
  ValueOrError splat(Value *scalar, const TensorType &type);
  Graph &graph() { return graph_; }

private:
  Graph &graph_;
  Graph::OpIterator pos_;
  Loc loc_;
  std::string scope_;
};

} // namespace mgc::ir
