// The planner's view of devices that differ: cluster descriptions (read,
// and refused with the file and field named), the cost of each layer of a
// model (its matmul and attention FLOPs), and the stage balancer: the
// split it picks is the best of all splits (against brute force), it
// beats equal layer counts on mixed devices, and what cannot fit is named
// with the device and the amount.
#include "passes/StageBalance.h"
#include "SourcePath.h"
#include "frontend/Frontend.h"

#include <doctest/doctest.h>

#include <functional>

using namespace mgc;
using namespace mgc::passes;

namespace {

ClusterDevice device(const char *name, double tflops, double gib) {
  ClusterDevice d;
  d.name = name;
  d.flopsPerSecond = tflops * 1e12;
  d.memoryBytes = gib * 1024.0 * 1024.0 * 1024.0;
  d.bytesPerSecond = 1e15; // compute-bound
  return d;
}

// `n` layers of the given forward FLOPs (1 MiB of parameters each).
ModelLayers layersOf(const std::vector<double> &flops) {
  ModelLayers m;
  for (size_t i = 0; i < flops.size(); ++i) {
    LayerCost l;
    l.name = "blocks." + std::to_string(i);
    l.forward.flops = flops[i];
    l.paramBytes = 1 << 20;
    l.activationBytes = 1 << 20;
    m.layers.push_back(l);
  }
  return m;
}

std::string sample(const char *file) {
  return mgc::test::sourceDir() + "/samples/" + file;
}

} // namespace

TEST_CASE("cluster: the samples read, and bad files are refused naming the "
          "field") {
  std::string error;
  for (const char *file : {"clusters/uniform8.json", "clusters/mixed8.json"}) {
    std::optional<Cluster> c = Cluster::read(sample(file), error);
    INFO(error);
    REQUIRE(c);
    CHECK(c->devices().size() == 8);
  }
  std::optional<Cluster> mixed =
      Cluster::read(sample("clusters/mixed8.json"), error);
  REQUIRE(mixed);
  CHECK(mixed->devices()[4].name == "slow-0");
  CHECK(mixed->link(1, 0).bytesPerSecond == doctest::Approx(450e9));
  CHECK(mixed->link(0, 7).bytesPerSecond == doctest::Approx(32e9));

  CHECK(!Cluster::parse("c.json", "{\"devices\": []}", error));
  CHECK(error == "c.json: expected an object with a non-empty array "
                 "\"devices\"");
  CHECK(!Cluster::parse("c.json",
                        "{\"devices\": [{\"tflops\": 1, \"memory_gib\": 1, "
                        "\"bandwidth_gbs\": 1}, {\"tflops\": -1}]}",
                        error));
  CHECK(error == "c.json: devices[1]: 'tflops' must be a number > 0, got -1");
  CHECK(!Cluster::parse("c.json",
                        "{\"devices\": [{\"tflops\": 1, \"memory_gib\": 1, "
                        "\"bandwidth_gbs\": 1}, {\"tflops\": 1, "
                        "\"memory_gib\": 1, \"bandwidth_gbs\": 1}]}",
                        error));
  CHECK(error == "c.json: no link between devices 0 and 1: list it in "
                 "\"links\" or give \"default_link\"");
  // Fields of the wrong type are refused, not taken as absent.
  const std::string one =
      "{\"tflops\": 1, \"memory_gib\": 1, \"bandwidth_gbs\": 1";
  CHECK(!Cluster::parse("c.json", "{\"devices\": [" + one + ", \"name\": 5}]}",
                        error));
  CHECK(error == "c.json: devices[0]: 'name' must be a string, got 5");
  CHECK(!Cluster::parse("c.json",
                        "{\"devices\": [" + one + "}, " + one +
                            "}], \"links\": {\"from\": 0}, "
                            "\"default_link\": {\"gbps\": 1, "
                            "\"latency_us\": 1}}",
                        error));
  CHECK(error == "c.json: \"links\" must be an array, got {\"from\":0}");
  CHECK(!Cluster::parse(
      "c.json", "{\"devices\": [" + one + "}], \"default_link\": 3}", error));
  CHECK(error == "c.json: \"default_link\" must be an object, got 3");
  CHECK(!Cluster::parse("c.json", "{\"devices\": [1,", error));
  CHECK(error.rfind("c.json: not JSON: ", 0) == 0);
  CHECK(!Cluster::read("/dev/zero", error));
  CHECK(error == "cannot read cluster description '/dev/zero': it is a "
                 "character device, not a regular file");
}

