#include "passes/PipelineSplit.h"

#include "ir/Verifier.h"
#include "passes/Accumulation.h"
#include "passes/CostModel.h"
#include "passes/ModuleCut.h"

#include <algorithm>
#include <map>

namespace mgc::passes {

using ir::Op;
using ir::Value;

const char *phaseName(Phase phase, bool splitBackward) {
  switch (phase) {
  case Phase::Forward:
    return "F";
  case Phase::Backward:
    return splitBackward ? "I" : "B";
  case Phase::Weight:
    return "W";
  }
  return "?";
}

void lowerPipeMessages(ir::Module &program) {
  ir::Graph &g = program.graph();
  std::vector<Op *> messages;
  for (auto &op : g.ops())
    if (op->kind() == ir::OpKind::Send || op->kind() == ir::OpKind::Recv)
      messages.push_back(op.get());
  if (messages.empty())
    return;
  for (Op *op : messages) {
    std::string name = op->attrs().getString("value");
    if (op->kind() == ir::OpKind::Recv) {
      Value *in = g.addInput(name, op->type(), op->loc());
      in->setSharding(op->result()->sharding());
      g.replaceAllUsesWith(op->result(), in);
      continue;
    }
    bool output = false;
    for (const ir::Output &o : g.outputs())
      output |= o.name == name;
    if (!output)
      g.addOutput(name, op->operand(0));
    g.replaceAllUsesWith(op->result(), op->operand(0));
  }
  llvm::DenseSet<const Op *> erase(messages.begin(), messages.end());
  g.eraseOpsIf([&](const Op &op) { return erase.contains(&op); });
}

LogicalResult checkStageSplit(llvm::ArrayRef<int64_t> first, int64_t layers,
                              llvm::StringRef model, DiagnosticEngine &diag) {
  int64_t stages = static_cast<int64_t>(first.size());
  bool ok = stages >= 1 && stages <= layers && first[0] == 0;
  for (int64_t s = 1; ok && s < stages; ++s)
    ok = first[s] > first[s - 1] && first[s] < layers;
  if (!ok) {
    diag.error("model '" + model.str() + "' has " + std::to_string(layers) +
               " layers (repeat iterations): a split over " +
               std::to_string(stages) +
               " stages gives each at least one, in order from 0");
    return failure();
  }
  return success();
}

llvm::DenseSet<const Op *> recomputedOps(const ir::Module &module) {
  llvm::DenseSet<const Op *> out;
  for (const auto &op : module.graph().ops()) {
    bool free = true;
    for (const Value *v : op->operands()) {
      const Op *def = v->definingOp();
      free &= def ? out.contains(def) : v->isPersistent();
    }
    if (free)
      out.insert(op.get());
  }
  return out;
}

llvm::DenseMap<const Op *, int64_t> stagesOfOps(const ir::Module &module,
                                                llvm::ArrayRef<int64_t> first) {
  OpLayers layers = opLayers(module);
  llvm::DenseSet<const Op *> recomputed = recomputedOps(module);
  llvm::DenseMap<const Op *, int64_t> out;
  int64_t current = 0;
  for (const auto &op : module.graph().ops()) {
    if (recomputed.contains(op.get()))
      continue;
    if (!layerOfScope(op->scope()).empty()) {
      int64_t layer = layers.layerOf.lookup(op.get());
      current = static_cast<int64_t>(
                    std::upper_bound(first.begin(), first.end(), layer) -
                    first.begin()) -
                1;
    }
    out[op.get()] = current;
  }
  return out;
}

namespace {

bool isSumOutput(llvm::StringRef name) {
  return name.startswith(kMicroSumPrefix);
}

// A program of the split: a stage and a phase.
struct Place {
  int64_t stage = 0;
  Phase phase = Phase::Forward;
  friend bool operator==(const Place &a, const Place &b) {
    return a.stage == b.stage && a.phase == b.phase;
  }
  friend bool operator!=(const Place &a, const Place &b) { return !(a == b); }
};

class Splitter {
public:
  Splitter(const ir::Module &micro, llvm::ArrayRef<int64_t> first,
           bool splitBackward, DiagnosticEngine &diag)
      : micro_(micro), graph_(micro.graph()), first_(first),
        splitBackward_(splitBackward), diag_(diag) {}

