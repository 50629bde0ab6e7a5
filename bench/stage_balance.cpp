// The planner's predictions for a model on a cluster (the cost model's
// times for devices this machine does not have, not measurements):
// - as a pipeline, one stage per device: the 1F1B step time (from the
//   schedule's simulation on the cost model's stage times, each stage's
//   messages over the cluster's links included) of the balanced split
//   against equal layer counts, with each split's layers and memory per
//   stage;
// - as data parallelism over the same devices: the step time with every
//   device given an equal share of the batch against shares that follow
//   each device's speed (--cluster without pp), the gradients' ring
//   all-reduce over the slowest link included.
//
//   stage_balance [MODEL.mg] [CLUSTER.json] [MICRO-BATCHES] [DP-BATCH]
//   (default: samples/gpt.mg, samples/clusters/mixed8.json, 8 micro-batches
//   of the model's batch; data parallelism on a batch (constant B) of 64)
#include "frontend/Frontend.h"
#include "ir/Sharding.h"
#include "passes/PipelineStages.h"
#include "passes/StageBalance.h"

#include <algorithm>

#include <cstdio>
#include <cstdlib>
#include <string>

using namespace mgc;
using namespace mgc::passes;

namespace {

void print(const char *title, const ModelLayers &layers,
           const std::vector<ClusterDevice> &all, const StagePlan &p) {
  std::printf("%s: predicted step %.2f ms\n", title, p.stepSeconds * 1e3);
  std::printf(
      "  stage  device  layers  F+B per micro-batch  memory / device\n");
  int64_t n = static_cast<int64_t>(layers.layers.size());
  for (size_t s = 0; s < p.first.size(); ++s) {
    int64_t end = s + 1 < p.first.size() ? p.first[s + 1] : n;
    std::printf("  %5zu  %-6s  %2lld-%-3lld  %16.2f ms  %6.2f / %.0f GiB\n", s,
                all[p.device[s]].name.c_str(),
                static_cast<long long>(p.first[s]),
                static_cast<long long>(end - 1),
                (p.forwardSeconds[s] + p.backwardSeconds[s]) * 1e3,
                p.memoryBytes[s] / (1 << 30), p.deviceBytes[s] / (1 << 30));
  }
}

// Data parallelism over the cluster's devices (dp = their number): each
// device runs the whole model on its share of the batch (the cost model's
// time, linear in its rows), then the gradients are all-reduced around a
// ring in device order, at the pace of its slowest link. Equal shares
// against the shares `--cluster` gives (passes::weightDataAxis).
bool dataParallel(const ir::Module &module, const ModelLayers &layers,
                  const Cluster &c) {
  const std::vector<ClusterDevice> &devices = c.devices();
  int64_t n = static_cast<int64_t>(devices.size());
  int64_t batch = module.graph().inputs().front()->type().shape[0];
  double params = layers.first.paramBytes + layers.last.paramBytes;
  double activations =
      layers.first.activationBytes + layers.last.activationBytes;
  for (const LayerCost &l : layers.layers) {
    params += l.paramBytes;
    activations += l.activationBytes;
  }
  ClusterLink slowest = c.link(static_cast<size_t>(n - 1), 0);
  for (int64_t d = 0; d + 1 < n; ++d)
    if (c.link(d, d + 1).bytesPerSecond < slowest.bytesPerSecond)
      slowest = c.link(d, d + 1);
  double allReduce = 2.0 * static_cast<double>(n - 1) *
                     (params / static_cast<double>(n) / slowest.bytesPerSecond +
                      slowest.latencySeconds);
  std::string error;
  auto plain = ir::Mesh::parse("dp=" + std::to_string(n), error);
  std::optional<ir::Mesh> weighted = weightDataAxis(
      *plain, c,
      [&](const ClusterDevice &d) { return shareSeconds(layers, d, n); }, error,
      batch);
  if (!weighted) {
    std::printf("data parallel: %s\n", error.c_str());
    return false;
  }
  auto step = [&](const ir::Mesh &mesh, const std::string &title) {
    std::vector<int64_t> rows =
        ir::splitSizes(batch, *mesh.findAxis(ir::kDataAxis));
    double slowestDevice = 0;
    std::string over;
    std::printf("%s (rows per device:", title.c_str());
    for (int64_t d = 0; d < n; ++d) {
      std::printf(" %lld", static_cast<long long>(rows[d]));
      slowestDevice =
          std::max(slowestDevice, shareSeconds(layers, devices[d], batch) *
                                      static_cast<double>(rows[d]));
      // f32 weights, gradients and two AdamW moments, and the activations
      // of its rows.
      double need = 4 * params + activations * static_cast<double>(rows[d]) /
                                     static_cast<double>(batch);
      if (need > devices[d].memoryBytes && over.empty())
        over = devices[d].name + " needs " + std::to_string(need / (1 << 30)) +
               " GiB";
    }
    double total = slowestDevice + allReduce;
    std::printf("): predicted step %.2f ms (%.2f ms computing, %.2f ms "
                "all-reducing %.0f MiB)%s\n",
                total * 1e3, slowestDevice * 1e3, allReduce * 1e3,
                params / (1 << 20),
                over.empty() ? "" : (", does not fit: " + over).c_str());
    return total;
  };
  std::printf("\ndata parallel over the same %lld devices, batch %lld:\n",
              static_cast<long long>(n), static_cast<long long>(batch));
  double equal = step(*plain, "equal shares");
  double byCluster = step(*weighted, "shares " + weighted->str());
  std::printf("shares for the cluster / equal: %.2fx faster\n",
              equal / byCluster);
  return true;
}

} // namespace

