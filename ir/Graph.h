// The graph IR: a Module holds one Graph; a Graph has arguments (data inputs,
// parameters and persistent state), ops in SSA order, named outputs, and
// updates (the new value of a parameter or state after the step). Every op
// has exactly one result. Shapes are static.
#pragma once

#include "ir/Attrs.h"
#include "ir/OpInfo.h"
#include "ir/Sharding.h"
#include "ir/Types.h"
#include "support/Loc.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <functional>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mgc::ir {

class Op;
class Graph;

// Input: data fed for each step. Param: trained, persistent. State:
// persistent but not trained (optimizer moments, step counters). Result: an
// op's result.
enum class ValueKind : uint8_t { Input, Param, Result, State };
// What messages call an argument of this kind: "input", "parameter",
// "state" ("result" for an op's result).
llvm::StringRef valueKindWord(ValueKind kind);

// How a parameter is initialised. normal(mean = a, std = b),
// uniform(low = a, high = b), xavier (uniform with the Glorot bound from
// the last two dimensions), trunc_normal(mean = a, std = b): normal values
// outside mean +- 2 std drawn again. (The language's kaiming_* initialisers
// are normal and uniform with bounds from the shape.)
enum class InitKind : uint8_t {
  Zeros,
  Ones,
  Normal,
  Uniform,
  Xavier,
  TruncNormal
};
struct Init {
  InitKind kind = InitKind::Zeros;
  double a = 0;
  double b = 0;
  friend bool operator==(const Init &x, const Init &y) {
    return x.kind == y.kind && x.a == y.a && x.b == y.b;
  }
};
std::string formatInit(const Init &init); // "normal(0.0, 0.02)", "zeros"

class Value {
public:
  ValueKind kind() const { return kind_; }
  bool isArgument() const { return kind_ != ValueKind::Result; }
  const TensorType &type() const { return type_; }
  void setType(TensorType type) { type_ = std::move(type); }
  // The op that computes this value (Result), or null (arguments).
  Op *definingOp() const { return op_; }
  // Arguments: the hierarchical name ("blocks.3.attn.w_qkv"). Results: empty.
  const std::string &name() const { return name_; }
  // Parameters and state only.
  const Init &init() const { return init_; }
  // A parameter that is not trained: autodiff gives it no gradient and the
  // optimizer no state and no update. Frozen weights (fine-tuning) and
  // buffers (batch_norm's running statistics, updated by the step through a
  // `buffer.NAME` output) are frozen parameters.
  bool isFrozen() const { return frozen_; }
  void setFrozen(bool frozen) { frozen_ = frozen; }
  // A parameter the optimizer trains.
  bool isTrained() const { return kind_ == ValueKind::Param && !frozen_; }
  // Parameters and state: arguments that persist from step to step and may
  // be the target of an update.
  bool isPersistent() const {
    return kind_ == ValueKind::Param || kind_ == ValueKind::State;
  }
  Loc loc() const;
  // Its placement on the mesh axes (ir/Sharding.h); empty when none is
  // decided. Set by hints and strategies (before sharding propagation, on a
  // result it is a request the propagation honours) and by propagation.
  const Sharding &sharding() const { return sharding_; }
  void setSharding(Sharding s) { sharding_ = std::move(s); }

private:
  friend class Graph;
  friend class Op;
  ValueKind kind_ = ValueKind::Result;
  TensorType type_;
  Sharding sharding_;
  Op *op_ = nullptr;
  std::string name_;
  Init init_;
  bool frozen_ = false;
  Loc loc_;
};

class Op {
public:
  OpKind kind() const { return kind_; }
  const OpInfo &info() const { return opInfo(kind_); }
  llvm::StringRef name() const { return info().name; }

  llvm::ArrayRef<Value *> operands() const { return operands_; }
  Value *operand(unsigned i) const { return operands_[i]; }
  unsigned numOperands() const { return operands_.size(); }
  void setOperand(unsigned i, Value *v) { operands_[i] = v; }

  Value *result() { return &result_; }
  const Value *result() const { return &result_; }
  const TensorType &type() const { return result_.type(); }

  Attrs &attrs() { return attrs_; }
  const Attrs &attrs() const { return attrs_; }

  Loc loc() const { return loc_; }
  void setLoc(Loc loc) { loc_ = loc; }
  // The path of the block instance this op belongs to ("blocks.3.attn"), or
  // empty at the top level. Layer boundaries (where pipeline stages may be
  // cut) are where this changes.
  const std::string &scope() const { return scope_; }
  void setScope(std::string scope) { scope_ = std::move(scope); }

private:
  friend class Graph;
  Op() = default;
  OpKind kind_ = OpKind::Constant;
  llvm::SmallVector<Value *, 3> operands_;
  Value result_;
  Attrs attrs_;
  Loc loc_;
  std::string scope_;
};

struct Output {
  std::string name;
  Value *value = nullptr;
  bool isLoss = false;
  Loc loc;
};

