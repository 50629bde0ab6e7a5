// The checks of a mesh's device programs, shared by every backend.
#include "backend/DeviceMesh.h"

#include "backend/MemoryPlan.h"
#include "backend/PlanReport.h"

#include <algorithm>

namespace mgc::backend {

namespace {

std::string devicePrefix(int64_t device) {
  return "device " + std::to_string(device) + ": ";
}

// A communication op as the sequence check sees it.
struct CommOp {
  size_t step;
  const ir::Op *op;
  std::string str() const {
    return op->name().str() + " on '" + op->attrs().getString("axis") + "'";
  }
};

std::vector<CommOp> commOps(const Executable &exe) {
  std::vector<const ir::Op *> ops;
  for (const auto &op : exe.module->graph().ops())
    ops.push_back(op.get());
  std::vector<CommOp> result;
  for (size_t i = 0; i < exe.order.size() && exe.order[i] < ops.size(); ++i)
    if (ops[exe.order[i]]->info().has(ir::kCollective))
      result.push_back({i, ops[exe.order[i]]});
  return result;
}

// Every device must issue the same communication ops (kind and axis) in
// the same order, or a collective would meet the wrong peer call or wait
// forever; and each must name an axis of the mesh.
LogicalResult checkCommunication(const ir::Mesh &mesh,
                                 llvm::ArrayRef<const Executable *> programs,
                                 DiagnosticEngine &diag) {
  std::vector<CommOp> first = commOps(*programs[0]);
  for (size_t d = 0; d < programs.size(); ++d) {
    if (d > 0 && programs[d] == programs[0])
      continue;
    std::vector<CommOp> ops = commOps(*programs[d]);
    for (const CommOp &c : ops)
      if (mesh.axisIndex(c.op->attrs().getString("axis")) < 0) {
        diag.error(c.op->loc(),
                   devicePrefix(static_cast<int64_t>(d)) + "op %" +
                       std::to_string(c.step) + " (" + c.str() +
                       ") communicates over an axis that the mesh " +
                       mesh.str() + " does not have");
        return failure();
      }
    if (d == 0)
      continue;
    for (size_t i = 0; i < std::min(ops.size(), first.size()); ++i)
      if (ops[i].op->kind() != first[i].op->kind() ||
          ops[i].op->attrs().getString("axis") !=
              first[i].op->attrs().getString("axis")) {
        diag.error(ops[i].op->loc(),
                   devicePrefix(static_cast<int64_t>(d)) + "communication op " +
                       std::to_string(i + 1) + " is " + ops[i].str() +
                       " where device 0 has " + first[i].str() +
                       ": every device must issue the same communication "
                       "ops in the same order");
        return failure();
      }
    if (ops.size() != first.size()) {
      diag.error(devicePrefix(static_cast<int64_t>(d)) + "the program has " +
                 std::to_string(ops.size()) +
                 " communication ops but device 0's has " +
                 std::to_string(first.size()) +
                 ": every device must issue the same communication ops in "
                 "the same order");
      return failure();
    }
  }
  return success();
}

} // namespace

std::string traceDetail(const ir::Op &op, const ir::Mesh &mesh) {
  if (!op.info().has(ir::kCollective))
    return op.scope();
  const std::string &axis = op.attrs().getString("axis");
  const ir::MeshAxis *a = mesh.findAxis(axis);
  uint64_t bytes =
      commBytes(op.kind(), a ? a->size : 1, typeBytes(op.operand(0)->type()),
                typeBytes(op.type()));
  return "axis " + axis + ", " + formatBytes(bytes);
}

LogicalResult checkMeshPrograms(const ir::Mesh &mesh,
                                llvm::ArrayRef<const Executable *> programs,
                                DiagnosticEngine &diag) {
  int64_t n = mesh.numDevices();
  if (static_cast<int64_t>(programs.size()) != n) {
    diag.error("the mesh " + mesh.str() + " has " + std::to_string(n) +
               " devices but " + std::to_string(programs.size()) +
               " device programs were given");
    return failure();
  }
  for (int64_t d = 0; d < n; ++d)
    if (!programs[d] || !programs[d]->module) {
      diag.error(devicePrefix(d) + "no program");
      return failure();
    }
  // Every program is checked before the communication ops are compared
  // (the comparison walks each program's order).
  for (int64_t d = 0; d < n; ++d) {
    bool seen = std::find(programs.begin(), programs.begin() + d,
                          programs[d]) != programs.begin() + d;
    if (!seen && failed(checkExecutable(*programs[d],
                                        programs[d]->module->name(), diag))) {
      diag.error(devicePrefix(d) + "its program cannot run");
      return failure();
    }
  }
  return checkCommunication(mesh, programs, diag);
}

} // namespace mgc::backend