  FailureOr<PipelineSplit> run() {
    if (failed(checkStageSplit(
            first_, static_cast<int64_t>(opLayers(micro_).names.size()),
            micro_.name(), diag_)))
      return failure();
    recomputed_ = recomputedOps(micro_);
    stageOf_ = stagesOfOps(micro_, first_);
    markForward();
    countUses();
    splitSums();
    for (const auto &op : graph_.ops())
      if (assigned(op.get()))
        phaseOf_[op.get()] =
            forward_.contains(op.get()) ? Phase::Forward : Phase::Backward;
    if (failed(checkDirections()))
      return failure();
    if (splitBackward_)
      markWeightHalf();
    return build();
  }

private:
  bool assigned(const Op *op) const {
    return !recomputed_.contains(op) && !dropped_.contains(op);
  }
  Place placeOf(const Op *op) const {
    return {stageOf_.lookup(op), phaseOf_.lookup(op)};
  }
  int64_t stages() const { return static_cast<int64_t>(first_.size()); }
  size_t numPhases() const { return splitBackward_ ? 3 : 2; }
  Phase lastPhase() const {
    return splitBackward_ ? Phase::Weight : Phase::Backward;
  }

  // F: everything the forward outputs (all but the summed gradients) need.
  void markForward() {
    std::vector<const Value *> work;
    for (const ir::Output &o : graph_.outputs())
      if (!isSumOutput(o.name))
        work.push_back(o.value);
    while (!work.empty()) {
      const Op *op = work.back()->definingOp();
      work.pop_back();
      if (!op || !forward_.insert(op).second)
        continue;
      for (const Value *v : op->operands())
        work.push_back(v);
    }
  }

  void countUses() {
    for (const auto &op : graph_.ops())
      for (const Value *v : op->operands())
        ++uses_[v];
    for (const ir::Output &o : graph_.outputs())
      ++uses_[o.value];
  }

  int64_t stageOfValue(const Value *v) const {
    const Op *op = v->definingOp();
    return op && !recomputed_.contains(op) ? stageOf_.lookup(op) : -1;
  }

  // The parts of a summed gradient made on different stages: an add (used
  // only by the sum) of values of two stages is not computed; each stage
  // gives its operand.
  void partsOf(const Value *v, std::vector<const Value *> &parts,
               std::vector<const Op *> &adds) {
    const Op *op = v->definingOp();
    if (op && op->kind() == ir::OpKind::Add && !recomputed_.contains(op) &&
        uses_.lookup(v) == 1) {
      int64_t a = stageOfValue(op->operand(0)),
              b = stageOfValue(op->operand(1));
      if (a >= 0 && b >= 0 && a != b) {
        adds.push_back(op);
        partsOf(op->operand(0), parts, adds);
        partsOf(op->operand(1), parts, adds);
        return;
      }
    }
    parts.push_back(v);
  }

  void splitSums() {
    for (const ir::Output &o : graph_.outputs()) {
      std::vector<const Value *> parts;
      std::vector<const Op *> adds;
      if (isSumOutput(o.name))
        partsOf(o.value, parts, adds);
      else
        parts.push_back(o.value);
      // Two parts on one stage would be two outputs of one name: keep the
      // sum whole (it then crosses as a value, which is right, only slower).
      std::vector<int64_t> seen;
      bool distinct = true;
      for (const Value *p : parts) {
        int64_t s = stageOfValue(p);
        distinct &= !llvm::is_contained(seen, s);
        seen.push_back(s);
      }
      if (!distinct) {
        parts = {o.value};
        adds.clear();
      }
      for (const Op *add : adds)
        dropped_.insert(add);
      for (const Value *p : parts)
        roots_.push_back({&o, p});
    }
  }

  LogicalResult checkDirections() {
    for (const auto &each : graph_.ops()) {
      const Op *op = each.get();
      if (!assigned(op))
        continue;
      Place at = placeOf(op);
      for (const Value *v : op->operands()) {
        const Op *def = v->definingOp();
        if (!def || !assigned(def))
          continue;
        Place from = placeOf(def);
        bool forwardValue = from.phase == Phase::Forward;
        bool ok =
            forwardValue ? from.stage <= at.stage : from.stage >= at.stage;
        if (ok)
          continue;
        diag_.error(
            op->loc(),
            "pipeline stages: " + describeOp(*op) + " (in the " +
                (at.phase == Phase::Forward ? "forward" : "backward") +
                " of stage " + std::to_string(at.stage) +
                ") reads the result of " + describeOp(*def) + " (in the " +
                (forwardValue ? "forward" : "backward") + " of stage " +
                std::to_string(from.stage) + "): the forward passes values " +
                "only to later stages, the backward only to earlier ones");
        return failure();
      }
    }
    return success();
  }

