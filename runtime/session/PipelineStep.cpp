// The pipelined step (MeshStep::pipeline): the stages chosen (by --stages
// or by the stage balancer), the micro program cut into their programs,
// the schedule made, lowered and proved free of deadlock, the programs
// compiled.
#include "runtime/session/MeshStep.h"

#include "passes/Accumulation.h"
#include "passes/CostModel.h"
#include "passes/PipelineStages.h"
#include "passes/StageBalance.h"

#include "llvm/ADT/StringExtras.h"

#include <map>

namespace mgc::session {

namespace {

// "0-5,6-11" (or "0,1-3": a range of one layer may be one number) as the
// first layer of each stage; every layer in exactly one range, in order.
FailureOr<std::vector<int64_t>> parseStages(llvm::StringRef text,
                                            int64_t stages, int64_t layers,
                                            DiagnosticEngine &diag) {
  auto bad = [&](const std::string &why) {
    diag.error("--stages '" + text.str() + "': " + why);
    return failure();
  };
  llvm::SmallVector<llvm::StringRef, 8> parts;
  text.split(parts, ',');
  if (static_cast<int64_t>(parts.size()) != stages)
    return bad("expected one range of layers per stage, " +
               std::to_string(stages) + ", got " +
               std::to_string(parts.size()));
  std::vector<int64_t> first;
  int64_t next = 0;
  for (llvm::StringRef part : parts) {
    auto [lo, hi] = part.trim().split('-');
    int64_t a = 0, b = 0;
    if (lo.trim().getAsInteger(10, a) ||
        (hi.empty() ? (b = a, false) : hi.trim().getAsInteger(10, b)))
      return bad("'" + part.trim().str() +
                 "' is not a range of layers like 0-5");
    if (a != next || b < a)
      return bad("stage " + std::to_string(first.size()) + " ('" +
                 part.trim().str() + "') should start at layer " +
                 std::to_string(next) +
                 ": the stages take the layers in order, each at least one");
    first.push_back(a);
    next = b + 1;
  }
  if (next != layers)
    return bad("the model has " + std::to_string(layers) + " layers (0-" +
               std::to_string(layers - 1) + "), the ranges end at " +
               std::to_string(next - 1));
  return first;
}

// Stages balanced by the cost model on identical devices (the time of a
// layer is what differs), without memory limits.
FailureOr<std::vector<int64_t>> balancedStages(const ir::Module &model,
                                               int64_t stages, int64_t micro,
                                               DiagnosticEngine &diag) {
  passes::ModelLayers layers = passes::forwardLayers(model);
  passes::measureCuts(model, layers);
  std::vector<passes::ClusterDevice> devices(stages,
                                             {"stage", 1e14, 1e18, 1e12});
  std::string error;
  auto plan = passes::balanceStages(layers, devices, micro, error);
  if (plan.failed()) {
    diag.error("pipeline: cannot balance the stages: " + error);
    return failure();
  }
  return plan->first;
}

// Whether two devices' splits pass the same values between their
// programs (each device talks to its own copy on the other stages).
bool sameMessages(const passes::PipelineSplit &a,
                  const passes::PipelineSplit &b) {
  if (a.values.size() != b.values.size() ||
      a.forwardAcross != b.forwardAcross ||
      a.backwardAcross != b.backwardAcross)
    return false;
  for (size_t i = 0; i < a.values.size(); ++i)
    if (a.values[i].stage != b.values[i].stage ||
        a.values[i].phase != b.values[i].phase ||
        a.values[i].readers != b.values[i].readers)
      return false;
  return true;
}

double programFlops(const ir::Module &program) {
  double flops = 0;
  for (const auto &op : program.graph().ops())
    flops += passes::opWork(*op).flops;
  return flops;
}

// Each pipeline device's work on one micro-batch, from its programs.
std::vector<passes::WorkCosts> deviceCosts(const passes::PipelineSplit &split,
                                           const passes::Schedule &schedule) {
  std::vector<passes::WorkCosts> out(schedule.stages,
                                     passes::WorkCosts{0, 0, 0, 0});
  for (int64_t v = 0; v < split.stages; ++v) {
    const auto &programs = split.programs[v];
    double f = programFlops(*programs[0]), b = programFlops(*programs[1]);
    double w = split.splitBackward ? programFlops(*programs[2]) : 0;
    passes::WorkCosts &c = out[schedule.deviceOf(v)];
    double share = 1.0 / static_cast<double>(schedule.chunks);
    c.forward += f * share;
    c.backward += (b + w) * share;
    c.inputGrad += b * share;
    c.weightGrad += w * share;
  }
  return out;
}

} // namespace

LogicalResult buildPipelinePart(MeshStep &step, const ir::Module &model,
                                const MeshConfig &config,
                                DiagnosticEngine &diag) {
  const ir::MeshAxis *pp = config.mesh.findAxis(ir::kPipelineAxis);
  const PipelineConfig &pc = config.pipeline;
  auto part = std::make_shared<PipelinePart>();
  std::string error;
  auto schedule = passes::makeSchedule(pc.schedule, pp->size, step.accumulate,
                                       pc.chunks, error);
  if (schedule.failed()) {
    diag.error("--pipeline-schedule " +
               std::string(passes::scheduleName(pc.schedule)) + " on " +
               std::to_string(pp->size) + " stages and " +
               std::to_string(step.accumulate) + " micro-batches: " + error);
    return failure();
  }
  part->schedule = std::move(*schedule);
  int64_t stages = part->schedule.virtualStages();

  // Micro-batch i runs on micro device microBatchDevice(mesh, k, 0, i);
  // micro-batches whose programs are the same share a split.
  const passes::DevicePrograms &micro = step.micro.programs;
  const ir::Module &first = micro.programFor(
      passes::microBatchDevice(step.mesh, step.accumulate, 0, 0));
  part->layers = passes::opLayers(first).names;
  int64_t layers = static_cast<int64_t>(part->layers.size());
  if (layers < stages) {
    diag.error("model '" + model.name() + "' has " + std::to_string(layers) +
               " layers (repeat iterations) for " + std::to_string(stages) +
               (pc.chunks > 1 ? " virtual" : "") +
               " pipeline stages: each stage needs at least one");
    return failure();
  }
  auto firstLayers = pc.stages.empty()
                         ? balancedStages(model, stages, step.accumulate, diag)
                         : parseStages(pc.stages, stages, layers, diag);
  if (firstLayers.failed())
    return failure();
  part->first = std::move(*firstLayers);

  part->stageMesh = step.mesh;
  std::map<size_t, size_t> splitOfProgram;
  for (int64_t i = 0; i < step.accumulate; ++i) {
    std::vector<size_t> &ofDevice = part->splitOf.emplace_back();
    for (int64_t d = 0; d < step.mesh.numDevices(); ++d) {
      size_t p = micro.programOf[passes::microBatchDevice(
          step.mesh, step.accumulate, d, i)];
      auto [it, inserted] = splitOfProgram.try_emplace(p, part->splits.size());
      if (inserted) {
        auto split =
            passes::splitPipeline(*micro.programs[p], part->first,
                                  part->schedule.splitsBackward(), diag);
        if (split.failed())
          return failure();
        if (!part->splits.empty() &&
            !sameMessages(part->splits.front(), *split)) {
          diag.error("pipeline: device " + std::to_string(d) +
                     " of a stage cuts its program into other messages than "
                     "device 0 (internal error)");
          return failure();
        }
        part->splits.push_back(std::move(*split));
      }
      ofDevice.push_back(it->second);
    }
  }

  part->programs = passes::lowerSchedule(part->schedule);
  part->costs = deviceCosts(part->splits.front(), part->schedule);
  std::string deadlock =
      passes::checkPipePrograms(part->programs, part->costs, &part->predicted);
  if (!deadlock.empty()) {
    diag.error("pipeline schedule " +
               std::string(passes::scheduleName(pc.schedule)) + ": " +
               deadlock);
    return failure();
  }

  for (const passes::PipelineSplit &split : part->splits) {
    auto &exes = part->executables.emplace_back();
    for (const auto &phases : split.programs) {
      auto &out = exes.emplace_back();
      for (const auto &program : phases) {
        auto exe = compileDeviceProgram(*program, diag);
        if (!exe)
          return failure();
        out.push_back(std::move(exe));
      }
    }
  }
  step.pipeline = std::move(part);
  return success();
}

FailureOr<MeshConfig> meshConfig(const ir::Mesh &mesh,
                                 const SessionOptions &options,
                                 DiagnosticEngine &diag) {
  MeshConfig config;
  config.mesh = mesh;
  config.zero = options.zero;
  config.bucketMiB = options.bucketMiB;
  config.accumulate = options.accumulate;
  const ir::MeshAxis *pp = mesh.findAxis(ir::kPipelineAxis);
  if (!pp) {
    if (!options.schedule.empty() || options.virtualStages != 1 ||
        !options.stages.empty()) {
      diag.error("a schedule, virtual stages and stages are for a pipeline: "
                 "give the mesh a pp axis (--mesh pp=N)");
      return failure();
    }
    return config;
  }
  if (!options.schedule.empty()) {
    auto kind = passes::parseScheduleKind(options.schedule);
    if (!kind) {
      diag.error("unknown pipeline schedule '" + options.schedule +
                 "': expected " + passes::scheduleNames());
      return failure();
    }
    config.pipeline.schedule = *kind;
  }
  if (options.virtualStages < 1 ||
      (options.virtualStages > 1 &&
       config.pipeline.schedule != passes::ScheduleKind::Interleaved)) {
    diag.error("virtual stages (" + std::to_string(options.virtualStages) +
               ") are the interleaved schedule's model chunks per device: "
               "give --schedule interleaved and at least 1");
    return failure();
  }
  config.pipeline.chunks = options.virtualStages;
  config.pipeline.stages = options.stages;
  // Micro-batches: as many as the stages unless given.
  if (config.accumulate == 1)
    config.accumulate = pp->size;
  return config;
}

} // namespace mgc::session
