#include "passes/Accumulation.h"

#include "ir/Verifier.h"
#include "passes/ModuleCut.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace mgc::passes {

using ir::Value;

namespace {

using ir::kDataAxis;

bool onDataAxis(const ir::Op &op) {
  return (op.info().has(ir::kCollective) ||
          op.kind() == ir::OpKind::LocalSplit) &&
         op.attrs().getString("axis") == kDataAxis;
}

std::string describe(const Value *v) {
  if (v->isArgument())
    return "'" + v->name() + "'";
  const ir::Op *op = v->definingOp();
  std::string s = "the result of " + op->name().str();
  if (!op->scope().empty())
    s += " in " + op->scope();
  return s;
}

// The ops of `sharded` to copy and the values that cross from the micro
// part into the apply part.
class Cut {
public:
  Cut(const ir::Module &sharded, DiagnosticEngine &diag)
      : graph_(sharded.graph()), diag_(diag) {}

  LogicalResult run() {
    markBatchValues();
    if (failed(findReductions()))
      return failure();
    for (const ir::Output &o : graph_.outputs())
      if (batch_.contains(o.value) && failed(need(o.value, micro_, true)))
        return failure();
    for (const ir::Op *op : reductions_)
      if (failed(need(op->operand(0), micro_, true)))
        return failure();
    for (const ir::Output &o : graph_.outputs())
      if (!batch_.contains(o.value) && failed(need(o.value, apply_, false)))
        return failure();
    for (const ir::Update &u : graph_.updates())
      if (failed(need(u.value, apply_, false)))
        return failure();
    return success();
  }

  const llvm::DenseSet<const Value *> &batchValues() const { return batch_; }
  const llvm::DenseSet<const ir::Op *> &microOps() const { return micro_; }
  const llvm::DenseSet<const ir::Op *> &applyOps() const { return apply_; }
  // The accumulated values: the operands of the reductions, each once.
  const std::vector<const Value *> &sums() const { return sums_; }
  bool isReduction(const ir::Op *op) const {
    return reductionSet_.contains(op);
  }

private:
  // Values that differ between micro-batches: the inputs split on dp (the
  // batch) and everything computed from them, up to the reductions.
  void markBatchValues() {
    for (const auto &arg : graph_.arguments())
      if (arg->kind() == ir::ValueKind::Input &&
          arg->sharding().get(kDataAxis).isSplit())
        batch_.insert(arg.get());
    for (const auto &op : graph_.ops()) {
      if (isCandidateReduction(*op))
        continue;
      for (const Value *v : op->operands())
        if (batch_.contains(v)) {
          batch_.insert(op->result());
          break;
        }
    }
  }

  bool isCandidateReduction(const ir::Op &op) const {
    return onDataAxis(op) && op.numOperands() == 1 &&
           batch_.contains(op.operand(0)) &&
           (op.kind() == ir::OpKind::AllReduce ||
            op.kind() == ir::OpKind::ReduceScatter) &&
           op.operand(0)->sharding().get(kDataAxis).isPartial();
  }

  // Every dp communication op on a value of the batch must be a reduction
  // of partial sums: anything else would need the other micro-batches.
  LogicalResult findReductions() {
    for (const auto &op : graph_.ops()) {
      if (!onDataAxis(*op))
        continue;
      bool ofBatch = false;
      for (const Value *v : op->operands())
        ofBatch |= batch_.contains(v);
      if (!ofBatch)
        continue;
      if (!isCandidateReduction(*op)) {
        diag_.error(op->loc(), "accumulation: " + op->name().str() +
                                   " on axis dp of " +
                                   describe(op->operand(0)) + " " +
                                   op->operand(0)->sharding().str() +
                                   " mixes the examples of the batch; gradient "
                                   "accumulation needs every micro-batch to be "
                                   "computed on its own");
        return failure();
      }
      reductions_.push_back(op.get());
      reductionSet_.insert(op.get());
      if (!sumIndex_.count(op->operand(0))) {
        sumIndex_[op->operand(0)] = sums_.size();
        sums_.push_back(op->operand(0));
      }
    }
    return success();
  }

  // Adds the ops `v` needs to `into`. The micro part must not need a
  // reduced value; the apply part reaches the batch only through the
  // reductions.
  LogicalResult need(const Value *root, llvm::DenseSet<const ir::Op *> &into,
                     bool micro) {
    std::vector<const Value *> work{root};
    while (!work.empty()) {
      const Value *v = work.back();
      work.pop_back();
      const ir::Op *op = v->definingOp();
      if (!op || into.contains(op))
        continue;
      if (micro && reductionSet_.contains(op)) {
        diag_.error(op->loc(), "accumulation: the micro-batch needs " +
                                   op->name().str() + " on axis dp of " +
                                   describe(op->operand(0)) +
                                   ", a sum over the whole batch; gradient "
                                   "accumulation needs every micro-batch to be "
                                   "computed on its own");
        return failure();
      }
      if (!micro && !reductionSet_.contains(op) && batch_.contains(v)) {
        diag_.error(op->loc(),
                    "accumulation: the step uses " + describe(v) +
                        " of the batch after the gradients are reduced; "
                        "accumulation needs it summed over micro-batches");
        return failure();
      }
      into.insert(op);
      if (!micro && reductionSet_.contains(op))
        continue; // its operand is the accumulated sum
      for (const Value *operand : op->operands())
        work.push_back(operand);
    }
    return success();
  }