int main(int argc, char **argv) {
  std::string root = MGC_SOURCE_DIR;
  std::string model = argc > 1 ? argv[1] : root + "/samples/gpt.mg";
  std::string cluster =
      argc > 2 ? argv[2] : root + "/samples/clusters/mixed8.json";
  int64_t micro = argc > 3 ? std::atoll(argv[3]) : 8;
  int64_t dpBatch = argc > 4 ? std::atoll(argv[4]) : 64;
  DiagnosticEngine diag;
  auto module = frontend::compileModelFile(model, {}, diag);
  if (!module)
    return 1;
  std::string error;
  std::optional<Cluster> c = Cluster::read(cluster, error);
  if (!c) {
    std::fprintf(stderr, "stage_balance: %s\n", error.c_str());
    return 1;
  }
  ModelLayers layers = forwardLayers(*module);
  measureCuts(*module, layers);
  LinkOf link = [&](size_t a, size_t b) { return c->link(a, b); };
  const std::vector<ClusterDevice> &devices = c->devices();
  int64_t n = static_cast<int64_t>(layers.layers.size());
  std::printf("%s: %lld layers on %s (%zu stages), %lld micro-batches, 1F1B\n",
              model.c_str(), static_cast<long long>(n), cluster.c_str(),
              devices.size(), static_cast<long long>(micro));
  FailureOr<StagePlan> balanced =
      balanceStages(layers, devices, micro, error, link);
  if (balanced.failed()) {
    std::fprintf(stderr, "stage_balance: %s\n", error.c_str());
    return 1;
  }
  FailureOr<StagePlan> equal = planStages(
      layers, devices, micro,
      equalSplit(n, static_cast<int64_t>(devices.size())), error, link);
  print("balanced", layers, devices, *balanced);
  if (equal.failed()) {
    std::printf("equal layer counts: %s\n", error.c_str());
    return 0;
  }
  print("equal layer counts", layers, devices, *equal);
  std::printf("balanced / equal: %.2fx faster\n",
              equal->stepSeconds / balanced->stepSeconds);
  // Data parallelism takes a batch of several rows per device.
  frontend::CompileOptions dpOptions;
  dpOptions.defines["B"] = std::to_string(dpBatch);
  auto dpModule = frontend::compileModelFile(model, dpOptions, diag);
  if (!dpModule)
    return 1;
  ModelLayers dpLayers = forwardLayers(*dpModule);
  return dataParallel(*dpModule, dpLayers, *c) ? 0 : 1;
}