TEST_CASE("cost model: a GPT's layers and their FLOPs") {
  DiagnosticEngine diag;
  frontend::CompileOptions options;
  options.defines = {{"V", "64"}, {"T", "16"}, {"D", "32"},
                     {"H", "2"},  {"L", "3"},  {"B", "4"}};
  auto m = frontend::compileModelFile(sample("gpt.mg"), options, diag);
  REQUIRE(m);
  ModelLayers layers = forwardLayers(*m);
  REQUIRE(layers.layers.size() == 3);
  CHECK(layers.layers[2].name == "blocks.2");
  double b = 4, t = 16, d = 32;
  // Per block: q, k, v and the projection (4 D^2) and the MLP (8 D^2) per
  // token, 2 FLOPs each; causal attention 2 T D per token.
  double matmuls = 2 * b * t * 12 * d * d + 2 * b * t * t * d;
  for (const LayerCost &l : layers.layers) {
    INFO(l.name);
    CHECK(l.forward.flops >= matmuls);
    CHECK(l.forward.flops < 1.2 * matmuls); // norms, GELU, adds
    // 12 D^2 weights and 12 D biases and norm parameters (no key bias),
    // f32.
    CHECK(l.paramBytes == doctest::Approx(4 * (12 * d * d + 12 * d)));
  }
  // The embedding tables come first; the head (tied to the token table)
  // and the loss last.
  CHECK(layers.first.paramBytes == doctest::Approx(4 * (64 * d + 16 * d)));
  CHECK(layers.last.forward.flops >= 2 * b * t * d * 64);
}

TEST_CASE("stage balance: the best split of all, faster than equal counts "
          "on devices that differ") {
  // Six equal layers on a slow and a fast device: the fast one takes
  // three times as many.
  ModelLayers m = layersOf({1e12, 1e12, 1e12, 1e12, 1e12, 1e12, 1e12, 1e12});
  std::vector<ClusterDevice> devices = {device("slow", 100, 80),
                                        device("fast", 300, 80)};
  std::string error;
  FailureOr<StagePlan> balanced = balanceStages(m, devices, 4, error);
  INFO(error);
  REQUIRE(balanced.succeeded());
  CHECK(balanced->first == std::vector<int64_t>{0, 2});
  FailureOr<StagePlan> equal =
      planStages(m, devices, 4, equalSplit(8, 2), error);
  REQUIRE(equal.succeeded());
  CHECK(balanced->stepSeconds < 0.7 * equal->stepSeconds);

  // Against every split, on uneven layers and three uneven devices.
  ModelLayers uneven = layersOf({3e12, 1e12, 4e12, 1e12, 5e12, 9e12, 2e12});
  std::vector<ClusterDevice> three = {
      device("a", 100, 80), device("b", 250, 80), device("c", 150, 80)};
  FailureOr<StagePlan> best = balanceStages(uneven, three, 1, error);
  REQUIRE(best.succeeded());
  auto slowest = [](const StagePlan &p) {
    double worst = 0;
    for (size_t s = 0; s < p.forwardSeconds.size(); ++s)
      worst = std::max(worst, p.forwardSeconds[s] + p.backwardSeconds[s]);
    return worst;
  };
  for (int64_t i = 1; i < 7; ++i)
    for (int64_t j = i + 1; j < 7; ++j) {
      FailureOr<StagePlan> p = planStages(uneven, three, 1, {0, i, j}, error);
      REQUIRE(p.succeeded());
      CHECK(slowest(*best) <= slowest(*p) * (1 + 1e-12));
    }
}

