#include "passes/ApplySplit.h"

#include "ir/Verifier.h"
#include "passes/Accumulation.h"
#include "passes/ModuleCut.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallBitVector.h"

namespace mgc::passes {

using ir::Op;
using ir::Value;

namespace {

std::string deviceList(const llvm::SmallBitVector &devices) {
  std::string s;
  for (int d : devices.set_bits())
    s += (s.empty() ? "" : ", ") + std::to_string(d);
  return s;
}

class Splitter {
public:
  Splitter(const ir::Module &apply, int64_t devices, DiagnosticEngine &diag)
      : apply_(apply), devices_(static_cast<unsigned>(devices)), diag_(diag) {}

  FailureOr<ApplySplit>
  run(const std::map<std::string, std::vector<int64_t>> &givers) {
    if (failed(placeValues(givers)))
      return failure();
    // What each device computes for its own updates and outputs, and what
    // it takes from the others.
    std::vector<llvm::DenseSet<const Op *>> needed(devices_);
    std::vector<llvm::DenseSet<const Value *>> imports(devices_);
    for (unsigned d = 0; d < devices_; ++d)
      if (failed(collect(d, resultsOf(d), needed[d], imports[d])))
        return failure();
    // The values each device shares, made by its gather program with
    // everything they need.
    llvm::DenseSet<const Value *> shared;
    for (const auto &each : imports)
      shared.insert(each.begin(), each.end());
    std::vector<llvm::DenseSet<const Op *>> gathered(devices_);
    for (const auto &op : apply_.graph().ops())
      if (shared.contains(op->result())) {
        unsigned owner = ownerOf(op->result());
        llvm::DenseSet<const Value *> none;
        if (failed(collect(owner, {op->result()}, gathered[owner], none)))
          return failure();
      }

    ApplySplit out;
    out.devices = devices_;
    // The gather programs' values another program reads, in op order.
    std::vector<llvm::DenseSet<const Value *>> kept(devices_);
    for (unsigned d = 0; d < devices_; ++d)
      kept[d] = readByUpdate(d, needed[d], gathered[d]);
    // (value, device whose gather program makes it) -> index into values.
    std::map<std::pair<const Value *, unsigned>, size_t> valueOf;
    for (const auto &op : apply_.graph().ops()) {
      const Value *v = op->result();
      bool isShared = shared.contains(v);
      for (unsigned d = 0; d < devices_; ++d) {
        if (!gathered[d].contains(op.get()) ||
            !((isShared && d == ownerOf(v)) || kept[d].contains(v)))
          continue;
        size_t i = out.values.size();
        valueOf[{v, d}] = i;
        out.values.push_back({kApplyValuePrefix + std::to_string(i), op->type(),
                              d, isShared && d == ownerOf(v)});
      }
    }

    for (unsigned d = 0; d < devices_; ++d) {
      std::vector<std::pair<const Value *, std::string>> noInputs;
      if (!gathered[d].empty()) {
        ModuleExtract extract(apply_, noInputs);
        std::unique_ptr<ir::Module> m = extract.build(gathered[d]);
        for (const auto &[at, i] : valueOf)
          if (at.second == d)
            m->graph().addOutput(out.values[i].name, extract.lookup(at.first));
        sortOutputs(*m);
        if (failed(finish(*m, d, "gather")))
          return failure();
        out.gather.push_back(std::move(m));
      } else {
        out.gather.push_back(nullptr);
      }

      // The update program: what the device needs but did not gather,
      // reading the gathered values it kept and the others' shared ones.
      llvm::DenseSet<const Op *> ops;
      for (const Op *op : needed[d])
        if (!gathered[d].contains(op))
          ops.insert(op);
      std::vector<std::pair<const Value *, std::string>> replaced;
      for (const auto &op : apply_.graph().ops()) {
        const Value *v = op->result();
        auto it =
            valueOf.find({v, gathered[d].contains(op.get()) ? d : ownerOf(v)});
        if (it != valueOf.end() &&
            (it->first.second == d || imports[d].contains(v)))
          replaced.emplace_back(v, out.values[it->second].name);
      }
      // Its results, and the parameters and state it updates.
      std::vector<const Value *> alsoRead = resultsOf(d);
      for (const ir::Update &u : apply_.graph().updates())
        if (holds(d, u.value))
          alsoRead.push_back(u.target);
      ModuleExtract extract(apply_, std::move(replaced));
      std::unique_ptr<ir::Module> m = extract.build(ops, alsoRead);
      for (const ir::Output &o : apply_.graph().outputs())
        if (holds(d, o.value))
          m->graph().addOutput(o.name, extract.lookup(o.value), o.isLoss,
                               o.loc);
      for (const ir::Update &u : apply_.graph().updates())
        if (holds(d, u.value))
          m->graph().addUpdate(extract.lookup(u.target),
                               extract.lookup(u.value), u.loc);
      if (failed(finish(*m, d, "update")))
        return failure();
      out.update.push_back(std::move(m));
    }
    return out;
  }

private:
  struct Place {
    // The devices that can compute the value from what they hold.
    llvm::SmallBitVector home;
    // A scalar summed over the stages, computed by every device that
    // needs it.
    bool global = false;
    // Computed from a global value (so not before the exchange).
    bool afterGlobal = false;
  };

