#include "passes/StageBalance.h"

#include "passes/Schedule.h"
#include "passes/ScheduleCheck.h"

#include <algorithm>
#include <cstdio>
#include <limits>

namespace mgc::passes {

namespace {

double secondsOn(const WorkAmount &w, const ClusterDevice &d) {
  return std::max(w.flops / d.flopsPerSecond, w.bytes / d.bytesPerSecond);
}

// "1.50 GiB", "6.00 MiB": the largest unit that keeps a whole part.
std::string sizeText(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (u < 4 && bytes >= 1024) {
    bytes /= 1024;
    ++u;
  }
  char s[32];
  std::snprintf(s, sizeof s, "%.2f %s", bytes, units[u]);
  return s;
}

// What stage s of `stages` running layers [a, b) holds and does: the
// embedding goes with the first stage, the head and loss with the last.
struct StageTotals {
  WorkAmount work;
  double params = 0, activations = 0;
};

StageTotals stageTotals(const ModelLayers &m, int64_t s, int64_t stages,
                        int64_t a, int64_t b) {
  StageTotals t;
  auto add = [&](const LayerCost &l) {
    t.work += l.forward;
    t.params += l.paramBytes;
    t.activations += l.activationBytes;
  };
  if (s == 0)
    add(m.first);
  for (int64_t i = a; i < b; ++i)
    add(m.layers[i]);
  if (s == stages - 1)
    add(m.last);
  return t;
}

// The cost of stage s of `stages` running layers [a, b) on its device.
struct StageCost {
  double forward = 0, backward = 0, memory = 0;
  double forwardLink = 0, backwardLink = 0; // parts of forward, backward
};

class Costing {
public:
  // Stage s runs on devices[order[s]].
  Costing(const ModelLayers &m, llvm::ArrayRef<ClusterDevice> devices,
          int64_t micro, llvm::ArrayRef<size_t> order, const LinkOf &link)
      : m_(m), devices_(devices), micro_(static_cast<double>(micro)),
        order_(order), link_(link) {}

  int64_t stages() const { return static_cast<int64_t>(order_.size()); }
  const ClusterDevice &device(int64_t s) const { return devices_[order_[s]]; }

  StageCost of(int64_t s, int64_t a, int64_t b) const {
    StageTotals t = stageTotals(m_, s, stages(), a, b);
    WorkAmount work = t.work;
    double params = t.params, activations = t.activations;
    work.flops /= micro_;
    work.bytes /= micro_;
    StageCost c;
    double compute = secondsOn(work, device(s));
    c.forwardLink = s + 1 < stages() ? send(s, s + 1, b) : 0;
    c.backwardLink = s > 0 ? send(s, s - 1, a) : 0;
    c.forward = compute + c.forwardLink;
    c.backward = 2 * compute + c.backwardLink;
    // f32 weights, gradients and two AdamW moments; the activations of the
    // micro-batches 1F1B keeps in flight on the stage.
    c.memory =
        4 * params + activations / micro_ * static_cast<double>(stages() - s);
    return c;
  }

private:
  // One micro-batch's message across the cut before layer `cut`.
  double send(int64_t from, int64_t to, int64_t cut) const {
    double bytes = static_cast<size_t>(cut) < m_.cutBytes.size()
                       ? m_.cutBytes[cut] / micro_
                       : 0;
    if (!link_ || bytes <= 0)
      return 0;
    ClusterLink l = link_(order_[from], order_[to]);
    return l.latencySeconds + bytes / l.bytesPerSecond;
  }

  const ModelLayers &m_;
  llvm::ArrayRef<ClusterDevice> devices_;
  double micro_;
  llvm::ArrayRef<size_t> order_;
  const LinkOf &link_;
};

std::vector<size_t> identity(size_t n) {
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i)
    order[i] = i;
  return order;
}

} // namespace

std::vector<double> stageMemory(const ModelLayers &model,
                                llvm::ArrayRef<int64_t> first, int64_t micro,
                                llvm::ArrayRef<int64_t> inFlight) {
  int64_t stages = static_cast<int64_t>(first.size());
  int64_t n = static_cast<int64_t>(model.layers.size());
  std::vector<double> out;
  for (int64_t s = 0; s < stages; ++s) {
    StageTotals t = stageTotals(model, s, stages, first[s],
                                s + 1 < stages ? first[s + 1] : n);
    out.push_back(4 * t.params + t.activations / static_cast<double>(micro) *
                                     static_cast<double>(inFlight[s]));
  }
  return out;
}

