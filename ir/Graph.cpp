#include "ir/Graph.h"

#include "llvm/ADT/DenseMap.h"

namespace mgc::ir {

llvm::StringRef valueKindWord(ValueKind kind) {
  switch (kind) {
  case ValueKind::Param:
    return "parameter";
  case ValueKind::State:
    return "state";
  case ValueKind::Result:
    return "result";
  case ValueKind::Input:
    break;
  }
  return "input";
}

std::string formatInit(const Init &init) {
  switch (init.kind) {
  case InitKind::Zeros:
    return "zeros";
  case InitKind::Ones:
    return "ones";
  case InitKind::Xavier:
    return "xavier";
  case InitKind::Normal:
    return "normal(" + formatDouble(init.a) + ", " + formatDouble(init.b) + ")";
  case InitKind::Uniform:
    return "uniform(" + formatDouble(init.a) + ", " + formatDouble(init.b) +
           ")";
  case InitKind::TruncNormal:
    return "trunc_normal(" + formatDouble(init.a) + ", " +
           formatDouble(init.b) + ")";
  }
  return "?";
}

Loc Value::loc() const { return op_ ? op_->loc() : loc_; }

Value *Graph::addInput(llvm::StringRef name, TensorType type, Loc loc) {
  auto v = std::make_unique<Value>();
  v->kind_ = ValueKind::Input;
  v->name_ = name.str();
  v->type_ = std::move(type);
  v->loc_ = loc;
  args_.push_back(std::move(v));
  return args_.back().get();
}

Value *Graph::addParam(llvm::StringRef name, TensorType type, Init init,
                       Loc loc) {
  auto v = std::make_unique<Value>();
  v->kind_ = ValueKind::Param;
  v->name_ = name.str();
  v->type_ = std::move(type);
  v->init_ = init;
  v->loc_ = loc;
  args_.push_back(std::move(v));
  return args_.back().get();
}

Value *Graph::addArgumentLike(const Value &arg, TensorType type) {
  Value *v = arg.kind() == ValueKind::Input
                 ? addInput(arg.name(), std::move(type), arg.loc())
                 : addParam(arg.name(), std::move(type), arg.init(), arg.loc());
  v->kind_ = arg.kind();
  v->frozen_ = arg.frozen_;
  v->sharding_ = arg.sharding_;
  return v;
}

Value *Graph::addState(llvm::StringRef name, TensorType type, Init init,
                       Loc loc) {
  Value *v = addParam(name, std::move(type), init, loc);
  v->kind_ = ValueKind::State;
  return v;
}

std::vector<Value *> Graph::inputs() const {
  std::vector<Value *> out;
  for (const auto &a : args_)
    if (a->kind() == ValueKind::Input)
      out.push_back(a.get());
  return out;
}

std::vector<Value *> Graph::params() const {
  std::vector<Value *> out;
  for (const auto &a : args_)
    if (a->kind() == ValueKind::Param)
      out.push_back(a.get());
  return out;
}

std::vector<Value *> Graph::states() const {
  std::vector<Value *> out;
  for (const auto &a : args_)
    if (a->kind() == ValueKind::State)
      out.push_back(a.get());
  return out;
}

Value *Graph::findArgument(llvm::StringRef name) const {
  for (const auto &a : args_)
    if (a->name() == name)
      return a.get();
  return nullptr;
}

Op *Graph::createOpBefore(OpIterator pos, OpKind kind,
                          llvm::ArrayRef<Value *> operands, Attrs attrs,
                          TensorType resultType, Loc loc, std::string scope) {
  std::unique_ptr<Op> op(new Op());
  op->kind_ = kind;
  op->operands_.assign(operands.begin(), operands.end());
  op->attrs_ = std::move(attrs);
  op->loc_ = loc;
  op->scope_ = std::move(scope);
  op->result_.kind_ = ValueKind::Result;
  op->result_.type_ = std::move(resultType);
  op->result_.op_ = op.get();
  Op *raw = op.get();
  ops_.insert(pos, std::move(op));
  return raw;
}

Op *Graph::createOp(OpKind kind, llvm::ArrayRef<Value *> operands, Attrs attrs,
                    TensorType resultType, Loc loc, std::string scope) {
  return createOpBefore(ops_.end(), kind, operands, std::move(attrs),
                        std::move(resultType), loc, std::move(scope));
}

void Graph::eraseOpsIf(const std::function<bool(const Op &)> &pred) {
  ops_.remove_if([&](const std::unique_ptr<Op> &op) { return pred(*op); });
}

void Graph::addOutput(llvm::StringRef name, Value *value, bool isLoss,
                      Loc loc) {
  outputs_.push_back(Output{name.str(), value, isLoss, loc});
}

const Output *Graph::lossOutput() const {
  for (const Output &o : outputs_)
    if (o.isLoss)
      return &o;
  return nullptr;
}

void Graph::addUpdate(Value *target, Value *value, Loc loc) {
  updates_.push_back(Update{target, value, loc});
}

const Update *Graph::findUpdate(const Value *target) const {
  for (const Update &u : updates_)
    if (u.target == target)
      return &u;
  return nullptr;
}

void Graph::replaceAllUsesWith(Value *from, Value *to) {
  for (auto &op : ops_)
    for (unsigned i = 0; i < op->numOperands(); ++i)
      if (op->operand(i) == from)
        op->setOperand(i, to);
  for (Output &o : outputs_)
    if (o.value == from)
      o.value = to;
  for (Update &u : updates_)
    if (u.value == from)
      u.value = to;
}

void Graph::replaceAllUsesWith(
    const llvm::DenseMap<Value *, Value *> &replace) {
  if (replace.empty())
    return;
  auto map = [&](Value *v) {
    auto it = replace.find(v);
    return it == replace.end() ? v : it->second;
  };
  for (auto &op : ops_)
    for (unsigned i = 0; i < op->numOperands(); ++i)
      if (Value *to = map(op->operand(i)); to != op->operand(i))
        op->setOperand(i, to);
  for (Output &o : outputs_)
    o.value = map(o.value);
  for (Update &u : updates_)
    u.value = map(u.value);
}

void Graph::remapResults(const std::function<Value *(Value *)> &map) {
  for (Output &o : outputs_)
    if (o.value)
      o.value = map(o.value);
  for (Update &u : updates_)
    if (u.value)
      u.value = map(u.value);
}

llvm::DenseMap<const Value *, unsigned> Graph::useCounts() const {
  llvm::DenseMap<const Value *, unsigned> counts;
  for (const auto &a : args_)
    counts[a.get()] = 0;
  for (const auto &op : ops_) {
    counts.try_emplace(op->result(), 0);
    for (const Value *v : op->operands())
      ++counts[v];
  }
  for (const Output &o : outputs_)
    ++counts[o.value];
  for (const Update &u : updates_)
    ++counts[u.value];
  return counts;
}

} // namespace mgc::ir
