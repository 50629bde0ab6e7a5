// The pipelined step (MeshStep::pipeline): the stages chosen (by --stages
// or by the stage balancer), the micro program cut into their programs,
// the schedule made, lowered and proved free of deadlock, the programs
// compiled.
#include "runtime/session/MeshStep.h"
#include "runtime/session/Pipeline.h"
#include "runtime/session/StageRanges.h"

#include "passes/Accumulation.h"
#include "passes/CostModel.h"
#include "passes/PassManager.h"
#include "passes/PipelineStages.h"
#include "passes/ShardStrategy.h"
#include "passes/StageBalance.h"

#include "llvm/ADT/StringExtras.h"

#include <map>
#include <optional>

namespace mgc::session {

namespace {

// The model file's layers per (virtual) stage: train.pipeline_layers.
constexpr const char *kFileLayersAttr = "train.pipeline_layers";

// train.pipeline_layers = [6, 6] (the layers of each stage, in order) as
// the first layer of each stage.
FailureOr<std::vector<int64_t>> layersPerStage(const ir::AttrValue &value,
                                               int64_t stages, int64_t layers,
                                               DiagnosticEngine &diag) {
  auto bad = [&](const std::string &why) {
    diag.error(std::string("invalid setting ") + kFileLayersAttr + " = " +
               ir::formatAttrValue(value) + ": " + why);
    return failure();
  };
  const auto *counts = std::get_if<std::vector<int64_t>>(&value);
  if (!counts)
    return bad("expected a list of layer counts, one per stage, as [6, 6]");
  if (static_cast<int64_t>(counts->size()) != stages)
    return bad("expected one count per stage, " + std::to_string(stages) +
               ", got " + std::to_string(counts->size()));
  std::vector<int64_t> first;
  int64_t next = 0;
  for (int64_t n : *counts) {
    if (n < 1)
      return bad("each stage needs at least one layer");
    // Before adding: a count near 2^63 would wrap the sum.
    if (n > layers - next)
      return bad("the counts add up to more than the model's " +
                 std::to_string(layers) + " layers");
    first.push_back(next);
    next += n;
  }
  if (next != layers)
    return bad("the counts add up to " + std::to_string(next) +
               " layers, the model has " + std::to_string(layers));
  return first;
}

// The pipeline devices as the stage balancer sees them: from `cluster`
// (its devices in mesh order; a pipeline device is as fast, and has as
// much memory, as the slowest of its stage mesh's devices), or identical
// devices without memory limits when there is none.
FailureOr<std::vector<passes::ClusterDevice>>
pipelineDevices(const passes::Cluster *cluster, const ir::Mesh &mesh,
                int64_t stages, const std::string &file,
                DiagnosticEngine &diag) {
  if (!cluster)
    return std::vector<passes::ClusterDevice>(stages,
                                              {"stage", 1e14, 1e18, 1e12});
  int64_t devices = mesh.numDevices();
  std::string mismatch = passes::clusterMismatch(*cluster, mesh);
  if (!mismatch.empty()) {
    diag.error("--cluster " + file + ": " + mismatch);
    return failure();
  }
  int64_t perStage = devices / stages;
  std::vector<passes::ClusterDevice> out;
  for (int64_t p = 0; p < stages; ++p) {
    passes::ClusterDevice d = cluster->devices()[p * perStage];
    for (int64_t r = 1; r < perStage; ++r) {
      const passes::ClusterDevice &o = cluster->devices()[p * perStage + r];
      d.flopsPerSecond = std::min(d.flopsPerSecond, o.flopsPerSecond);
      d.memoryBytes = std::min(d.memoryBytes, o.memoryBytes);
      d.bytesPerSecond = std::min(d.bytesPerSecond, o.bytesPerSecond);
    }
    out.push_back(std::move(d));
  }
  return out;
}

// The stages balanced by the cost model on `devices`, messages over the
// cluster's links when there is one; with a cluster, also what an equal
// split of the layers over the devices in the file's order would take
// (into `part`).
FailureOr<passes::StagePlan>
balancedStages(const ir::Module &model,
               llvm::ArrayRef<passes::ClusterDevice> devices,
               const passes::Cluster *cluster, int64_t perStage, int64_t micro,
               PipelinePart &part, DiagnosticEngine &diag) {
  passes::ModelLayers layers = passes::forwardLayers(model);
  passes::measureCuts(model, layers);
  passes::LinkOf link;
  if (cluster)
    link = [cluster, perStage](size_t a, size_t b) {
      return cluster->link(a * perStage, b * perStage);
    };
  std::string error;
  auto plan = passes::balanceStages(layers, devices, micro, error, link);
  if (plan.failed()) {
    diag.error("pipeline: cannot balance the stages: " + error);
    return failure();
  }
  if (cluster) {
    int64_t stages = static_cast<int64_t>(devices.size());
    auto equal = passes::planStages(
        layers, devices, micro,
        passes::equalSplit(static_cast<int64_t>(layers.layers.size()), stages),
        error, link);
    if (equal.failed())
      part.equalSplitError = error;
    else
      part.equalSplitSeconds = equal->stepSeconds;
  }
  return plan;
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

// Cuts the apply part by pipeline device: each takes the gradients its
// stages give (the tied embedding's on both ends) and updates the
// parameters they read.
LogicalResult splitApplyPart(PipelinePart &part, const MeshStep &step,
                             double bucketMiB, DiagnosticEngine &diag) {
  std::map<std::string, std::vector<int64_t>> givers;
  const passes::PipelineSplit &split = part.splits.front();
  for (int64_t v = 0; v < split.stages; ++v)
    for (const auto &program : split.programs[v])
      for (const ir::Output &o : program->graph().outputs()) {
        if (!llvm::StringRef(o.name).startswith(passes::kMicroSumPrefix))
          continue;
        std::vector<int64_t> &devices = givers[o.name];
        int64_t d = part.schedule.deviceOf(v);
        if (!llvm::is_contained(devices, d))
          devices.push_back(d);
      }
  auto cut = passes::splitApply(step.logicalOf(step.step), part.schedule.stages,
                                givers, diag);
  if (cut.failed())
    return failure();
  part.applySplit = std::move(*cut);
  // Each device's part: its gradients' all-reduces in buckets of the
  // configured size (the step's own bucketing is off in a pipeline, where a
  // bucket would join the gradients of different stages), partitioned on
  // the stage mesh.
  auto build = [&](const ir::Module &logical, MeshPart &out) -> LogicalResult {
    out.logical = cloneModule(logical, diag);
    if (!out.logical)
      return failure();
    out.logical->attrs().set(passes::kBucketAttr, bucketMiB);
    passes::PassManager pm;
    if (failed(pm.parsePipeline("bucket", diag)) ||
        failed(pm.run(*out.logical, diag)))
      return failure();
    auto programs = passes::partitionModule(*out.logical, diag);
    if (programs.failed())
      return failure();
    out.programs = std::move(*programs);
    return compilePart(out, diag);
  };
  for (int64_t d = 0; d < part.applySplit.devices; ++d) {
    MeshPart &gather = part.applyGather.emplace_back();
    if (part.applySplit.gather[d] &&
        failed(build(*part.applySplit.gather[d], gather)))
      return failure();
    if (failed(
            build(*part.applySplit.update[d], part.applyUpdate.emplace_back())))
      return failure();
  }
  return success();
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
    // What would fit: the most pipeline devices the layers fill.
    int64_t most = layers / pc.chunks;
    std::string fix =
        layers == 0 ? "a pipeline cuts a model between the copies of its "
                      "`repeat`, and this one has none"
        : most == 0
            ? "use at most --virtual-stages " + std::to_string(layers)
            : "use at most pp=" + std::to_string(most) +
                  (pc.chunks > 1
                       ? " with --virtual-stages " + std::to_string(pc.chunks)
                       : std::string()) +
                  ", or a larger repeat count";
    // At the repeat's count, where the fix goes, when the frontend said
    // where it was.
    Loc at;
    if (!part->layers.empty()) {
      llvm::StringRef prefix =
          llvm::StringRef(part->layers.front()).rsplit('.').first;
      auto it = model.repeatLocs().find(prefix.str());
      if (it != model.repeatLocs().end())
        at = it->second;
    }
    diag.error(at,
               "model '" + model.name() + "' has " + std::to_string(layers) +
                   " layers (repeat iterations) for " + std::to_string(stages) +
                   (pc.chunks > 1 ? " virtual" : "") +
                   " pipeline stages: each stage needs at least one; " + fix);
    return failure();
  }
  std::optional<passes::Cluster> cluster;
  if (!pc.cluster.empty()) {
    if (pc.chunks > 1) {
      diag.error("--cluster balances one stage per pipeline device: the "
                 "interleaved schedule's virtual stages take --stages");
      return failure();
    }
    cluster = passes::Cluster::read(pc.cluster, error);
    if (!cluster) {
      diag.error("--cluster: " + error);
      return failure();
    }
  }
  // The model file's train.pipeline_layers, unless a flag decides.
  const ir::AttrValue *fileLayers = pc.stages.empty() && !cluster
                                        ? model.attrs().find(kFileLayersAttr)
                                        : nullptr;
  if (fileLayers) {
    auto first = layersPerStage(*fileLayers, stages, layers, diag);
    if (first.failed())
      return failure();
    part->first = std::move(*first);
  } else if (pc.stages.empty()) {
    int64_t perStage = config.mesh.numDevices() / pp->size;
    auto devices = pipelineDevices(cluster ? &*cluster : nullptr, config.mesh,
                                   stages, pc.cluster, diag);
    if (devices.failed())
      return failure();
    auto plan = balancedStages(model, *devices, cluster ? &*cluster : nullptr,
                               perStage, step.accumulate, *part, diag);
    if (plan.failed())
      return failure();
    part->first = plan->first;
    if (cluster) {
      // Named as the file names them: the devices of pipeline group g are
      // the file's g*perStage ...
      for (size_t g : plan->device) {
        int64_t at = static_cast<int64_t>(g) * perStage;
        part->deviceNames.push_back(
            (perStage == 1 ? "cluster device " + std::to_string(at)
                           : "cluster devices " + std::to_string(at) + "-" +
                                 std::to_string(at + perStage - 1)) +
            " (" + (*devices)[g].name + ")");
      }
      part->balanced = std::move(*plan);
    }
  } else {
    if (cluster) {
      diag.error("--cluster and --stages are alternatives: the cluster "
                 "balances the stages, --stages gives them");
      return failure();
    }
    auto first = parseStages(pc.stages, stages, layers, diag);
    if (first.failed())
      return failure();
    part->first = std::move(*first);
  }

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
  part->inFlight = passes::peakInFlight(part->schedule);
  part->memoryPeak =
      passes::stageMemory(passes::forwardLayers(model), part->first,
                          step.accumulate, part->inFlight);
  part->costs = deviceCosts(part->splits.front(), part->schedule);
  std::vector<passes::WorkCosts> predictOn = part->costs;
  if (part->balanced)
    for (size_t s = 0; s < predictOn.size(); ++s) {
      double f = part->balanced->forwardSeconds[s],
             b = part->balanced->backwardSeconds[s];
      predictOn[s] = {f, b, b / 2, b / 2};
    }
  std::string deadlock =
      passes::checkPipePrograms(part->programs, predictOn, &part->predicted);
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
  if (failed(splitApplyPart(*part, step, config.bucketMiB, diag)))
    return failure();
  step.pipeline = std::move(part);
  return success();
}

// `mesh` with its dp weights (if any) reduced to the rows of a batch of
// `rows` they give (passes::rowWeights): weights finer than the rows move
// no row, but would have the partitioner balance other dimensions by them.
static ir::Mesh withRowWeights(const ir::Mesh &mesh, int64_t rows) {
  std::vector<ir::MeshAxis> axes(mesh.axes().begin(), mesh.axes().end());
  for (ir::MeshAxis &axis : axes)
    if (axis.name == ir::kDataAxis) {
      axis.weights = passes::rowWeights(axis, rows);
      if (ir::allEqual(axis.weights))
        axis.weights.clear();
    }
  return ir::Mesh(std::move(axes));
}

FailureOr<MeshConfig> meshConfig(const ir::Mesh &mesh, const ir::Module &model,
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
    // The rows the dp axis splits: the batch (the first dimension of the
    // first input), each of the micro-batches with accumulation.
    std::vector<ir::Value *> inputs = model.graph().inputs();
    int64_t rows = !inputs.empty() && inputs.front()->type().rank() > 0
                       ? inputs.front()->type().shape[0]
                       : 0;
    if (options.accumulate > 1)
      rows = rows % options.accumulate == 0 ? rows / options.accumulate : 0;
    if (options.cluster.empty()) {
      config.mesh = withRowWeights(mesh, rows);
      return config;
    }
    // Without a pipeline a cluster gives the dp devices their shares, in
    // inverse proportion to each one's time for the model's step.
    std::string error;
    std::optional<passes::Cluster> cluster =
        passes::Cluster::read(options.cluster, error);
    if (!cluster) {
      diag.error("--cluster: " + error);
      return failure();
    }
    passes::ModelLayers layers = passes::forwardLayers(model);
    const ir::MeshAxis *dp = mesh.findAxis(ir::kDataAxis);
    std::optional<ir::Mesh> weighted = passes::weightDataAxis(
        mesh, *cluster,
        [&](const passes::ClusterDevice &d) {
          return passes::shareSeconds(layers, d, dp ? dp->size : 1);
        },
        error, rows);
    if (!weighted) {
      diag.error("--cluster " + options.cluster + ": " + error);
      return failure();
    }
    config.mesh = std::move(*weighted);
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
               "give --pipeline-schedule interleaved and at least 1");
    return failure();
  }
  config.pipeline.chunks = options.virtualStages;
  config.pipeline.stages = options.stages;
  config.pipeline.cluster = options.cluster;
  // Micro-batches: as many as the stages unless given.
  if (config.accumulate == 1)
    config.accumulate = pp->size;
  return config;
}

} // namespace mgc::session