double shareSeconds(const ModelLayers &model, const ClusterDevice &device,
                    int64_t parts) {
  WorkAmount work = model.first.forward;
  for (const LayerCost &l : model.layers)
    work += l.forward;
  work += model.last.forward;
  work.flops /= static_cast<double>(parts);
  work.bytes /= static_cast<double>(parts);
  return 3 * secondsOn(work, device);
}

std::vector<int64_t> equalSplit(int64_t layers, int64_t stages) {
  std::vector<int64_t> first;
  int64_t at = 0;
  for (int64_t s = 0; s < stages; ++s) {
    first.push_back(at);
    at += layers / stages + (s < layers % stages ? 1 : 0);
  }
  return first;
}

namespace {

// The plan of `first` with stage s on devices[order[s]].
FailureOr<StagePlan> planInOrder(const ModelLayers &model,
                                 llvm::ArrayRef<ClusterDevice> devices,
                                 std::vector<size_t> order, int64_t micro,
                                 std::vector<int64_t> first, std::string &error,
                                 const LinkOf &link) {
  int64_t n = static_cast<int64_t>(model.layers.size());
  int64_t stages = static_cast<int64_t>(order.size());
  if (micro < 1) {
    error = "a pipeline needs at least one micro-batch, got " +
            std::to_string(micro);
    return failure();
  }
  if (stages < 1 || stages > n) {
    error = std::to_string(stages) + " stages for a model of " +
            std::to_string(n) + " layers: each stage needs at least one";
    return failure();
  }
  bool ok = static_cast<int64_t>(first.size()) == stages && first[0] == 0;
  for (int64_t s = 1; ok && s < stages; ++s)
    ok = first[s] > first[s - 1] && first[s] < n;
  if (!ok) {
    error = "a split of " + std::to_string(n) + " layers over " +
            std::to_string(stages) +
            " stages gives each stage its first layer, in increasing order "
            "from 0, each stage at least one";
    return failure();
  }
  Costing cost(model, devices, micro, order, link);
  StagePlan plan;
  plan.first = std::move(first);
  plan.device = order; // `cost` still reads `order`
  for (int64_t s = 0; s < stages; ++s) {
    int64_t end = s + 1 < stages ? plan.first[s + 1] : n;
    StageCost c = cost.of(s, plan.first[s], end);
    plan.forwardSeconds.push_back(c.forward);
    plan.backwardSeconds.push_back(c.backward);
    plan.forwardLinkSeconds.push_back(c.forwardLink);
    plan.backwardLinkSeconds.push_back(c.backwardLink);
    plan.memoryBytes.push_back(c.memory);
    plan.deviceBytes.push_back(cost.device(s).memoryBytes);
  }
  for (int64_t s = 0; s < stages; ++s)
    if (plan.memoryBytes[s] > plan.deviceBytes[s]) {
      error = "the plan does not fit: stage " + std::to_string(s) + " (" +
              cost.device(s).name + ") needs " + sizeText(plan.memoryBytes[s]) +
              ", " + sizeText(plan.memoryBytes[s] - plan.deviceBytes[s]) +
              " more than its " + sizeText(plan.deviceBytes[s]);
      return failure();
    }
  std::string why;
  FailureOr<Schedule> schedule =
      makeSchedule(ScheduleKind::OneFOneB, stages, micro, 1, why);
  std::vector<WorkCosts> costs;
  for (int64_t s = 0; s < stages; ++s) {
    WorkCosts c;
    c.forward = plan.forwardSeconds[s];
    c.backward = plan.backwardSeconds[s];
    costs.push_back(c);
  }
  PipeTiming timing;
  if (schedule.failed() ||
      !(why = checkPipePrograms(lowerSchedule(*schedule), costs, &timing))
           .empty()) {
    error = "the 1F1B schedule of the plan: " + why;
    return failure();
  }
  plan.stepSeconds = timing.makespan;
  return plan;
}

using Score = std::pair<double, double>; // (memory overflow, slowest stage)

// The best split of the layers over `devices` in this order, and its score.
Score bestSplit(const ModelLayers &model, llvm::ArrayRef<ClusterDevice> devices,
                llvm::ArrayRef<size_t> order, int64_t micro, const LinkOf &link,
                std::vector<int64_t> &first) {
  int64_t n = static_cast<int64_t>(model.layers.size());
  int64_t stages = static_cast<int64_t>(order.size());
  Costing cost(model, devices, micro, order, link);
  // best[s][i]: the first s stages running layers [0, i), as (the largest
  // memory overflow, the slowest stage's forward and backward), compared
  // in that order; from[s][i] the first layer of the s-th stage.
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<Score>> best(
      stages + 1, std::vector<Score>(n + 1, Score{inf, inf}));
  std::vector<std::vector<int64_t>> from(stages + 1,
                                         std::vector<int64_t>(n + 1, -1));
  best[0][0] = {0, 0};
  for (int64_t s = 1; s <= stages; ++s)
    for (int64_t i = s; i <= n - (stages - s); ++i)
      for (int64_t j = s - 1; j < i; ++j) {
        if (best[s - 1][j].first == inf)
          continue;
        StageCost c = cost.of(s - 1, j, i);
        double overflow =
            std::max(0.0, c.memory - cost.device(s - 1).memoryBytes);
        Score score{std::max(best[s - 1][j].first, overflow),
                    std::max(best[s - 1][j].second, c.forward + c.backward)};
        if (score < best[s][i]) {
          best[s][i] = score;
          from[s][i] = j;
        }
      }
  first.assign(stages, 0);
  for (int64_t s = stages, i = n; s >= 1; --s) {
    first[s - 1] = from[s][i];
    i = from[s][i];
  }
  return best[stages][n];
}

bool sameKind(const ClusterDevice &a, const ClusterDevice &b) {
  return a.flopsPerSecond == b.flopsPerSecond &&
         a.bytesPerSecond == b.bytesPerSecond && a.memoryBytes == b.memoryBytes;
}

} // namespace

