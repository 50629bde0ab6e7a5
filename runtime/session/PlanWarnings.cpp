#include "runtime/session/PlanWarnings.h"

#include "backend/PlanReport.h"

#include <numeric>
#include <optional>
#include <set>

namespace mgc::session {

namespace {

// The sizes that tp must divide for the hinted splits to hold: attention's
// query and key/value heads, and each dimension a parameter is split along
// on tp; with what each is, for the message.
std::vector<std::pair<int64_t, std::string>>
tpDivides(const ir::Module &logical, const backend::PlanReport &report) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::set<int64_t> heads, kvHeads;
  for (const auto &op : logical.graph().ops())
    if (op->kind() == ir::OpKind::Attention && op->operands().size() >= 2) {
      const ir::TensorType &q = op->operands()[0]->type();
      const ir::TensorType &k = op->operands()[1]->type();
      if (q.rank() >= 3)
        heads.insert(q.shape[q.rank() - 3]);
      if (k.rank() >= 3)
        kvHeads.insert(k.shape[k.rank() - 3]);
    }
  for (int64_t h : heads)
    out.push_back({h, "attention's " + std::to_string(h) + " heads"});
  for (int64_t h : kvHeads)
    if (!heads.count(h))
      out.push_back(
          {h, "attention's " + std::to_string(h) + " key/value heads"});
  for (const backend::PlanParam &p : report.params) {
    ir::Placement tp = p.sharding.get(ir::kTensorAxis);
    if (tp.isSplit())
      out.push_back({p.logical.shape[static_cast<size_t>(tp.dim)],
                     "dimension " + std::to_string(tp.dim) + " of '" + p.name +
                         "' (" + std::to_string(p.logical.shape[tp.dim]) +
                         ")"});
  }
  return out;
}

// The part that runs the forward and backward (the micro-batch part with
// accumulation or a pipeline), and its plan report.
const MeshPart &workPart(const MeshStep &step) {
  return step.micro.programs.programs.empty() ? step.step : step.micro;
}
backend::PlanReport workReport(const MeshStep &step) {
  const MeshPart &part = workPart(step);
  return backend::buildPlanReport(step.logicalOf(part), part.programs, {});
}

// What each device sends per step in the plan of `config` with a tp axis
// of size `tp`, if it builds.
std::optional<uint64_t> sentWithTp(const ir::Module &model, MeshConfig config,
                                   int64_t tp) {
  std::vector<ir::MeshAxis> axes(config.mesh.axes().begin(),
                                 config.mesh.axes().end());
  for (ir::MeshAxis &a : axes)
    if (a.name == ir::kTensorAxis)
      a.size = tp;
  config.mesh = ir::Mesh(std::move(axes));
  std::string text;
  llvm::raw_string_ostream quiet(text);
  DiagnosticEngine diag(quiet);
  auto other = buildMeshStep(model, config, diag);
  if (other.failed())
    return std::nullopt;
  return workReport(*other).maxCommBytesPerDevice();
}

} // namespace

std::vector<std::string> planWarnings(const MeshStep &step,
                                      const ir::Module &model,
                                      const MeshConfig &config) {
  const ir::MeshAxis *tp = step.mesh.findAxis(ir::kTensorAxis);
  if (!tp || tp->size <= 1)
    return {};
  const ir::Module &logical = step.logicalOf(workPart(step));
  backend::PlanReport report = workReport(step);
  std::string mesh = "tp=" + std::to_string(tp->size);
  bool anySplit = false;
  for (const backend::PlanParam &p : report.params)
    anySplit |= p.sharding.get(ir::kTensorAxis).isSplit();
  if (!anySplit && !report.params.empty())
    return {mesh + " splits no parameter of '" + logical.name() +
            "' (it has no tp hints): each of the " + std::to_string(tp->size) +
            " tp devices holds the whole model and computes the same; give "
            "its weights shard hints (shard(w, tp=S1), docs/parallel.md) or "
            "leave tp out"};

  // Collectives on tp that move values between splits: a plan whose hints
  // fit tp only all-reduces partial sums there.
  size_t moves = 0, collectives = 0;
  uint64_t movedBytes = 0, allBytes = report.maxCommBytesPerDevice();
  std::vector<std::string> params;
  for (const backend::PlanComm &c : report.comms) {
    if (!c.collective)
      continue;
    ++collectives;
    if (c.axis != ir::kTensorAxis || c.kind == ir::OpKind::AllReduce ||
        c.kind == ir::OpKind::AllReduceMax)
      continue;
    ++moves;
    movedBytes += c.maxBytes();
    llvm::StringRef producer(c.producer);
    if (producer.consume_front("param ") && params.size() < 3 &&
        std::find(params.begin(), params.end(), producer.str()) == params.end())
      params.push_back(producer.str());
  }
  if (moves == 0)
    return {};
  std::string text = mesh + " does not fit '" + logical.name() +
                     "': " + std::to_string(moves) + " of the plan's " +
                     std::to_string(collectives) + " collectives (" +
                     backend::formatBytes(movedBytes) + " of " +
                     backend::formatBytes(allBytes) +
                     " sent per device per step) move values between "
                     "splits on tp";
  for (size_t i = 0; i < params.size(); ++i)
    text += (i ? ", '" : ", among them the parameters '") + params[i] + "'";
  // What tp must divide, what it does not, and the largest tp that fits.
  auto sizes = tpDivides(logical, report);
  std::string notDivided;
  int64_t fits = 0;
  for (const auto &[n, what] : sizes) {
    fits = std::gcd(fits, n);
    if (n % tp->size != 0 && notDivided.empty())
      notDivided = what;
  }
  if (!notDivided.empty())
    text += ": " + std::to_string(tp->size) + " does not divide " + notDivided;
  int64_t best = 1;
  for (int64_t t = tp->size - 1; t > 1 && fits > 0; --t)
    if (fits % t == 0) {
      best = t;
      break;
    }
  if (best > 1) {
    text += "; tp=" + std::to_string(best) +
            " divides the heads and every split dimension";
    if (std::optional<uint64_t> sent = sentWithTp(model, config, best))
      text += ": its plan sends " + backend::formatBytes(*sent) +
              " per device per step, against " + backend::formatBytes(allBytes);
  }
  return {text};
}

} // namespace mgc::session