  // With a split backward: I is what another stage's backward reads and
  // what that needs on the stage; the rest of the backward is W.
  void markWeightHalf() {
    llvm::DenseSet<const Op *> inputHalf;
    std::vector<const Op *> work;
    for (const auto &each : graph_.ops()) {
      const Op *op = each.get();
      if (!assigned(op) || phaseOf_[op] == Phase::Forward)
        continue;
      for (const Value *v : op->operands()) {
        const Op *def = v->definingOp();
        if (def && assigned(def) && phaseOf_[def] != Phase::Forward &&
            stageOf_[def] != stageOf_[op])
          work.push_back(def);
      }
    }
    while (!work.empty()) {
      const Op *op = work.back();
      work.pop_back();
      if (!inputHalf.insert(op).second)
        continue;
      for (const Value *v : op->operands()) {
        const Op *def = v->definingOp();
        if (def && assigned(def) && phaseOf_[def] != Phase::Forward &&
            stageOf_[def] == stageOf_[op])
          work.push_back(def);
      }
    }
    for (auto &[op, phase] : phaseOf_)
      if (phase == Phase::Backward && !inputHalf.contains(op))
        phase = Phase::Weight;
  }

  // The program a root (an output or its part) comes from.
  Place rootPlace(const ir::Output &o, const Value *v) const {
    const Op *op = v->definingOp();
    if (op && assigned(op))
      return placeOf(op);
    return {0, isSumOutput(o.name) ? lastPhase() : Phase::Forward};
  }

  size_t index(Place p) const {
    return static_cast<size_t>(p.stage) * numPhases() +
           static_cast<size_t>(p.phase);
  }

  // Adds `op` and the recomputed ops it reads to `ops`.
  void addWithRecomputed(const Op *op, llvm::DenseSet<const Op *> &ops) {
    std::vector<const Op *> work{op};
    while (!work.empty()) {
      const Op *o = work.back();
      work.pop_back();
      if (!ops.insert(o).second)
        continue;
      for (const Value *v : o->operands())
        if (const Op *def = v->definingOp(); def && recomputed_.contains(def))
          work.push_back(def);
    }
  }