  const ir::Graph &graph_;
  DiagnosticEngine &diag_;
  llvm::DenseSet<const Value *> batch_;
  std::vector<const ir::Op *> reductions_;
  llvm::DenseSet<const ir::Op *> reductionSet_;
  llvm::DenseMap<const Value *, size_t> sumIndex_;
  std::vector<const Value *> sums_;
  llvm::DenseSet<const ir::Op *> micro_, apply_;
};

} // namespace

ir::Mesh withDataAxis(const ir::Mesh &mesh) {
  if (mesh.findAxis(kDataAxis))
    return mesh;
  std::vector<ir::MeshAxis> axes{{kDataAxis, 1, {}}};
  for (const ir::MeshAxis &a : mesh.axes())
    axes.push_back(a);
  return ir::Mesh(std::move(axes));
}

ir::Mesh microBatchMesh(const ir::Mesh &mesh, int64_t k) {
  std::vector<ir::MeshAxis> axes(mesh.axes().begin(), mesh.axes().end());
  for (ir::MeshAxis &a : axes) {
    if (a.name != kDataAxis)
      continue;
    a.size *= k;
    std::vector<int64_t> weights;
    for (int64_t w : a.weights)
      weights.insert(weights.end(), k, w);
    a.weights = std::move(weights);
  }
  return ir::Mesh(std::move(axes));
}

int64_t microBatchDevice(const ir::Mesh &mesh, int64_t k, int64_t device,
                         int64_t micro) {
  llvm::SmallVector<int64_t, 4> coords = mesh.coords(device);
  int a = mesh.axisIndex(kDataAxis);
  coords[a] = coords[a] * k + micro;
  return microBatchMesh(mesh, k).deviceAt(coords);
}

FailureOr<AccumulationSplit> splitAccumulation(const ir::Module &sharded,
                                               const ir::Mesh &mesh,
                                               DiagnosticEngine &diag) {
  Cut cut(sharded, diag);
  if (failed(cut.run()))
    return failure();
  std::vector<std::pair<const Value *, std::string>> sumNames;
  for (size_t k = 0; k < cut.sums().size(); ++k)
    sumNames.emplace_back(cut.sums()[k], kMicroSumPrefix + std::to_string(k));

  AccumulationSplit out;
  out.numSums = cut.sums().size();
  const ir::Graph &g = sharded.graph();

  ModuleExtract micro(sharded, {});
  out.micro = micro.build(cut.microOps());
  for (const ir::Output &o : g.outputs())
    if (cut.batchValues().contains(o.value))
      out.micro->graph().addOutput(o.name, micro.lookup(o.value), o.isLoss,
                                   o.loc);
  for (const auto &[v, name] : sumNames)
    out.micro->graph().addOutput(name, micro.lookup(v));

  ModuleExtract apply(sharded, sumNames);
  out.apply = apply.build(cut.applyOps());
  out.apply->attrs().set(ir::kMeshAttr, mesh.str());
  for (const ir::Output &o : g.outputs())
    if (!cut.batchValues().contains(o.value))
      out.apply->graph().addOutput(o.name, apply.lookup(o.value), o.isLoss,
                                   o.loc);
  for (const ir::Update &u : g.updates())
    out.apply->graph().addUpdate(apply.lookup(u.target), apply.lookup(u.value),
                                 u.loc);

  for (ir::Module *m : {out.micro.get(), out.apply.get()})
    if (failed(ir::verify(*m, diag))) {
      diag.error("accumulation: a part of the step does not verify "
                 "(internal error)");
      return failure();
    }
  return out;
}

void fixDataAxisSplits(ir::Module &program, const ir::Mesh &microMesh,
                       int64_t microDevice) {
  int a = microMesh.axisIndex(kDataAxis);
  if (a < 0)
    return;
  int64_t coord = microMesh.coords(microDevice)[a];
  ir::Graph &g = program.graph();
  for (auto it = g.ops().begin(); it != g.ops().end();) {
    ir::Op &op = **it;
    // A dropout of the micro-batch's rows draws the mask of those rows:
    // part `coord` of the micro-batch mesh, which no device's coordinate
    // on the real mesh names (so it is tied to no axis).
    if (op.kind() == ir::OpKind::DropoutPart &&
        op.attrs().getString("axis") == kDataAxis) {
      op.attrs().set("axis", std::string());
      op.attrs().set("part", coord);
      ++it;
      continue;
    }
    if (op.kind() != ir::OpKind::LocalSplit || !onDataAxis(op)) {
      ++it;
      continue;
    }
    const std::vector<int64_t> &sizes = op.attrs().getInts("sizes");
    int64_t start = 0;
    for (int64_t c = 0; c < coord; ++c)
      start += sizes[c];
    ir::Op *slice = g.createOpBefore(it, ir::OpKind::Slice, {op.operand(0)},
                                     {{"axis", op.attrs().getInt("dim")},
                                      {"start", start},
                                      {"end", start + sizes[coord]}},
                                     op.type(), op.loc(), op.scope());
    slice->result()->setSharding(op.result()->sharding());
    g.replaceAllUsesWith(op.result(), slice->result());
    it = g.erase(it);
  }
}

} // namespace mgc::passes