  LogicalResult
  placeValues(const std::map<std::string, std::vector<int64_t>> &givers) {
    for (const auto &arg : apply_.graph().arguments()) {
      Place p{llvm::SmallBitVector(devices_, true)};
      if (llvm::StringRef(arg->name()).startswith(kMicroSumPrefix)) {
        auto it = givers.find(arg->name());
        p.home = llvm::SmallBitVector(devices_);
        if (it != givers.end())
          for (int64_t d : it->second)
            if (d >= 0 && d < devices_)
              p.home.set(static_cast<unsigned>(d));
        if (p.home.none()) {
          diag_.error("the pipeline's optimizer step: no stage gives '" +
                      arg->name() + "' (internal error)");
          return failure();
        }
      }
      places_[arg.get()] = std::move(p);
    }
    for (const auto &op : apply_.graph().ops()) {
      Place p{llvm::SmallBitVector(devices_, true)};
      bool readsGlobal = false;
      const Value *clash = nullptr;
      for (const Value *u : op->operands()) {
        const Place &q = place(u);
        p.afterGlobal |= q.afterGlobal;
        if (q.global) {
          readsGlobal = true;
          continue;
        }
        llvm::SmallBitVector both = p.home;
        both &= q.home;
        if (both.none() && !clash)
          clash = u;
        p.home = std::move(both);
      }
      if (op->type().rank() == 0 && (readsGlobal || p.home.none())) {
        p.global = true;
        p.afterGlobal = true;
        p.home.set();
      } else if (p.home.none()) {
        diag_.error(op->loc(),
                    "the pipeline's optimizer step: " + describeOp(*op) +
                        " reads tensors of different pipeline devices (its "
                        "operand from device " +
                        deviceList(place(clash).home) +
                        "): each device updates only its own stages' "
                        "parameters");
        return failure();
      }
      places_[op->result()] = std::move(p);
    }
    return success();
  }

  const Place &place(const Value *v) const { return places_.find(v)->second; }

  bool holds(unsigned d, const Value *v) const {
    const Place &p = place(v);
    return p.global || p.home.test(d);
  }
  // The values of the updates and outputs device `d` gives: those of the
  // tensors it holds, and the global ones.
  std::vector<const Value *> resultsOf(unsigned d) const {
    std::vector<const Value *> out;
    for (const ir::Update &u : apply_.graph().updates())
      if (holds(d, u.value))
        out.push_back(u.value);
    for (const ir::Output &o : apply_.graph().outputs())
      if (holds(d, o.value))
        out.push_back(o.value);
    return out;
  }

  unsigned ownerOf(const Value *v) const {
    return static_cast<unsigned>(place(v).home.find_first());
  }

  // Adds to `ops` what device `d` computes for `roots`, and to `imports`
  // the values of other devices a global op of it reads.
  LogicalResult collect(unsigned d, const std::vector<const Value *> &roots,
                        llvm::DenseSet<const Op *> &ops,
                        llvm::DenseSet<const Value *> &imports) {
    std::vector<const Value *> work(roots.begin(), roots.end());
    while (!work.empty()) {
      const Value *v = work.back();
      work.pop_back();
      const Op *op = v->definingOp();
      if (!op || !ops.insert(op).second)
        continue;
      bool global = place(v).global;
      for (const Value *u : op->operands()) {
        if (holds(d, u)) {
          work.push_back(u);
          continue;
        }
        // Only a global op reads another device's value.
        const Place &q = place(u);
        if (!global || q.afterGlobal) {
          diag_.error(op->loc(),
                      "the pipeline's optimizer step: " + describeOp(*op) +
                          " on pipeline device " + std::to_string(d) +
                          " needs a value of device " + deviceList(q.home) +
                          " made after the stages' sums: it would need "
                          "a second exchange between the devices");
          return failure();
        }
        imports.insert(u);
      }
    }
    return success();
  }

  // The values device `d`'s update program reads that its gather program
  // may have made: the operands of the ops it computes after the exchange,
  // and its results.
  llvm::DenseSet<const Value *>
  readByUpdate(unsigned d, const llvm::DenseSet<const Op *> &needed,
               const llvm::DenseSet<const Op *> &gathered) const {
    llvm::DenseSet<const Value *> out;
    for (const Op *op : needed)
      if (!gathered.contains(op))
        out.insert(op->operands().begin(), op->operands().end());
    for (const Value *v : resultsOf(d))
      out.insert(v);
    return out;
  }

  // Outputs by value index, so that every device's programs agree.
  static void sortOutputs(ir::Module &m) {
    auto index = [](const ir::Output &o) {
      return std::stoll(o.name.substr(std::string(kApplyValuePrefix).size()));
    };
    std::vector<ir::Output> &outs = m.graph().outputs();
    std::stable_sort(outs.begin(), outs.end(),
                     [&](const ir::Output &a, const ir::Output &b) {
                       return index(a) < index(b);
                     });
  }

  LogicalResult finish(ir::Module &m, unsigned d, const char *what) {
    m.attrs().set("pipeline.device", static_cast<int64_t>(d));
    m.attrs().set("pipeline.apply", std::string(what));
    if (succeeded(ir::verify(m, diag_)))
      return success();
    diag_.error("the pipeline's optimizer step: the " + std::string(what) +
                " program of pipeline device " + std::to_string(d) +
                " does not verify (internal error)");
    return failure();
  }

  const ir::Module &apply_;
  unsigned devices_;
  DiagnosticEngine &diag_;
  llvm::DenseMap<const Value *, Place> places_;
};

} // namespace

FailureOr<ApplySplit>
splitApply(const ir::Module &apply, int64_t devices,
           const std::map<std::string, std::vector<int64_t>> &givers,
           DiagnosticEngine &diag) {
  return Splitter(apply, devices, diag).run(givers);
}

} // namespace mgc::passes
