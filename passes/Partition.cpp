// partition: one program per device from the sharded logical module. Each
// op becomes its device version (ShardingRules.h localizeOp) under the
// signature that matches its placements; each communication op gets the
// part sizes of the dimension it moves (and the device's part when the
// parts are uneven). Programs are compared by their text, so devices whose
// programs are identical share one.
#include "passes/Partition.h"

#include "passes/ShardStrategy.h"
#include "passes/ShardingRules.h"

#include "ir/Builder.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

#include "llvm/ADT/DenseMap.h"

#include <map>

namespace mgc::passes {

using ir::Sharding;
using ir::Value;

namespace {

class DeviceBuilder {
public:
  DeviceBuilder(const ir::Module &logical, const ir::Mesh &mesh,
                int64_t device, DiagnosticEngine &diag)
      : logical_(logical), mesh_(mesh), coords_(mesh.coords(device)),
        diag_(diag) {}

  std::unique_ptr<ir::Module> build() {
    auto m = std::make_unique<ir::Module>(logical_.name());
    m->attrs() = logical_.attrs();
    ir::Graph &g = m->graph();
    const ir::Graph &lg = logical_.graph();
    for (const auto &arg : lg.arguments()) {
      ir::TensorType t = local(arg.get());
      map_[arg.get()] = g.addArgumentLike(*arg, t);
    }
    ir::Builder b(g);
    for (const auto &op : lg.ops()) {
      b.setLoc(op->loc());
      b.setScope(op->scope());
      Value *v = op->info().has(ir::kCollective) ||
                         op->kind() == ir::OpKind::LocalSplit
                     ? communication(b, *op)
                     : compute(b, *op);
      if (!v)
        return nullptr;
      v->setSharding(op->result()->sharding());
      map_[op->result()] = v;
    }
    for (const ir::Output &o : lg.outputs())
      g.addOutput(o.name, map_[o.value], o.isLoss, o.loc);
    for (const ir::Update &u : lg.updates())
      g.addUpdate(map_[u.target], map_[u.value], u.loc);
    return m;
  }

private:
  ir::TensorType local(const Value *v) const {
    return ir::localType(v->type(), v->sharding(), mesh_, coords_);
  }

  llvm::SmallVector<Value *, 3> operands(const ir::Op &op) const {
    llvm::SmallVector<Value *, 3> out;
    for (Value *v : op.operands())
      out.push_back(map_.lookup(v));
    return out;
  }

  static llvm::SmallVector<ir::Placement, 3>
  operandPlacements(const ir::Op &op, llvm::StringRef axis) {
    llvm::SmallVector<ir::Placement, 3> out;
    for (const Value *v : op.operands())
      out.push_back(v->sharding().get(axis));
    return out;
  }

  Value *fail(const ir::Op &op, const std::string &message) {
    diag_.error(op.loc(), "partition: " + op.name().str() + ": " + message);
    return nullptr;
  }

  Value *compute(ir::Builder &b, const ir::Op &op) {
    double scale = 1;
    std::optional<IndexPart> index;
    for (size_t a = 0; a < mesh_.axes().size(); ++a) {
      const ir::MeshAxis &axis = mesh_.axes()[a];
      std::optional<ShardingSignature> sig =
          signatureFor(op, axis, operandPlacements(op, axis.name),
                       op.result()->sharding().get(axis.name));
      if (!sig)
        return fail(op, "its placements " +
                            op.result()->sharding().str() +
                            " match no sharding rule on axis '" + axis.name +
                            "' (the module was not made by the shard pass)");
      // A split of the dimension the op's ids index: the device op works
      // on its part of it (the coordinate only when the parts are uneven,
      // so that even programs stay the same on every device).
      if (std::optional<int64_t> n = indexedSplit(op, *sig)) {
        std::vector<int64_t> sizes = ir::splitSizes(*n, axis);
        bool uneven = !ir::allEqual(sizes);
        index = IndexPart{axis.name, std::move(sizes),
                          uneven ? coords_[a] : int64_t(-1)};
      }
      if (sig->scaleOperand >= 0) {
        const Value *x = op.operand(sig->scaleOperand);
        int64_t n = x->type().shape[sig->scaleDim];
        if (x->sharding().get(axis.name).isSplit() && n > 0)
          scale *= static_cast<double>(
                       ir::splitSizes(n, axis)[coords_[a]]) /
                   static_cast<double>(n);
      }
    }
    ir::ValueOrError r = localizeOp(b, op, operands(op), local(op.result()),
                                    scale, index ? &*index : nullptr);
    if (!r.ok())
      return fail(op, r.error);
    return r.value;
  }

