#include "passes/Reshard.h"

#include <limits>

namespace mgc::passes {

using ir::Placement;
using ir::Sharding;

double axisReshardBytes(Placement from, Placement to, const ir::MeshAxis &axis,
                        double bytes) {
  double n = static_cast<double>(axis.size);
  if (from == to)
    return 0;
  // No conversion makes partial sums (on an axis of any size: reshard()
  // refuses it, so the cost model must too).
  if (to.isPartial())
    return std::numeric_limits<double>::infinity();
  if (axis.size == 1)
    return 0;
  // Partial maxima have no scatter: all-reduced, then split locally.
  if (from.isPartialMax())
    return 2 * (n - 1) / n * bytes;
  if (from.isPartial())
    return (to.isReplicate() ? 2 : 1) * (n - 1) / n * bytes;
  if (from.isSplit())
    return to.isReplicate() ? (n - 1) * bytes : (n - 1) / n * bytes;
  return 0; // R -> S: each device keeps its part
}

double localBytes(const ir::TensorType &type, const Sharding &s,
                  const ir::Mesh &mesh) {
  llvm::SmallVector<int64_t, 4> origin(mesh.axes().size(), 0);
  return static_cast<double>(ir::localType(type, s, mesh, origin).size() *
                             ir::dtypeBytes(type.dtype));
}

double reshardBytes(const ir::TensorType &type, const Sharding &from,
                    const Sharding &to, const ir::Mesh &mesh) {
  double bytes = localBytes(type, from, mesh);
  double total = 0;
  for (const ir::MeshAxis &axis : mesh.axes())
    total +=
        axisReshardBytes(from.get(axis.name), to.get(axis.name), axis, bytes);
  return total;
}

Sharding completeSharding(const Sharding &s, const ir::Mesh &mesh) {
  Sharding out;
  for (const ir::MeshAxis &axis : mesh.axes())
    out.set(axis.name, s.get(axis.name));
  return out;
}

namespace {

struct Converter {
  ir::Builder &b;
  const ir::Mesh &mesh;
  std::string &error;
  ir::Value *v;
  Sharding cur;

  bool dimFree(int64_t dim, llvm::StringRef except) const {
    llvm::StringRef a = cur.axisSplitting(dim);
    return a.empty() || a == except;
  }

  bool emit(ir::OpKind kind, llvm::StringRef axis, ir::Attrs attrs,
            Placement to) {
    attrs.set("axis", axis.str());
    ir::ValueOrError r = b.create(kind, {v}, std::move(attrs));
    if (!r.ok()) {
      error = "reshard: " + r.error;
      return false;
    }
    cur.set(axis, to);
    r.value->setSharding(cur);
    v = r.value;
    return true;
  }
};

} // namespace

ir::Value *reshard(ir::Builder &b, ir::Value *v, const Sharding &toIn,
                   const ir::Mesh &mesh, std::string &error) {
  Sharding to = completeSharding(toIn, mesh);
  Converter c{b, mesh, error, v, completeSharding(v->sharding(), mesh)};
  if (c.cur == to)
    return v;
  for (const ir::MeshAxis &axis : mesh.axes()) {
    Placement want = to.get(axis.name);
    if (want.isPartial() && c.cur.get(axis.name) != want) {
      error = "cannot make " + c.cur.str() + " into partial sums on axis '" +
              axis.name + "'";
      return nullptr;
    }
  }
  // 1. Undo splits that change: straight to the new split when its
  // dimension is free, else gather.
  for (const ir::MeshAxis &axis : mesh.axes()) {
    Placement from = c.cur.get(axis.name), want = to.get(axis.name);
    if (!from.isSplit() || from == want)
      continue;
    bool ok = want.isSplit() && c.dimFree(want.dim, axis.name)
                  ? c.emit(ir::OpKind::AllToAll, axis.name,
                           {{"from", from.dim}, {"to", want.dim}}, want)
                  : c.emit(ir::OpKind::AllGather, axis.name,
                           {{"dim", from.dim}}, Placement::replicate());
    if (!ok)
      return nullptr;
  }
  // 2. Partial sums: reduce, scattering when the target split is free.
  // Partial maxima: all-reduce the maximum (a split is made in round 3).
  for (const ir::MeshAxis &axis : mesh.axes()) {
    Placement from = c.cur.get(axis.name), want = to.get(axis.name);
    if (!from.isPartial() || from == want)
      continue;
    if (from.isPartialMax()) {
      if (!c.emit(ir::OpKind::AllReduceMax, axis.name, {},
                  Placement::replicate()))
        return nullptr;
      continue;
    }
    bool ok = want.isSplit() && c.dimFree(want.dim, axis.name)
                  ? c.emit(ir::OpKind::ReduceScatter, axis.name,
                           {{"dim", want.dim}}, want)
                  : c.emit(ir::OpKind::AllReduce, axis.name, {},
                           Placement::replicate());
    if (!ok)
      return nullptr;
  }
  // 3. New splits of replicated values: each device keeps its part.
  for (const ir::MeshAxis &axis : mesh.axes()) {
    Placement from = c.cur.get(axis.name), want = to.get(axis.name);
    if (from == want)
      continue;
    if (!from.isReplicate() || !want.isSplit() ||
        !c.dimFree(want.dim, axis.name)) {
      error = "reshard from " + c.cur.str() + " to " + to.str() +
              " is not possible on axis '" + axis.name + "'";
      return nullptr;
    }
    if (!c.emit(ir::OpKind::LocalSplit, axis.name, {{"dim", want.dim}}, want))
      return nullptr;
  }
  return c.v;
}

} // namespace mgc::passes