  FailureOr<PipelineSplit> build() {
    PipelineSplit out;
    out.stages = stages();
    out.splitBackward = splitBackward_;
    size_t numPrograms = static_cast<size_t>(out.stages) * out.numPhases();
    std::vector<llvm::DenseSet<const Op *>> ops(numPrograms);
    // Per program, the pipe values it reads, in the order first read.
    std::vector<std::vector<size_t>> reads(numPrograms);
    llvm::DenseMap<const Value *, size_t> valueIndex;
    std::vector<const Value *> crossing;
    for (const auto &each : graph_.ops()) {
      const Op *op = each.get();
      if (!assigned(op))
        continue;
      Place at = placeOf(op);
      addWithRecomputed(op, ops[index(at)]);
      for (const Value *v : op->operands()) {
        const Op *def = v->definingOp();
        if (!def || !assigned(def) || placeOf(def) == at)
          continue;
        auto [it, inserted] = valueIndex.try_emplace(v, crossing.size());
        if (inserted) {
          crossing.push_back(v);
          Place from = placeOf(def);
          out.values.push_back({kPipeValuePrefix + std::to_string(it->second),
                                v->type(),
                                from.stage,
                                from.phase,
                                {}});
        }
        PipeValue &pv = out.values[it->second];
        if (at.stage != pv.stage && !llvm::is_contained(pv.readers, at.stage))
          pv.readers.push_back(at.stage);
        std::vector<size_t> &r = reads[index(at)];
        if (!llvm::is_contained(r, it->second))
          r.push_back(it->second);
      }
    }
    for (const auto &[o, v] : roots_)
      if (const Op *op = v->definingOp())
        addWithRecomputed(op, ops[index(rootPlace(*o, v))]);
    for (PipeValue &pv : out.values)
      llvm::sort(pv.readers);

    out.programs.resize(out.stages);
    for (int64_t s = 0; s < out.stages; ++s)
      for (int p = 0; p < out.numPhases(); ++p) {
        Place at{s, static_cast<Phase>(p)};
        size_t k = index(at);
        // What the stage kept from an earlier phase is an input; what
        // another stage made arrives by a recv from the neighbour it comes
        // through (the one before for an activation, after for a gradient).
        // One message brings a value to the stage: the first of its
        // phases that reads it receives it, the later ones read what the
        // stage kept.
        std::vector<std::pair<const Value *, std::string>> replaced;
        std::vector<std::pair<size_t, int64_t>> received;
        for (size_t i : reads[k]) {
          const PipeValue &pv = out.values[i];
          bool earlier = false;
          for (int p2 = 0; p2 < p; ++p2)
            earlier |= llvm::is_contained(
                reads[index({s, static_cast<Phase>(p2)})], i);
          if (pv.stage == s || earlier)
            replaced.emplace_back(crossing[i], pv.name);
          else
            received.emplace_back(i, pv.stage < s ? s - 1 : s + 1);
        }
        ModuleExtract extract(micro_, std::move(replaced));
        for (const auto &[i, peer] : received)
          extract.receive(crossing[i], peer, out.values[i].name);
        std::unique_ptr<ir::Module> m = extract.build(ops[k]);
        m->attrs().set("pipeline.stage", s);
        m->attrs().set("pipeline.phase",
                       std::string(phaseName(at.phase, splitBackward_)));
        ir::Graph &g = m->graph();
        // What it makes for a later phase of its own is an output; what
        // another stage reads it sends to the neighbour toward it.
        for (size_t i = 0; i < crossing.size(); ++i) {
          if (placeOf(crossing[i]->definingOp()) != at)
            continue;
          const PipeValue &pv = out.values[i];
          Value *made = extract.lookup(crossing[i]);
          bool kept = false;
          for (int p2 = 0; p2 < out.numPhases(); ++p2)
            kept |=
                p2 != p && llvm::is_contained(
                               reads[index({s, static_cast<Phase>(p2)})], i);
          if (kept)
            g.addOutput(pv.name, made);
          if (pv.readers.empty())
            continue;
          ir::Attrs attrs;
          attrs.set("peer", pv.readers.back() > s ? s + 1 : s - 1);
          attrs.set("value", pv.name);
          ir::Op *send = g.createOp(ir::OpKind::Send, {made}, std::move(attrs),
                                    made->type());
          send->result()->setSharding(made->sharding());
        }
        for (const auto &[o, v] : roots_) {
          if (rootPlace(*o, v) != at)
            continue;
          Value *copy = extract.lookup(v);
          if (!copy) {
            diag_.error("pipeline stages: output '" + o->name +
                        "' is not made by any stage (internal error)");
            return failure();
          }
          g.addOutput(o->name, copy, o->isLoss, o->loc);
        }
        if (failed(ir::verify(*m, diag_))) {
          diag_.error("pipeline stages: the " +
                      std::string(phaseName(at.phase, splitBackward_)) +
                      " program of stage " + std::to_string(s) +
                      " does not verify (internal error)");
          return failure();
        }
        out.programs[s].push_back(std::move(m));
      }

    out.forwardAcross.assign(out.stages > 0 ? out.stages - 1 : 0, {});
    out.backwardAcross.assign(out.forwardAcross.size(), {});
    for (size_t i = 0; i < out.values.size(); ++i) {
      const PipeValue &pv = out.values[i];
      for (int64_t b = 0; b + 1 < out.stages; ++b) {
        bool sendsOn = pv.phase == Phase::Forward && pv.stage <= b &&
                       !pv.readers.empty() && pv.readers.back() > b;
        bool sendsBack = pv.phase != Phase::Forward && pv.stage > b &&
                         !pv.readers.empty() && pv.readers.front() <= b;
        if (sendsOn)
          out.forwardAcross[b].push_back(i);
        if (sendsBack)
          out.backwardAcross[b].push_back(i);
      }
    }
    return out;
  }

  const ir::Module &micro_;
  const ir::Graph &graph_;
  llvm::ArrayRef<int64_t> first_;
  bool splitBackward_;
  DiagnosticEngine &diag_;
  llvm::DenseSet<const Op *> recomputed_, forward_, dropped_;
  llvm::DenseMap<const Op *, int64_t> stageOf_;
  llvm::DenseMap<const Op *, Phase> phaseOf_;
  llvm::DenseMap<const Value *, int> uses_;
  // The micro program's outputs, each as one or more parts (values).
  std::vector<std::pair<const ir::Output *, const Value *>> roots_;
};

} // namespace

FailureOr<PipelineSplit> splitPipeline(const ir::Module &micro,
                                       llvm::ArrayRef<int64_t> first,
                                       bool splitBackward,
                                       DiagnosticEngine &diag) {
  return Splitter(micro, first, splitBackward, diag).run();
}

} // namespace mgc::passes
