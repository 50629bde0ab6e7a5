#include "runtime/session/PipelinePlan.h"

#include "backend/PlanReport.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <map>
#include <set>

namespace mgc::session {

namespace {

uint64_t bytesOf(const ir::TensorType &type) {
  return static_cast<uint64_t>(type.size()) * ir::dtypeBytes(type.dtype);
}

// The parameters each stage's programs read.
struct StageParams {
  std::map<std::string, std::vector<int64_t>> stagesOf;
  std::vector<size_t> count;   // per stage
  std::vector<uint64_t> bytes; // per stage
};

StageParams stageParams(const passes::PipelineSplit &split) {
  StageParams out;
  out.count.assign(split.stages, 0);
  out.bytes.assign(split.stages, 0);
  for (int64_t s = 0; s < split.stages; ++s) {
    std::set<std::string> seen;
    for (const auto &program : split.programs[s])
      for (const auto &arg : program->graph().arguments())
        if (arg->kind() == ir::ValueKind::Param &&
            seen.insert(arg->name()).second) {
          out.stagesOf[arg->name()].push_back(s);
          ++out.count[s];
          out.bytes[s] += bytesOf(arg->type());
        }
  }
  return out;
}

uint64_t acrossBytes(const passes::PipelineSplit &split,
                     const std::vector<size_t> &across) {
  uint64_t bytes = 0;
  for (size_t i : across)
    bytes += bytesOf(split.values[i].type);
  return bytes;
}

int64_t lastLayer(const PipelinePart &part, int64_t stage) {
  return stage + 1 < static_cast<int64_t>(part.first.size())
             ? part.first[stage + 1] - 1
             : static_cast<int64_t>(part.layers.size()) - 1;
}

std::string layerRange(const PipelinePart &part, int64_t stage) {
  int64_t first = part.first[stage];
  int64_t last = lastLayer(part, stage);
  std::string s = "layers " + std::to_string(first);
  if (last != first)
    s += "-" + std::to_string(last);
  s += " (" + part.layers[first];
  if (last != first)
    s += " .. " + part.layers[last];
  return s + ")";
}

// The values of `across` (indices into split.values), as
// "f32[2, 8, 16] (1.0 KiB)" or "2 values (2.0 KiB)".
std::string valuesText(const passes::PipelineSplit &split,
                       const std::vector<size_t> &across) {
  uint64_t bytes = acrossBytes(split, across);
  std::string what = across.size() == 1
                         ? split.values[across[0]].type.str()
                         : std::to_string(across.size()) + " values";
  return what + " (" + backend::formatBytes(bytes) + ")";
}

// What each pipeline device's part of the optimizer step holds and gives
// the others (on device 0 of its stage mesh).
struct DeviceOptimizer {
  size_t parameters = 0;
  uint64_t parameterBytes = 0, stateBytes = 0;
  size_t shared = 0;
  uint64_t sharedBytes = 0;
  // Its programs' collectives (the gradients' dp all-reduces, in buckets).
  size_t collectives = 0;
};

// Per pipeline device, what device `stageDevice` of its stage mesh holds.
std::vector<DeviceOptimizer> deviceOptimizers(const PipelinePart &part,
                                              int64_t stageDevice = 0) {
  const passes::ApplySplit &cut = part.applySplit;
  std::vector<DeviceOptimizer> out(static_cast<size_t>(cut.devices));
  for (int64_t d = 0; d < cut.devices; ++d) {
    DeviceOptimizer &o = out[static_cast<size_t>(d)];
    std::set<std::string> seen;
    for (const MeshPart *p : {&part.applyGather[d], &part.applyUpdate[d]}) {
      if (!p->logical)
        continue;
      const ir::Module &program = p->programs.programFor(stageDevice);
      for (const auto &op : program.graph().ops())
        o.collectives += op->info().has(ir::kCollective);
      for (const auto &arg : program.graph().arguments()) {
        if (!arg->isPersistent() || !seen.insert(arg->name()).second)
          continue;
        bool param = arg->kind() == ir::ValueKind::Param;
        o.parameters += param;
        (param ? o.parameterBytes : o.stateBytes) += bytesOf(arg->type());
      }
    }
  }
  for (const passes::ApplyValue &v : cut.values)
    if (v.shared) {
      ++out[static_cast<size_t>(v.owner)].shared;
      out[static_cast<size_t>(v.owner)].sharedBytes += bytesOf(v.type);
    }
  return out;
}

// The collectives of stage s's programs among the devices of its stage
// mesh (tp's all-reduces, dp's): per phase, how many of each kind on each
// axis and the bytes of the values they take, "F: 2 all_reduce on tp
// (4.0 KiB); B: ..."; "" when there are none.
std::string stageCollectives(const passes::PipelineSplit &split, int64_t s) {
  std::string out;
  const auto &programs = split.programs[static_cast<size_t>(s)];
  for (size_t p = 0; p < programs.size(); ++p) {
    if (!programs[p])
      continue;
    std::map<std::pair<std::string, std::string>, std::pair<int, uint64_t>>
        counted; // (kind, axis) -> (ops, bytes)
    for (const auto &op : programs[p]->graph().ops()) {
      if (!op->info().has(ir::kCollective) || op->operands().empty())
        continue;
      auto &[n, bytes] =
          counted[{ir::opName(op->kind()).str(),
                   op->attrs().has("axis") ? op->attrs().getString("axis")
                                           : std::string("?")}];
      ++n;
      bytes += bytesOf(op->operands()[0]->type());
    }
    if (counted.empty())
      continue;
    out +=
        std::string(out.empty() ? "" : "; ") +
        passes::phaseName(static_cast<passes::Phase>(p), split.splitBackward) +
        ":";
    bool first = true;
    for (const auto &[key, value] : counted) {
      out += std::string(first ? " " : ", ") + std::to_string(value.first) +
             " " + key.first + " on " + key.second + " (" +
             backend::formatBytes(value.second) + ")";
      first = false;
    }
  }
  return out;
}

} // namespace

void printPipelinePlan(const PipelinePart &part, llvm::raw_ostream &os) {
  const passes::Schedule &schedule = part.schedule;
  const passes::PipelineSplit &split = part.splits.front();
  os << "Pipeline: " << schedule.stages
     << (schedule.chunks > 1
             ? " devices, " + std::to_string(split.stages) + " virtual stages"
             : " stages")
     << ", schedule " << passes::scheduleName(schedule.kind) << ", "
     << schedule.micro << " micro-batches per step.\n";
  os << "Each stage's programs: "
     << (split.splitBackward ? "F (forward), I (input gradient), W (weight "
                               "gradient)"
                             : "F (forward), B (backward)")
     << "; once per step each device runs the optimizer on its own "
        "stages' parameters.\n\n";

  StageParams held = stageParams(split);
  const auto &stagesOf = held.stagesOf;
  os << "Stages (work of one micro-batch, from the cost model; memory: f32 "
        "weights, gradients and AdamW's moments, and the activations of the "
        "micro-batches the schedule holds at once):\n";
  for (int64_t s = 0; s < split.stages; ++s) {
    size_t params = held.count[s];
    uint64_t bytes = held.bytes[s];
    int64_t device = schedule.deviceOf(s);
    const passes::WorkCosts &c = part.costs[device];
    os << "  stage " << s << " on device " << device << ": "
       << layerRange(part, s) << "; " << params << " parameters, "
       << backend::formatBytes(bytes);
    if (schedule.chunks == 1)
      os << "; " << llvm::format("%.3g", c.forward / 1e9) << " GFLOP forward, "
         << llvm::format("%.3g", c.backward / 1e9) << " GFLOP backward";
    os << "; memory peak "
       << backend::formatBytes(static_cast<uint64_t>(part.memoryPeak[s]))
       << " (" << part.inFlight[s] << " micro-batches in flight)\n";
    std::string comms = stageCollectives(split, s);
    if (!comms.empty())
      os << "    collectives per micro-batch (device 0 of its stage mesh): "
         << comms << "\n";
    if (part.balanced) {
      const passes::StagePlan &plan = *part.balanced;
      // Compute and link time apart: a forward that sends its activation
      // on can take longer than a backward that sends nothing back.
      auto ms = [](double seconds) {
        return llvm::format("%.3g", seconds * 1e3);
      };
      os << "    on " << part.deviceNames[s] << ": predicted compute "
         << ms(plan.forwardSeconds[s] - plan.forwardLinkSeconds[s])
         << " ms forward, "
         << ms(plan.backwardSeconds[s] - plan.backwardLinkSeconds[s])
         << " ms backward; link " << ms(plan.forwardLinkSeconds[s])
         << " ms sending forward, " << ms(plan.backwardLinkSeconds[s])
         << " ms sending back; memory "
         << backend::formatBytes(static_cast<uint64_t>(plan.memoryBytes[s]))
         << " of "
         << backend::formatBytes(static_cast<uint64_t>(plan.deviceBytes[s]))
         << "\n";
    }
  }
  if (part.balanced) {
    // The balancer may order the devices along the pipeline; the mesh runs
    // pipeline device d on its d-th devices, so the order is the launch's.
    const std::vector<size_t> &order = part.balanced->device;
    bool inOrder = true;
    for (size_t i = 0; i < order.size(); ++i)
      inOrder &= order[i] == i;
    if (!inOrder) {
      os << "The balanced plan orders the cluster's pipeline devices ";
      for (size_t i = 0; i < order.size(); ++i)
        os << (i ? ", " : "") << order[i];
      os << " along the pipeline (as the file counts them, one per stage "
            "mesh): pipeline device d runs on the mesh's d-th devices, so "
            "list the devices in the file (and launch the ranks) in that "
            "order.\n";
    }
    double step = part.balanced->stepSeconds;
    os << "Predicted step on the cluster (1F1B): "
       << llvm::format("%.4g", step * 1e3) << " ms; an equal split of the "
       << "layers over the devices in the file's order: ";
    if (part.equalSplitSeconds)
      os << llvm::format("%.4g", *part.equalSplitSeconds * 1e3) << " ms ("
         << llvm::format("%.2f", *part.equalSplitSeconds / step)
         << "x the balanced step)\n";
    else
      os << "does not fit (" << part.equalSplitError << ")\n";
  }
  os << "\nMessages per micro-batch:\n";
  for (int64_t b = 0; b + 1 < split.stages; ++b)
    os << "  stage " << b << " -> " << b + 1 << ": "
       << valuesText(split, split.forwardAcross[b])
       << "; back: " << valuesText(split, split.backwardAcross[b]) << "\n";
  bool anyShared = false;
  for (const auto &[name, stages] : stagesOf)
    if (stages.size() > 1) {
      if (!anyShared)
        os << "\nParameters of several stages (each gives its part of the "
              "gradient, summed once per micro-batch):\n";
      anyShared = true;
      os << "  " << name << " on stages";
      for (size_t i = 0; i < stages.size(); ++i)
        os << (i ? ", " : " ") << stages[i];
      os << "\n";
    }

  os << "\nOptimizer step per pipeline device (what device 0 of its stage "
        "mesh holds; the scalars it gives every other device, the parts of "
        "the gradient norm):\n";
  std::vector<DeviceOptimizer> optimizers = deviceOptimizers(part);
  for (size_t d = 0; d < optimizers.size(); ++d) {
    const DeviceOptimizer &o = optimizers[d];
    os << "  device " << d << ": " << o.parameters << " parameters ("
       << backend::formatBytes(o.parameterBytes) << "), optimizer state "
       << backend::formatBytes(o.stateBytes) << ", " << o.collectives
       << " collectives; gives " << o.shared << " values ("
       << backend::formatBytes(o.sharedBytes) << ")\n";
  }

  // Every device of the whole mesh: a stage mesh's devices hold different
  // parts (tp, ZeRO).
  int64_t perStage = part.stageMesh.numDevices();
  if (perStage > 1) {
    os << "\nParameters and optimizer state per device of the whole mesh "
          "(pp outermost):\n";
    std::vector<std::vector<DeviceOptimizer>> held; // [d][p]
    for (int64_t d = 0; d < perStage; ++d)
      held.push_back(deviceOptimizers(part, d));
    for (size_t p = 0; p < held.front().size(); ++p)
      for (int64_t d = 0; d < perStage; ++d) {
        const DeviceOptimizer &o = held[static_cast<size_t>(d)][p];
        os << "  device " << static_cast<int64_t>(p) * perStage + d
           << " (pp=" << p << "," << backend::coordsText(part.stageMesh, d)
           << "): " << o.parameters << " parameters ("
           << backend::formatBytes(o.parameterBytes) << "), optimizer state "
           << backend::formatBytes(o.stateBytes) << "\n";
      }
  }

  os << "\nSchedule (proved free of deadlock):\n"
     << passes::scheduleOrderText(schedule) << "\n";
  os << (part.balanced ? "Predicted on the cluster's devices: bubble "
                       : "Predicted on the stages' FLOPs: bubble ")
     << llvm::format("%.1f%%", 100 * part.predicted.bubble) << "\n";
  passes::PipeTiming unit;
  if (passes::checkPipePrograms(part.programs, passes::WorkCosts{}, &unit)
          .empty())
    os << "On unit costs (F = 1, B = 2"
       << (split.splitBackward ? ", I = W = 1" : "") << "): bubble "
       << llvm::format("%.1f%%", 100 * unit.bubble) << "\n"
       << passes::scheduleGrid(schedule, part.programs, unit);
}

} // namespace mgc::session