// After the step, the persistent argument `target` (a parameter or state)
// takes the value `value`. All updates of one step read the values from
// before it: they happen together, after every op.
// An output `buffer.NAME` of a forward model is the new value of the frozen
// parameter NAME after a training step (batch_norm's running statistics):
// the optimizer pass turns it into an update; a forward program drops it
// (the eval-mode pass).
inline constexpr const char *kBufferOutputPrefix = "buffer.";
inline bool isBufferOutput(const Output &o) {
  return llvm::StringRef(o.name).startswith(kBufferOutputPrefix);
}

struct Update {
  Value *target = nullptr;
  Value *value = nullptr;
  Loc loc;
};

class Graph {
public:
  using OpList = std::list<std::unique_ptr<Op>>;
  using OpIterator = OpList::iterator;

  Graph() = default;
  Graph(const Graph &) = delete;
  Graph &operator=(const Graph &) = delete;

  // Arguments, in declaration order. Names are unique (callers check).
  Value *addInput(llvm::StringRef name, TensorType type, Loc loc = {});
  Value *addParam(llvm::StringRef name, TensorType type, Init init,
                  Loc loc = {});
  Value *addState(llvm::StringRef name, TensorType type, Init init,
                  Loc loc = {});
  // An argument like `arg` of another graph (its kind, name, initialiser,
  // frozen flag, placement and location) with the type `type`: how passes
  // that build a module from another copy its arguments.
  Value *addArgumentLike(const Value &arg, TensorType type);
  llvm::ArrayRef<std::unique_ptr<Value>> arguments() const { return args_; }
  std::vector<Value *> inputs() const;
  std::vector<Value *> params() const;
  std::vector<Value *> states() const;
  Value *findArgument(llvm::StringRef name) const;

  // Creates an op with a given result type (no checking: see Builder for
  // creation with shape inference, Verifier for checking). Appends at the end
  // or inserts before `pos`.
  Op *createOp(OpKind kind, llvm::ArrayRef<Value *> operands, Attrs attrs,
               TensorType resultType, Loc loc = {}, std::string scope = {});
  Op *createOpBefore(OpIterator pos, OpKind kind,
                     llvm::ArrayRef<Value *> operands, Attrs attrs,
                     TensorType resultType, Loc loc = {},
                     std::string scope = {});

  OpList &ops() { return ops_; }
  const OpList &ops() const { return ops_; }
  size_t numOps() const { return ops_.size(); }
  OpIterator erase(OpIterator it) { return ops_.erase(it); }
  // Removes every op for which `pred` holds. The caller makes sure nothing
  // still uses their results.
  void eraseOpsIf(const std::function<bool(const Op &)> &pred);

  void addOutput(llvm::StringRef name, Value *value, bool isLoss = false,
                 Loc loc = {});
  std::vector<Output> &outputs() { return outputs_; }
  const std::vector<Output> &outputs() const { return outputs_; }
  const Output *lossOutput() const;

  // Updates, in the order added (the verifier checks targets and types).
  void addUpdate(Value *target, Value *value, Loc loc = {});
  std::vector<Update> &updates() { return updates_; }
  const std::vector<Update> &updates() const { return updates_; }
  // The update of `target`, or null.
  const Update *findUpdate(const Value *target) const;

  // Makes every use of `from` (operands, outputs and update values) use `to`
  // instead. Update targets are not uses: they name the argument updated.
  void replaceAllUsesWith(Value *from, Value *to);
  // The same for many values at once, in one pass over the graph: a pass
  // replacing values one by one would be quadratic in the graph's size.
  void replaceAllUsesWith(const llvm::DenseMap<Value *, Value *> &replace);
  // Replaces the value of every output and update by `map(value)`: how a
  // pass that merged or rewrote values redirects the graph's results.
  void remapResults(const std::function<Value *(Value *)> &map);
  // Number of uses of each value (operands, outputs and update values).
  llvm::DenseMap<const Value *, unsigned> useCounts() const;

private:
  std::vector<std::unique_ptr<Value>> args_;
  OpList ops_;
  std::vector<Output> outputs_;
  std::vector<Update> updates_;
};

class Module {
public:
  explicit Module(std::string name = "main") : name_(std::move(name)) {}
  const std::string &name() const { return name_; }
  void setName(std::string name) { name_ = std::move(name); }
  Graph &graph() { return graph_; }
  const Graph &graph() const { return graph_; }
  // Module-level settings (for example the model file's train section).
  Attrs &attrs() { return attrs_; }
  const Attrs &attrs() const { return attrs_; }
  // Where the frontend found each `repeat`, by the prefix of its copies'
  // scopes ("blocks" for blocks.0, blocks.1, ...): its count, for messages
  // about a model's layers (a pipeline with more stages than layers). Not
  // part of the IR's text: a module parsed from text has none.
  std::map<std::string, Loc> &repeatLocs() { return repeatLocs_; }
  const std::map<std::string, Loc> &repeatLocs() const { return repeatLocs_; }

private:
  std::string name_;
  Attrs attrs_;
  Graph graph_;
  std::map<std::string, Loc> repeatLocs_;
};

} // namespace mgc::ir
