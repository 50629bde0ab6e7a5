// Grouped launches: the launch key of an elementwise op, the order that
// brings the optimizer's update ops together, the runs of one key, and the
// arena placement with the lifetimes of the runs.
#include "backend/LaunchGroups.h"

#include "ir/FusedExpr.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

#include <algorithm>

namespace mgc::backend {

namespace {

bool isFloat(const ir::Value *v) { return !ir::isInteger(v->type().dtype); }

// Graph position of every op and of the op defining each result.
struct OpIndex {
  std::vector<const ir::Op *> ops;
  llvm::DenseMap<const ir::Value *, uint32_t> producer;
};

OpIndex indexOf(const ir::Graph &graph) {
  OpIndex index;
  for (const auto &op : graph.ops()) {
    index.producer[op->result()] = static_cast<uint32_t>(index.ops.size());
    index.ops.push_back(op.get());
  }
  return index;
}

} // namespace

OperandClass operandClass(const ir::TensorType &operand,
                          const ir::TensorType &result) {
  if (operand.shape == result.shape)
    return OperandClass::Full;
  if (operand.size() == 1)
    return OperandClass::Scalar;
  return OperandClass::Other;
}

std::string elementwiseExpr(const ir::Op &op) {
  if (!isFloat(op.result()))
    return "";
  for (const ir::Value *v : op.operands())
    if (!isFloat(v))
      return "";
  if (op.kind() == ir::OpKind::Fused)
    return op.attrs().getString("expr");
  std::optional<ir::FusedOp> f = ir::fusedOpOfKind(op.kind());
  if (!f || op.numOperands() != ir::fusedOpArity(*f))
    return "";
  ir::FusedExpr expr;
  ir::FusedInstr in{*f, {}};
  for (unsigned i = 0; i < op.numOperands(); ++i)
    in.args.push_back({ir::FusedArg::Kind::Operand, i, 0});
  expr.instrs.push_back(std::move(in));
  return expr.str();
}

std::string launchKey(const ir::Op &op) {
  std::string expr = elementwiseExpr(op);
  if (expr.empty())
    return "";
  std::string key = expr + " | " + ir::dtypeName(op.type().dtype).str();
  for (const ir::Value *v : op.operands()) {
    OperandClass c = operandClass(v->type(), op.type());
    if (c == OperandClass::Other)
      return "";
    key += " " + ir::dtypeName(v->type().dtype).str() +
           (c == OperandClass::Full ? "" : "[scalar]");
  }
  return key;
}

std::vector<uint32_t> clusterUpdateOps(const ir::Graph &graph,
                                       llvm::ArrayRef<uint32_t> order) {
  OpIndex index = indexOf(graph);
  size_t n = index.ops.size();
  std::vector<std::string> key(n);
  for (size_t i = 0; i < n; ++i)
    key[i] = launchKey(*index.ops[i]);
  // The ops that move: groupable ops making an update value, and the
  // groupable ops feeding those (the clipped gradient, its square). Only
  // they: moving an op up makes its result live longer, which costs nothing
  // here (update values live to the end of the step, and the optimizer's
  // operands are all computed by the end of the backward pass) but could
  // cost an activation's bytes elsewhere.
  std::vector<bool> moves(n, false);
  for (const ir::Update &u : graph.updates()) {
    auto it = index.producer.find(u.value);
    if (it == index.producer.end() || key[it->second].empty())
      continue;
    moves[it->second] = true;
    for (const ir::Value *v : index.ops[it->second]->operands()) {
      auto def = index.producer.find(v);
      if (def != index.producer.end() && !key[def->second].empty())
        moves[def->second] = true;
    }
  }
  llvm::StringMap<std::vector<uint32_t>> byKey; // movers in the given order
  for (uint32_t i : order)
    if (i < n && moves[i])
      byKey[key[i]].push_back(i);

  std::vector<bool> emitted(n, false), inCluster(n, false);
  // Computed before the cluster starts (operands a cluster op may read).
  auto before = [&](const ir::Value *v) {
    auto def = index.producer.find(v);
    return def == index.producer.end() ||
           (emitted[def->second] && !inCluster[def->second]);
  };
  std::vector<uint32_t> out;
  out.reserve(order.size());
  for (uint32_t head : order) {
    if (head >= n || emitted[head])
      continue;
    emitted[head] = true;
    if (!moves[head]) {
      out.push_back(head);
      continue;
    }
    // Later movers of the same key whose operands are computed before the
    // cluster (not by one of its ops, which could then not share a launch).
    // A broadcast of a computed value that such an op reads (the optimizer
    // makes one per shape, where the first parameter of that shape needs
    // it) comes along, placed before the cluster.
    std::vector<uint32_t> cluster{head}, pulled;
    inCluster[head] = true;
    for (uint32_t j : byKey[key[head]]) {
      if (emitted[j])
        continue;
      std::vector<uint32_t> need;
      bool ready = true;
      for (const ir::Value *v : index.ops[j]->operands()) {
        if (before(v))
          continue;
        uint32_t def = index.producer.find(v)->second;
        const ir::Op *d = index.ops[def];
        if (!emitted[def] && d->kind() == ir::OpKind::Broadcast &&
            llvm::all_of(d->operands(), before)) {
          need.push_back(def);
          continue;
        }
        ready = false;
        break;
      }
      if (!ready)
        continue;
      for (uint32_t d : need)
        if (!emitted[d]) {
          emitted[d] = true;
          pulled.push_back(d);
        }
      emitted[j] = inCluster[j] = true;
      cluster.push_back(j);
    }
    out.insert(out.end(), pulled.begin(), pulled.end());
    out.insert(out.end(), cluster.begin(), cluster.end());
    for (uint32_t j : cluster)
      inCluster[j] = false;
  }
  return out;
}

size_t LaunchPlan::groups() const {
  return static_cast<size_t>(std::count_if(
      runs.begin(), runs.end(), [](const Run &r) { return r.size() > 1; }));
}

size_t LaunchPlan::groupedOps() const {
  size_t ops = 0;
  for (const Run &r : runs)
    if (r.size() > 1)
      ops += r.size();
  return ops;
}

LaunchPlan planLaunches(const Executable &exe, const LaunchOptions &options) {
  const ir::Graph &graph = exe.module->graph();
  OpIndex index = indexOf(graph);
  LaunchPlan plan;
  plan.order = options.reorder
                   ? clusterUpdateOps(graph, exe.order)
                   : std::vector<uint32_t>(exe.order.begin(), exe.order.end());
  const std::vector<uint32_t> &order = plan.order;
  uint32_t steps = static_cast<uint32_t>(order.size());
  std::vector<std::string> key(index.ops.size());
  if (options.group)
    for (uint32_t i : order)
      key[i] = launchKey(*index.ops[i]);

  for (uint32_t p = 0; p < steps;) {
    const std::string &k = key[order[p]];
    llvm::DenseSet<const ir::Value *> results{index.ops[order[p]]->result()};
    uint32_t q = p + 1;
    if (!k.empty())
      for (; q < steps && key[order[q]] == k; ++q) {
        const ir::Op *op = index.ops[order[q]];
        if (llvm::any_of(op->operands(), [&](const ir::Value *v) {
              return results.contains(v);
            }))
          break;
        results.insert(op->result());
      }
    plan.runs.push_back({p, q});
    p = q;
  }

  // One launch runs the whole group: its operands stay live to its end, its
  // results are live from its start.
  std::vector<BufferRequest> requests = resultBuffers(graph, order);
  for (const LaunchPlan::Run &run : plan.runs) {
    if (run.size() < 2)
      continue;
    for (uint32_t p = run.begin; p < run.end; ++p) {
      requests[order[p]].first = std::min(requests[order[p]].first, run.begin);
      for (const ir::Value *v : index.ops[order[p]]->operands()) {
        auto def = index.producer.find(v);
        if (def != index.producer.end())
          requests[def->second].last =
              std::max(requests[def->second].last, run.end - 1);
      }
    }
  }
  BufferPlacement placed = placeBuffers(requests);
  plan.offsets = std::move(placed.offsets);
  plan.peak = placed.peak;
  return plan;
}

std::string checkLaunchPlan(const Executable &exe, const LaunchPlan &plan) {
  const ir::Graph &graph = exe.module->graph();
  OpIndex index = indexOf(graph);
  size_t n = index.ops.size();
  const std::vector<uint32_t> &order = plan.order;
  if (order.size() != n || plan.offsets.size() != n)
    return "the plan does not have one step and one offset per op";
  std::vector<int64_t> position(n, -1);
  for (size_t p = 0; p < n; ++p) {
    if (order[p] >= n || position[order[p]] >= 0)
      return "the order is not a permutation of the ops";
    position[order[p]] = static_cast<int64_t>(p);
  }
  for (size_t p = 0; p < n; ++p)
    for (const ir::Value *v : index.ops[order[p]]->operands()) {
      auto def = index.producer.find(v);
      if (def != index.producer.end() &&
          position[def->second] >= static_cast<int64_t>(p))
        return "step " + std::to_string(p) + " reads a value computed later";
    }
  uint32_t at = 0;
  for (const LaunchPlan::Run &run : plan.runs) {
    if (run.begin != at || run.end <= run.begin || run.end > n)
      return "the runs do not cover the order";
    at = run.end;
  }
  if (at != n)
    return "the runs do not cover the order";

  // Ordinary lifetimes: no two results needed at one step share bytes.
  std::vector<BufferRequest> requests = resultBuffers(graph, order);
  for (size_t i = 0; i < n; ++i)
    if (requests[i].size > 0 &&
        (plan.peak < requests[i].size ||
         plan.offsets[i] > plan.peak - requests[i].size))
      return "a result lies outside the arena";
  if (auto conflict = findConflict(requests, plan.offsets))
    return "ops " + std::to_string(conflict->first) + " and " +
           std::to_string(conflict->second) + " share bytes while both live";

  auto overlap = [&](uint32_t a, uint32_t b) {
    uint64_t sa = requests[a].size, sb = requests[b].size;
    return sa && sb && plan.offsets[a] < plan.offsets[b] + sb &&
           plan.offsets[b] < plan.offsets[a] + sa;
  };
  for (const LaunchPlan::Run &run : plan.runs) {
    if (run.size() < 2)
      continue;
    std::string k = launchKey(*index.ops[order[run.begin]]);
    if (k.empty())
      return "a group of ops that cannot be grouped";
    for (uint32_t p = run.begin; p < run.end; ++p) {
      uint32_t a = order[p];
      if (launchKey(*index.ops[a]) != k)
        return "a group of ops with different launch keys";
      for (uint32_t q = run.begin; q < run.end; ++q) {
        uint32_t b = order[q];
        if (a != b && overlap(a, b))
          return "two results of one group share bytes";
        for (const ir::Value *v : index.ops[b]->operands()) {
          auto def = index.producer.find(v);
          if (def == index.producer.end())
            continue;
          if (def->second == a)
            return "an op of a group reads the result of another";
          if (a != b && overlap(a, def->second))
            return "a result of a group shares bytes with an operand of "
                   "another op of the group";
        }
      }
    }
  }
  return "";
}

} // namespace mgc::backend