TEST_CASE("stage balance: the fast device takes the heavy head") {
  // The head costs as much as six layers: the balancer orders the
  // devices so that the fast one runs the last stage.
  ModelLayers m = layersOf({1e12, 1e12, 1e12, 1e12});
  m.last.forward.flops = 6e12;
  std::vector<ClusterDevice> devices = {device("fast", 300, 80),
                                        device("slow-0", 100, 80),
                                        device("slow-1", 100, 80)};
  std::string error;
  FailureOr<StagePlan> p = balanceStages(m, devices, 2, error);
  INFO(error);
  REQUIRE(p.succeeded());
  CHECK(p->device == std::vector<size_t>{1, 2, 0});
  FailureOr<StagePlan> given =
      planStages(m, devices, 2, equalSplit(4, 3), error);
  REQUIRE(given.succeeded());
  CHECK(p->stepSeconds < given->stepSeconds);
}

TEST_CASE("stage balance: a slow link moves the cut to where little "
          "crosses") {
  // Four equal layers on two equal devices: the middle cut is best when
  // messages are free; if 1 GB would cross it (and 1 KB after layer 1),
  // a 1 GB/s link makes the uneven cut the faster plan.
  ModelLayers m = layersOf({1e12, 1e12, 1e12, 1e12});
  m.cutBytes = {0, 1e3, 1e9, 1e9};
  std::vector<ClusterDevice> two = {device("a", 100, 80), device("b", 100, 80)};
  std::string error;
  FailureOr<StagePlan> free = balanceStages(m, two, 1, error);
  REQUIRE(free.succeeded());
  CHECK(free->first == std::vector<int64_t>{0, 2});
  LinkOf slow = [](size_t, size_t) { return ClusterLink{1e9, 1e-5}; };
  FailureOr<StagePlan> linked = balanceStages(m, two, 1, error, slow);
  REQUIRE(linked.succeeded());
  CHECK(linked->first == std::vector<int64_t>{0, 1});
  // The message is on the sender's account: 1 KB at 1 GB/s plus 10 us.
  CHECK(linked->forwardSeconds[0] == doctest::Approx(0.01 + 1e-5 + 1e3 / 1e9));
  // And its own part of the times: sent forward by stage 0, back by 1.
  CHECK(linked->forwardLinkSeconds[0] == doctest::Approx(1e-5 + 1e3 / 1e9));
  CHECK(linked->backwardLinkSeconds[0] == 0);
  CHECK(linked->forwardLinkSeconds[1] == 0);
  CHECK(linked->backwardLinkSeconds[1] == doctest::Approx(1e-5 + 1e3 / 1e9));
  CHECK(free->forwardLinkSeconds == std::vector<double>{0, 0});
}

TEST_CASE("stage balance: what cannot be split or fit is refused") {
  ModelLayers m = layersOf({1e12, 1e12, 1e12});
  std::string error;
  std::vector<ClusterDevice> four(4, device("d", 100, 80));
  CHECK(balanceStages(m, four, 4, error).failed());
  CHECK(error == "4 stages for a model of 3 layers: each stage needs at "
                 "least one");
  // A layer's 1 MiB of parameters needs 4 MiB with gradients and AdamW's
  // moments, and its activations 1 MiB per micro-batch in flight (two on
  // the first of two stages, one on the second): the small device holds
  // 1 MiB. The closest plan puts it last, with one layer.
  std::vector<ClusterDevice> small = {device("tiny", 100, 1.0 / 1024),
                                      device("big", 100, 80)};
  FailureOr<StagePlan> p = balanceStages(m, small, 1, error);
  CHECK(p.failed());
  CHECK(error == "the plan does not fit: stage 1 (tiny) needs 5.00 MiB, "
                 "4.00 MiB more than its 1.00 MiB");
  std::vector<ClusterDevice> three(3, device("d", 100, 80));
  CHECK(planStages(m, three, 1, {0, 2, 1}, error).failed());
  CHECK(error.find("in increasing order") != std::string::npos);
}