namespace mgc::session {

void printPipelinePlanJson(const PipelinePart &part, llvm::raw_ostream &os) {
  using llvm::json::Array;
  using llvm::json::Object;
  const passes::Schedule &schedule = part.schedule;
  const passes::PipelineSplit &split = part.splits.front();
  StageParams held = stageParams(split);
  Array stages;
  for (int64_t s = 0; s < split.stages; ++s) {
    int64_t device = schedule.deviceOf(s);
    Object o{{"stage", s},
             {"device", device},
             {"first_layer", part.first[s]},
             {"last_layer", lastLayer(part, s)},
             {"parameters", static_cast<int64_t>(held.count[s])},
             {"parameter_bytes", static_cast<int64_t>(held.bytes[s])},
             {"memory_peak_bytes", part.memoryPeak[s]},
             {"in_flight", part.inFlight[s]},
             {"forward_flops", part.costs[device].forward},
             {"backward_flops", part.costs[device].backward}};
    if (part.balanced) {
      o["cluster_device"] = part.deviceNames[s];
      o["forward_seconds"] = part.balanced->forwardSeconds[s];
      o["backward_seconds"] = part.balanced->backwardSeconds[s];
      o["forward_link_seconds"] = part.balanced->forwardLinkSeconds[s];
      o["backward_link_seconds"] = part.balanced->backwardLinkSeconds[s];
      o["memory_bytes"] = part.balanced->memoryBytes[s];
    }
    stages.push_back(std::move(o));
  }
  Array messages;
  for (int64_t b = 0; b + 1 < split.stages; ++b)
    messages.push_back(Object{
        {"from", b},
        {"to", b + 1},
        {"forward_bytes",
         static_cast<int64_t>(acrossBytes(split, split.forwardAcross[b]))},
        {"backward_bytes",
         static_cast<int64_t>(acrossBytes(split, split.backwardAcross[b]))}});
  Object shared;
  for (const auto &[name, on] : held.stagesOf)
    if (on.size() > 1) {
      Array a;
      for (int64_t st : on)
        a.push_back(st);
      shared[name] = std::move(a);
    }
  Array optimizer;
  std::vector<DeviceOptimizer> optimizers = deviceOptimizers(part);
  for (size_t d = 0; d < optimizers.size(); ++d) {
    const DeviceOptimizer &o = optimizers[d];
    optimizer.push_back(
        Object{{"device", static_cast<int64_t>(d)},
               {"parameters", static_cast<int64_t>(o.parameters)},
               {"parameter_bytes", static_cast<int64_t>(o.parameterBytes)},
               {"state_bytes", static_cast<int64_t>(o.stateBytes)},
               {"collectives", static_cast<int64_t>(o.collectives)},
               {"shared_values", static_cast<int64_t>(o.shared)},
               {"shared_bytes", static_cast<int64_t>(o.sharedBytes)}});
  }
  Array order;
  for (const auto &slots : schedule.order) {
    Array device;
    for (const passes::Slot &slot : slots)
      device.push_back(
          std::string(1, passes::workLetter(slot.work)) +
          std::to_string(slot.micro) +
          (schedule.chunks > 1 ? "." + std::to_string(slot.chunk) : ""));
    order.push_back(std::move(device));
  }
  passes::PipeTiming unit;
  std::string unitError =
      passes::checkPipePrograms(part.programs, passes::WorkCosts{}, &unit);
  Object out{{"devices", schedule.stages},
             {"virtual_stages", split.stages},
             {"schedule", passes::scheduleName(schedule.kind)},
             {"micro_batches", schedule.micro},
             {"stages", std::move(stages)},
             {"messages", std::move(messages)},
             {"shared", std::move(shared)},
             {"optimizer", std::move(optimizer)},
             {"slots", std::move(order)},
             {"bubble", part.predicted.bubble},
             {"unit_bubble", unitError.empty() ? unit.bubble : 0.0}};
  if (part.balanced) {
    out["predicted_step_seconds"] = part.balanced->stepSeconds;
    if (part.equalSplitSeconds)
      out["equal_split_step_seconds"] = *part.equalSplitSeconds;
    else
      out["equal_split_error"] = part.equalSplitError;
  }
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(out))) << "\n";
}

} // namespace mgc::session
