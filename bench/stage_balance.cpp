// The stage balancer's prediction for a model on a cluster: the 1F1B step
// time (from the schedule's simulation on the cost model's stage times,
// each stage's messages over the cluster's links included) of
// the balanced split against equal layer counts, with each split's layers
// and memory per stage. A prediction, not a measurement: pipelines do not
// run yet (docs/pipeline.md).
//
//   stage_balance [MODEL.mg] [CLUSTER.json] [MICRO-BATCHES]
//   (default: samples/gpt.mg, samples/clusters/mixed8.json, 8)
#include "frontend/Frontend.h"
#include "passes/PipelineStages.h"
#include "passes/StageBalance.h"

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

} // namespace

int main(int argc, char **argv) {
  std::string root = MGC_SOURCE_DIR;
  std::string model = argc > 1 ? argv[1] : root + "/samples/gpt.mg";
  std::string cluster =
      argc > 2 ? argv[2] : root + "/samples/clusters/mixed8.json";
  int64_t micro = argc > 3 ? std::atoll(argv[3]) : 8;
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
  return 0;
}