TEST_CASE("cluster: dp shares follow each dp coordinate's slowest device") {
  std::string error;
  auto cluster = Cluster::parse("c.json", R"({"devices": [
      {"name": "a", "tflops": 400, "memory_gib": 80, "bandwidth_gbs": 3000},
      {"name": "b", "tflops": 400, "memory_gib": 80, "bandwidth_gbs": 3000},
      {"name": "c", "tflops": 100, "memory_gib": 80, "bandwidth_gbs": 3000},
      {"name": "d", "tflops": 400, "memory_gib": 80, "bandwidth_gbs": 3000}],
      "default_link": {"gbps": 100, "latency_us": 1}})",
                                error);
  REQUIRE(cluster);
  auto seconds = [](const ClusterDevice &d) { return 1e12 / d.flopsPerSecond; };
  // dp=4: each device alone, 4:4:1:4.
  auto dp4 =
      weightDataAxis(*ir::Mesh::parse("dp=4", error), *cluster, seconds, error);
  REQUIRE(dp4);
  CHECK(dp4->str() == "dp=4[4,4,1,4]");
  // dp=2 x tp=2: devices (0, 1) and (2, 3); the second goes at c's pace.
  auto mesh = weightDataAxis(*ir::Mesh::parse("dp=2,tp=2", error), *cluster,
                             seconds, error);
  REQUIRE(mesh);
  CHECK(mesh->str() == "dp=2[4,1],tp=2");
  // Equal devices give equal shares: no weights.
  auto fast = Cluster::parse("c.json", R"({"devices": [
      {"name": "a", "tflops": 400, "memory_gib": 80, "bandwidth_gbs": 3000},
      {"name": "b", "tflops": 400, "memory_gib": 80, "bandwidth_gbs": 3000}],
      "default_link": {"gbps": 100, "latency_us": 1}})",
                             error);
  REQUIRE(fast);
  auto same =
      weightDataAxis(*ir::Mesh::parse("dp=2", error), *fast, seconds, error);
  REQUIRE(same);
  CHECK(same->str() == "dp=2");
  // What does not fit is refused.
  CHECK(!weightDataAxis(*ir::Mesh::parse("dp=2", error), *cluster, seconds,
                        error));
  CHECK(error == "4 devices for the mesh dp=2 of 2: expected one per device");
  CHECK(!weightDataAxis(*ir::Mesh::parse("tp=4", error), *cluster, seconds,
                        error));
  CHECK(error.find("give the mesh a pp or a dp axis") != std::string::npos);
  CHECK(!weightDataAxis(*ir::Mesh::parse("dp=4[1,2,3,4]", error), *cluster,
                        seconds, error));
  CHECK(error.find("--dp-weights") != std::string::npos);
  // With a batch the weights are the rows they give: 4:4:1:4 on 13 rows is
  // the same; on 8 rows 3:2:1:2 (largest remainders first).
  auto rows13 = weightDataAxis(*ir::Mesh::parse("dp=4", error), *cluster,
                               seconds, error, 13);
  REQUIRE(rows13);
  CHECK(rows13->str() == "dp=4[4,4,1,4]");
  auto rows8 = weightDataAxis(*ir::Mesh::parse("dp=4", error), *cluster,
                              seconds, error, 8);
  REQUIRE(rows8);
  CHECK(rows8->str() == "dp=4[3,2,1,2]");
}