FailureOr<StagePlan> planStages(const ModelLayers &model,
                                llvm::ArrayRef<ClusterDevice> devices,
                                int64_t micro, std::vector<int64_t> first,
                                std::string &error, const LinkOf &link) {
  return planInOrder(model, devices, identity(devices.size()), micro,
                     std::move(first), error, link);
}

FailureOr<StagePlan> balanceStages(const ModelLayers &model,
                                   llvm::ArrayRef<ClusterDevice> devices,
                                   int64_t micro, std::string &error,
                                   const LinkOf &link) {
  int64_t n = static_cast<int64_t>(model.layers.size());
  int64_t stages = static_cast<int64_t>(devices.size());
  if (stages < 1 || stages > n || micro < 1)
    return planStages(model, devices, micro, equalSplit(n, stages), error,
                      link);
  // Devices of one kind are interchangeable: the orders to try are those
  // of their kinds (the first device of a kind stands for it).
  std::vector<size_t> kindOf;
  for (size_t d = 0; d < devices.size(); ++d) {
    size_t k = d;
    for (size_t e = 0; e < d; ++e)
      if (sameKind(devices[e], devices[d])) {
        k = kindOf[e];
        break;
      }
    kindOf.push_back(k);
  }
  std::vector<size_t> kinds = kindOf;
  std::sort(kinds.begin(), kinds.end());
  // Beyond this many orders (many devices, all different), only the order
  // given is balanced.
  constexpr int64_t kMaxOrders = 50000;
  Score bestScore{std::numeric_limits<double>::infinity(), 0};
  std::vector<size_t> bestOrder;
  std::vector<int64_t> bestFirst;
  auto tryOrder = [&](const std::vector<size_t> &order) {
    std::vector<int64_t> first;
    Score score = bestSplit(model, devices, order, micro, link, first);
    if (score < bestScore) {
      bestScore = score;
      bestOrder = order;
      bestFirst = first;
    }
  };
  tryOrder(identity(devices.size()));
  int64_t tried = 0;
  do {
    if (++tried > kMaxOrders)
      break;
    // The devices of each kind in their given order.
    std::vector<size_t> order, next(devices.size(), 0);
    for (size_t k : kinds) {
      size_t d = next[k];
      while (kindOf[d] != k)
        ++d;
      next[k] = d + 1;
      order.push_back(d);
    }
    tryOrder(order);
  } while (std::next_permutation(kinds.begin(), kinds.end()));
  // A split that does not fit is reported by planInOrder (the one closest
  // to fitting).
  return planInOrder(model, devices, std::move(bestOrder), micro,
                     std::move(bestFirst), error, link);
}

} // namespace mgc::passes
