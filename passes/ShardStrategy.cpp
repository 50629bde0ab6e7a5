#include "passes/ShardStrategy.h"

#include "passes/Autodiff.h"
#include "passes/Pass.h"
#include "passes/PassManager.h"
#include "passes/Reshard.h"

namespace mgc::passes {

using ir::Placement;
using ir::Sharding;
using ir::Value;

std::optional<ir::Mesh> moduleMesh(const ir::Module &module,
                                   llvm::StringRef pass,
                                   DiagnosticEngine &diag) {
  const ir::AttrValue *a = module.attrs().find(ir::kMeshAttr);
  if (!a || !std::holds_alternative<std::string>(*a)) {
    diag.error(pass.str() + " needs the module attribute mesh = \"dp=N,...\"" +
               " (mgc compile --mesh)");
    return std::nullopt;
  }
  std::string error;
  std::optional<ir::Mesh> mesh =
      ir::Mesh::parse(std::get<std::string>(*a), error);
  if (!mesh)
    diag.error(pass.str() + ": module attribute mesh: " + error);
  return mesh;
}

std::optional<ir::Mesh> placementMesh(const ir::Module &module,
                                      llvm::StringRef pass,
                                      DiagnosticEngine &diag) {
  std::optional<ir::Mesh> mesh = moduleMesh(module, pass, diag);
  if (!mesh)
    return mesh;
  std::vector<ir::MeshAxis> axes;
  for (const ir::MeshAxis &axis : mesh->axes())
    if (axis.size > 1)
      axes.push_back(axis);
  return ir::Mesh(std::move(axes));
}

int64_t zeroSplitDim(const ir::TensorType &type, const Sharding &s,
                     int64_t size) {
  int64_t best = -1;
  for (int64_t d = 0; d < type.rank(); ++d) {
    if (!s.axisSplitting(d).empty() || type.shape[d] < size)
      continue;
    if (best < 0 || type.shape[d] > type.shape[best])
      best = d;
  }
  return best;
}

namespace {

// The argument's hints restricted to the mesh (hints for axes the mesh does
// not have do not apply), checked against its type.
LogicalResult placeArgument(Value *arg, const ir::Mesh &mesh,
                            DiagnosticEngine &diag) {
  Sharding hinted = arg->sharding();
  Sharding s;
  const char *what =
      arg->kind() == ir::ValueKind::Input ? "input" : "parameter";
  for (const ir::MeshAxis &axis : mesh.axes()) {
    Placement p = hinted.get(axis.name);
    // Inputs are batches of data, split on dp by their first dimension,
    // unless declared otherwise (the frontend's dp=R for an input whose
    // leading dimension is not the batch, or a shard() hint).
    if (!hinted.find(axis.name) && axis.name == ir::kDataAxis &&
        arg->kind() == ir::ValueKind::Input && arg->type().rank() > 0)
      p = Placement::split(0);
    if (p.isPartial()) {
      diag.error(arg->loc(), std::string(what) + " '" + arg->name() +
                                 "' cannot be partial sums on axis '" +
                                 axis.name + "'");
      return failure();
    }
    if (p.isSplit()) {
      int64_t d = p.dim;
      if (d >= arg->type().rank()) {
        diag.error(arg->loc(), std::string(what) + " '" + arg->name() +
                                   "' of type " + arg->type().str() +
                                   " has no dimension " + std::to_string(d) +
                                   " to split on axis '" + axis.name + "'");
        return failure();
      }
      int64_t n = arg->type().shape[d];
      if (n < axis.size) {
        diag.error(arg->loc(),
                   "dimension " + std::to_string(d) + " of " + what + " '" +
                       arg->name() + "' has size " + std::to_string(n) +
                       ", which " + axis.name + "=" +
                       std::to_string(axis.size) +
                       " cannot split (fewer elements than devices)");
        return failure();
      }
      if (arg->kind() == ir::ValueKind::Input && axis.weights.empty() &&
          n % axis.size != 0) {
        diag.error(arg->loc(),
                   "dimension " + std::to_string(d) + " of input '" +
                       arg->name() + "' has size " + std::to_string(n) +
                       ", which " + axis.name + "=" +
                       std::to_string(axis.size) +
                       " does not divide; change the batch size or give " +
                       "the devices weights (--dp-weights)");
        return failure();
      }
      if (llvm::StringRef other = s.axisSplitting(d); !other.empty()) {
        diag.error(arg->loc(), std::string(what) + " '" + arg->name() +
                                   "': dimension " + std::to_string(d) +
                                   " is split on both '" + other.str() +
                                   "' and '" + axis.name + "'");
        return failure();
      }
    }
    s.set(axis.name, p);
  }
  arg->setSharding(std::move(s));
  return success();
}

} // namespace

LogicalResult placeArgumentsAndGradients(ir::Module &module,
                                         DiagnosticEngine &diag) {
  std::optional<ir::Mesh> mesh = placementMesh(module, "shard-strategy", diag);
  if (!mesh)
    return failure();
  int64_t zero = 0;
  if (const ir::AttrValue *a = module.attrs().find(kZeroAttr)) {
    if (!std::holds_alternative<int64_t>(*a) || std::get<int64_t>(*a) < 0 ||
        std::get<int64_t>(*a) > 2) {
      diag.error(std::string("module attribute ") + kZeroAttr +
                 ": expected the ZeRO stage 0, 1 or 2");
      return failure();
    }
    zero = std::get<int64_t>(*a);
  }
  ir::Graph &g = module.graph();
  bool ok = true;
  for (const auto &arg : g.arguments())
    ok &= succeeded(placeArgument(arg.get(), *mesh, diag));
  if (!ok)
    return failure();

  const ir::MeshAxis *dp = mesh->findAxis(ir::kDataAxis);
  for (Value *p : g.params()) {
    const std::string name = gradOutputName(p->name());
    for (ir::Output &o : g.outputs()) {
      if (o.name != name || o.value->isArgument())
        continue;
      Sharding s = p->sharding();
      if (dp) {
        int64_t d = zero > 0 ? zeroSplitDim(p->type(), s, dp->size) : -1;
        s.set(ir::kDataAxis, d >= 0 ? Placement::split(d) : Placement::replicate());
      }
      o.value->setSharding(completeSharding(s, *mesh));
    }
  }
  return success();
}

namespace {

class ShardStrategyPass : public Pass {
public:
  llvm::StringRef name() const override { return "shard-strategy"; }
  LogicalResult run(ir::Module &module, DiagnosticEngine &diag) override {
    return placeArgumentsAndGradients(module, diag);
  }
};

} // namespace

std::unique_ptr<Pass> createShardStrategyPass() {
  return std::make_unique<ShardStrategyPass>();
}

} // namespace mgc::passes