TEST_CASE("cluster: dp weights reduce to the rows they give") {
  std::string error;
  auto axisOf = [&](const char *text) {
    return *ir::Mesh::parse(text, error)->findAxis(ir::kDataAxis);
  };
  using V = std::vector<int64_t>;
  CHECK(rowWeights(axisOf("dp=2[49,10]"), 8) == V{7, 1});
  CHECK(rowWeights(axisOf("dp=2[49,10]"), 59) == V{49, 10});
  CHECK(rowWeights(axisOf("dp=2[49,10]"), 118) == V{49, 10});
  CHECK(rowWeights(axisOf("dp=2[3,1]"), 16) == V{3, 1});
  CHECK(rowWeights(axisOf("dp=3[5,5,1]"), 22) == V{5, 5, 1});
  // A coordinate that would get no row keeps the weights (the partitioner
  // refuses such a split, naming it).
  CHECK(rowWeights(axisOf("dp=2[49,1]"), 8) == V{49, 1});
  CHECK(rowWeights(axisOf("dp=2"), 8).empty());
}

TEST_CASE("cluster: thousands of devices are counted first, links kept "
          "sparse, and every pair without a link is named") {
  auto devicesText = [](size_t n) {
    std::string text = "{\"devices\": [";
    for (size_t i = 0; i < n; ++i)
      text += std::string(i ? ", " : "") +
              "{\"tflops\": 100, \"memory_gib\": 80, \"bandwidth_gbs\": 2000}";
    return text + "]";
  };
  std::string error;
  std::string link = ", \"default_link\": {\"gbps\": 100, \"latency_us\": 5}}";
  // More devices than a mesh can have: refused before any is read.
  CHECK(!Cluster::parse("big.json", devicesText(14000) + link, error));
  CHECK(error == "big.json: 14000 devices: a mesh has at most 4096");
  // The largest mesh's cluster: links from the default, none laid out.
  auto largest = Cluster::parse("c.json", devicesText(4096) + link, error);
  REQUIRE(largest);
  CHECK(largest->devices().size() == 4096);
  CHECK(largest->link(0, 4095).bytesPerSecond == doctest::Approx(100e9));
  CHECK(largest->link(4095, 17).latencySeconds == doctest::Approx(5e-6));
  // Without a default every pair needs a link: the first one missing.
  std::string chain = devicesText(3) +
                      ", \"links\": [{\"from\": 0, \"to\": "
                      "1, \"gbps\": 1, \"latency_us\": 1}, {\"from\": 2, "
                      "\"to\": 1, \"gbps\": 2, \"latency_us\": 1}]}";
  CHECK(!Cluster::parse("c.json", chain, error));
  CHECK(error == "c.json: no link between devices 0 and 2: list it in "
                 "\"links\" or give \"default_link\"");
  // A link listed one way goes both ways, unless the other way is listed.
  std::string twoWays = devicesText(2) +
                        ", \"links\": [{\"from\": 0, \"to\": 1, \"gbps\": "
                        "1, \"latency_us\": 1}, {\"from\": 1, \"to\": 0, "
                        "\"gbps\": 3, \"latency_us\": 1}]}";
  auto both = Cluster::parse("c.json", twoWays, error);
  REQUIRE(both);
  CHECK(both->link(0, 1).bytesPerSecond == doctest::Approx(1e9));
  CHECK(both->link(1, 0).bytesPerSecond == doctest::Approx(3e9));
}

TEST_CASE("cluster: dp shares of devices a quintillion times apart keep "
          "their order") {
  std::string error;
  auto cluster = Cluster::parse("c.json", R"({"devices": [
      {"name": "fast", "tflops": 1e20, "memory_gib": 80, "bandwidth_gbs": 3000},
      {"name": "slow", "tflops": 1e-2, "memory_gib": 80, "bandwidth_gbs": 3000}],
      "default_link": {"gbps": 100, "latency_us": 1}})",
                                error);
  REQUIRE(cluster);
  auto seconds = [](const ClusterDevice &d) { return 1e12 / d.flopsPerSecond; };
  auto mesh =
      weightDataAxis(*ir::Mesh::parse("dp=2", error), *cluster, seconds, error);
  REQUIRE(mesh);
  const ir::MeshAxis &dp = *mesh->findAxis(ir::kDataAxis);
  REQUIRE(dp.weights.size() == 2);
  CHECK(dp.weights[0] > dp.weights[1]);
  CHECK(dp.weights[1] >= 1);
}