  Value *communication(ir::Builder &b, const ir::Op &op) {
    const ir::Attrs &la = op.attrs();
    const std::string &axisName = la.getString("axis");
    int a = mesh_.axisIndex(axisName);
    if (a < 0)
      return fail(op, "axis '" + axisName + "' is not in the mesh " +
                          mesh_.str());
    const ir::MeshAxis &axis = mesh_.axes()[a];
    ir::Attrs attrs = la;
    bool uneven = false;
    auto sizesOf = [&](int64_t dim) {
      std::vector<int64_t> s =
          ir::splitSizes(op.operand(0)->type().shape[dim], axis);
      uneven |= !ir::allEqual(s);
      return s;
    };
    bool allReduce = op.kind() == ir::OpKind::AllReduce ||
                     op.kind() == ir::OpKind::AllReduceMax;
    switch (op.kind()) {
    case ir::OpKind::AllReduce:
    case ir::OpKind::AllReduceMax:
      break;
    case ir::OpKind::AllToAll:
      attrs.set("from_sizes", sizesOf(la.getInt("from")));
      attrs.set("to_sizes", sizesOf(la.getInt("to")));
      break;
    default:
      attrs.set("sizes", sizesOf(la.getInt("dim")));
      break;
    }
    if (!allReduce)
      attrs.set("part", uneven ? coords_[a] : int64_t(-1));
    ir::ValueOrError r = b.create(op.kind(), operands(op), std::move(attrs));
    if (!r.ok())
      return fail(op, r.error);
    if (r.value->type() != local(op.result()))
      return fail(op, "its device type " + r.value->type().str() +
                          " is not the part " + local(op.result()).str() +
                          " of its placement " +
                          op.result()->sharding().str());
    return r.value;
  }

  const ir::Module &logical_;
  const ir::Mesh &mesh_;
  llvm::SmallVector<int64_t, 4> coords_;
  DiagnosticEngine &diag_;
  llvm::DenseMap<const Value *, Value *> map_;
};

} // namespace

FailureOr<DevicePrograms> partitionModule(const ir::Module &sharded,
                                          DiagnosticEngine &diag) {
  std::optional<ir::Mesh> mesh = moduleMesh(sharded, "partition", diag);
  if (!mesh)
    return failure();
  // The shard pass places values on every axis but those of size 1
  // (placementMesh): a value lacking one of those is whole on it.
  auto unplaced = [&](const Value *v) {
    for (const ir::MeshAxis &axis : mesh->axes())
      if (axis.size > 1 && !v->sharding().find(axis.name))
        return true;
    return false;
  };
  for (const auto &arg : sharded.graph().arguments())
    if (unplaced(arg.get())) {
      diag.error(arg->loc(), "partition: '" + arg->name() +
                                 "' has no placement on every axis of " +
                                 mesh->str() + " (run the shard pass first)");
      return failure();
    }
  for (const auto &op : sharded.graph().ops())
    if (unplaced(op->result())) {
      diag.error(op->loc(), "partition: the result of " + op->name().str() +
                                " has no placement on every axis of " +
                                mesh->str() + " (run the shard pass first)");
      return failure();
    }

  DevicePrograms out;
  out.mesh = *mesh;
  std::map<std::string, size_t> byText;
  std::vector<std::string> devicesOf;
  for (int64_t d = 0; d < mesh->numDevices(); ++d) {
    std::unique_ptr<ir::Module> m =
        DeviceBuilder(sharded, *mesh, d, diag).build();
    if (!m)
      return failure();
    std::string text = ir::printModuleToString(*m);
    auto [it, inserted] = byText.try_emplace(text, out.programs.size());
    if (inserted) {
      if (failed(ir::verify(*m, diag))) {
        diag.error("partition: the program of device " + std::to_string(d) +
                   " does not verify (internal error)");
        return failure();
      }
      out.programs.push_back(std::move(m));
      devicesOf.emplace_back();
    }
    std::string &list = devicesOf[it->second];
    list += (list.empty() ? "" : ",") + std::to_string(d);
    out.programOf.push_back(it->second);
  }
  for (size_t i = 0; i < out.programs.size(); ++i)
    out.programs[i]->attrs().set(kDevicesAttr, devicesOf[i]);
  return out;
}

} // namespace mgc::passes
