#include "passes/ModuleCut.h"

namespace mgc::passes {

using ir::Value;

std::string describeOp(const ir::Op &op) {
  std::string s = op.name().str();
  if (!op.scope().empty())
    s += " in " + op.scope();
  return s;
}

std::unique_ptr<ir::Module>
ModuleExtract::build(const llvm::DenseSet<const ir::Op *> &ops,
                     llvm::ArrayRef<const ir::Value *> alsoRead) {
  map_.clear();
  auto m = std::make_unique<ir::Module>(from_.name());
  m->attrs() = from_.attrs();
  ir::Graph &g = m->graph();
  llvm::DenseSet<const Value *> used(alsoRead.begin(), alsoRead.end());
  for (const auto &op : from_.graph().ops())
    if (ops.contains(op.get()))
      for (const Value *v : op->operands())
        used.insert(v);
  for (const auto &arg : from_.graph().arguments()) {
    if (!used.contains(arg.get()))
      continue;
    map_[arg.get()] = g.addArgumentLike(*arg, arg->type());
  }
  for (const auto &[old, name] : replaced_) {
    if (!used.contains(old))
      continue;
    Value *v = g.addInput(name, old->type());
    v->setSharding(old->sharding());
    map_[old] = v;
  }
  for (const Received &r : received_) {
    if (!used.contains(r.value))
      continue;
    ir::Attrs attrs;
    attrs.set("peer", r.peer);
    attrs.set("value", r.name);
    attrs.set("dtype", std::string(ir::dtypeName(r.value->type().dtype)));
    const auto &shape = r.value->type().shape;
    attrs.set("shape", std::vector<int64_t>(shape.begin(), shape.end()));
    ir::Op *recv =
        g.createOp(ir::OpKind::Recv, {}, std::move(attrs), r.value->type());
    recv->result()->setSharding(r.value->sharding());
    map_[r.value] = recv->result();
  }
  for (const auto &op : from_.graph().ops()) {
    if (!ops.contains(op.get()))
      continue;
    llvm::SmallVector<Value *, 3> operands;
    for (const Value *v : op->operands())
      operands.push_back(map_.lookup(v));
    ir::Op *copy = g.createOp(op->kind(), operands, op->attrs(), op->type(),
                              op->loc(), op->scope());
    copy->result()->setSharding(op->result()->sharding());
    map_[op->result()] = copy->result();
  }
  return m;
}

} // namespace mgc::passes
