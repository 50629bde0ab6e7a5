// The partition plan report model: parameters and their shards, the
// communication ops with their phase, the value they move and the bytes
// each device sends, and the memory of every device. Computed once; the
// printers (PlanPrint.cpp, PlanJson.cpp) only format it.
#include "backend/PlanReport.h"

#include "backend/MemoryPlan.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <cstdio>

namespace mgc::backend {

llvm::StringRef planPhaseName(PlanPhase phase) {
  switch (phase) {
  case PlanPhase::Forward:
    return "forward";
  case PlanPhase::Backward:
    return "backward";
  case PlanPhase::Optimizer:
    return "optimizer";
  case PlanPhase::Step:
    return "step";
  }
  return "step";
}

uint64_t PlanComm::maxBytes() const {
  uint64_t m = 0;
  for (uint64_t b : bytesByDevice)
    m = std::max(m, b);
  return m;
}

size_t PlanReport::numCollectives() const {
  return llvm::count_if(comms, [](const PlanComm &c) { return c.collective; });
}

uint64_t PlanReport::maxCommBytesPerDevice() const {
  uint64_t m = 0;
  for (const PlanDeviceMemory &d : devices)
    m = std::max(m, d.commBytes);
  return m;
}

uint64_t PlanReport::maxTotalBytes() const {
  uint64_t m = 0;
  for (const PlanDeviceMemory &d : devices)
    m = std::max(m, d.total());
  return m;
}

uint64_t commBytes(ir::OpKind kind, int64_t n, uint64_t operandBytes,
                   uint64_t resultBytes) {
  if (n <= 1)
    return 0;
  // 128-bit products: a large tensor times 2(n-1) must not wrap.
  using U = unsigned __int128;
  U k = static_cast<U>(n - 1);
  U bytes = 0;
  switch (kind) {
  case ir::OpKind::AllReduce:
  case ir::OpKind::AllReduceMax:
    bytes = 2 * k * operandBytes / static_cast<U>(n);
    break;
  case ir::OpKind::ReduceScatter:
  case ir::OpKind::AllToAll:
    bytes = k * operandBytes / static_cast<U>(n);
    break;
  case ir::OpKind::AllGather:
    bytes = k * resultBytes / static_cast<U>(n);
    break;
  default:
    return 0;
  }
  return static_cast<uint64_t>(bytes);
}

std::string formatBytes(uint64_t bytes) {
  if (bytes < 1024)
    return std::to_string(bytes) + " B";
  static const char *units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes) / 1024.0;
  size_t u = 0;
  // Move up a unit when the value would print as 1024.0 or more.
  while (v >= 1023.95 && u + 1 < std::size(units)) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

std::string formatDeviceList(llvm::ArrayRef<int64_t> devices) {
  std::string s;
  for (size_t i = 0; i < devices.size();) {
    size_t j = i;
    while (j + 1 < devices.size() && devices[j + 1] == devices[j] + 1)
      ++j;
    s += (s.empty() ? "" : ",") + std::to_string(devices[i]);
    if (j > i)
      s += (j == i + 1 ? "," : "-") + std::to_string(devices[j]);
    i = j + 1;
  }
  return s;
}

namespace {

bool isCommOp(const ir::Op &op) {
  return op.info().has(ir::kCollective) || op.kind() == ir::OpKind::LocalSplit;
}

// Attribute readers that tolerate a module the verifier has not seen.
int64_t intAttr(const ir::Op &op, llvm::StringRef name, int64_t dflt) {
  if (const ir::AttrValue *v = op.attrs().find(name))
    if (const int64_t *i = std::get_if<int64_t>(v))
      return *i;
  return dflt;
}

std::string stringAttr(const ir::Op &op, llvm::StringRef name) {
  if (const ir::AttrValue *v = op.attrs().find(name))
    if (const std::string *s = std::get_if<std::string>(v))
      return *s;
  return {};
}

// The placement change a communication op makes by its definition.
std::pair<ir::Placement, ir::Placement> definedChange(const ir::Op &op) {
  using ir::Placement;
  switch (op.kind()) {
  case ir::OpKind::AllReduce:
    return {Placement::partial(), Placement::replicate()};
  case ir::OpKind::AllReduceMax:
    return {Placement::partialMax(), Placement::replicate()};
  case ir::OpKind::ReduceScatter:
    return {Placement::partial(), Placement::split(intAttr(op, "dim", 0))};
  case ir::OpKind::AllGather:
    return {Placement::split(intAttr(op, "dim", 0)), Placement::replicate()};
  case ir::OpKind::AllToAll:
    return {Placement::split(intAttr(op, "from", 0)),
            Placement::split(intAttr(op, "to", 0))};
  default: // local_split
    return {Placement::replicate(), Placement::split(intAttr(op, "dim", 0))};
  }
}

std::string argumentWord(ir::ValueKind kind) {
  switch (kind) {
  case ir::ValueKind::Input:
    return "input";
  case ir::ValueKind::Param:
    return "param";
  case ir::ValueKind::State:
    return "state";
  case ir::ValueKind::Result:
    break;
  }
  return "value";
}

// Facts about the sharded module that several parts of the report use.
class ModuleFacts {
public:
  explicit ModuleFacts(const ir::Graph &g) : g_(g) {
    size_t i = 0;
    for (const auto &op : g.ops())
      index_[op.get()] = i++;
    for (const auto &op : g.ops())
      for (const ir::Value *v : op->operands())
        if (v)
          users_[v].push_back(op.get());
    for (const ir::Update &u : g.updates())
      if (u.target && u.value && u.target->kind() == ir::ValueKind::Param)
        paramUpdatedBy_[u.value].push_back(u.target);
    for (const ir::Output &o : g.outputs()) {
      llvm::StringRef name(o.name);
      if (o.value && name.consume_front("grad.")) {
        const ir::Value *p = g.findArgument(name);
        if (p && p->kind() == ir::ValueKind::Param)
          gradOutputOf_[o.value] = p->name();
      }
    }
    computePhases();
  }

  size_t indexOf(const ir::Op *op) const { return index_.lookup(op); }
  PlanPhase phaseOf(const ir::Op *op) const {
    auto it = phase_.find(op);
    return it == phase_.end() ? PlanPhase::Step : it->second;
  }

  // The value a communication op moves, looking through the communication
  // ops before it.
  const ir::Value *origin(const ir::Value *v) const {
    while (v && v->definingOp() && isCommOp(*v->definingOp()) &&
           v->definingOp()->numOperands() > 0)
      v = v->definingOp()->operand(0);
    return v;
  }

  std::string describe(const ir::Value *v) const {
    if (!v)
      return "?";
    if (v->isArgument())
      return argumentWord(v->kind()) + " " + v->name();
    const ir::Op *op = v->definingOp();
    return op->name().str() + " %" + std::to_string(indexOf(op));
  }

  // The parameter whose new value `v` is, following a chain of
  // communication ops that are its only use.
  std::string updateOf(const ir::Value *v) const {
    for (unsigned hops = 0; v && hops < 16; ++hops) {
      auto it = paramUpdatedBy_.find(v);
      if (it != paramUpdatedBy_.end() && it->second.size() == 1)
        return it->second.front()->name();
      auto u = users_.find(v);
      if (u == users_.end() || u->second.size() != 1 ||
          !isCommOp(*u->second.front()))
        return {};
      v = u->second.front()->result();
    }
    return {};
  }

  // The parameters whose gradients the communication op `op` moves. One
  // gradient: an output `grad.P` names it, or else it is inferred as the
  // parameter of the same logical type whose update is the nearest in the
  // data flow (a gradient feeds its own parameter's update in a few ops;
  // others only through the gradient norm or not at all). A bucket (the
  // result cut back into gradients by slices and reshapes): the gradient
  // of each piece. Empty when no parameter can be told for certain.
  std::vector<std::string> gradientsOf(const ir::Op &op) const {
    const ir::Value *operand = op.numOperands() ? op.operand(0) : nullptr;
    for (const ir::Value *v : {op.result(), operand, origin(operand)}) {
      auto it = gradOutputOf_.find(v);
      if (v && it != gradOutputOf_.end())
        return {it->second};
    }
    auto u = users_.find(op.result());
    if (u != users_.end() && u->second.size() > 1 &&
        llvm::all_of(u->second, [](const ir::Op *user) {
          return user->kind() == ir::OpKind::Slice;
        })) {
      std::vector<std::string> names;
      for (const ir::Op *slice : u->second) {
        // The piece back in its gradient's shape: a reshape, and a
        // transpose for a gradient split on another axis than its first.
        const ir::Value *piece = slice->result();
        for (ir::OpKind kind : {ir::OpKind::Reshape, ir::OpKind::Transpose}) {
          auto r = users_.find(piece);
          if (r != users_.end() && r->second.size() == 1 &&
              r->second.front()->kind() == kind)
            piece = r->second.front()->result();
        }
        std::string name = nearestParamUpdate(piece);
        if (name.empty())
          return {};
        names.push_back(std::move(name));
      }
      return names;
    }
    std::string name = nearestParamUpdate(op.result());
    if (name.empty())
      return {};
    return {name};
  }

private:
  // The parameter of v's type whose update v reaches in the fewest ops;
  // empty when none does or two are equally near.
  std::string nearestParamUpdate(const ir::Value *start) const {
    const ir::TensorType &type = start->type();
    llvm::DenseSet<const ir::Value *> seen{start};
    std::vector<const ir::Value *> level{start};
    while (!level.empty()) {
      llvm::SmallVector<std::string, 2> found;
      for (const ir::Value *v : level) {
        auto it = paramUpdatedBy_.find(v);
        if (it == paramUpdatedBy_.end())
          continue;
        for (const ir::Value *p : it->second)
          if (p->type() == type && !llvm::is_contained(found, p->name()))
            found.push_back(p->name());
      }
      if (!found.empty())
        return found.size() == 1 ? found.front() : std::string();
      std::vector<const ir::Value *> next;
      for (const ir::Value *v : level) {
        auto u = users_.find(v);
        if (u == users_.end())
          continue;
        for (const ir::Op *user : u->second) {
          const ir::Value *to = user->result();
          if (user->kind() == ir::OpKind::Concat)
            if (const ir::Value *piece = pieceAfterBucket(v, *user))
              to = piece;
          if (seen.insert(to).second)
            next.push_back(to);
        }
      }
      level = std::move(next);
    }
    return {};
  }

  // A bucket joins values with `concat`, communicates the whole and cuts
  // it back with `slice`s. Followed naively, every member would reach
  // every other member's parameter, so the search jumps from the member
  // `v` straight to its own slice: the one at v's offset in the concat,
  // after the chain of communication ops. Null when there is none.
  const ir::Value *pieceAfterBucket(const ir::Value *v,
                                    const ir::Op &concat) const {
    int64_t axis = intAttr(concat, "axis", 0);
    if (axis < 0 || axis >= v->type().rank() ||
        llvm::count(concat.operands(), v) != 1)
      return nullptr;
    int64_t offset = 0;
    for (const ir::Value *operand : concat.operands()) {
      if (operand == v)
        break;
      if (!operand || axis >= operand->type().rank())
        return nullptr;
      offset += operand->type().shape[axis];
    }
    int64_t end = offset + v->type().shape[axis];
    const ir::Value *whole = concat.result();
    for (unsigned hops = 0; hops < 16; ++hops) {
      auto u = users_.find(whole);
      if (u == users_.end() || u->second.size() != 1 ||
          !isCommOp(*u->second.front()))
        break;
      whole = u->second.front()->result();
    }
    auto u = users_.find(whole);
    if (u == users_.end() || whole == concat.result())
      return nullptr;
    for (const ir::Op *user : u->second)
      if (user->kind() == ir::OpKind::Slice &&
          intAttr(*user, "axis", -1) == axis &&
          intAttr(*user, "start", -1) == offset &&
          intAttr(*user, "end", -1) == end)
        return user->result();
    return nullptr;
  }

  // Forward: the loss depends on the op. Optimizer: the op depends on a
  // state argument, or comes after the first op that does (the optimizer
  // pass appends the update after the backward, so a local split of a
  // parameter just before its update counts as optimizer). Backward: the
  // rest. Without a loss: Step.
  void computePhases() {
    const ir::Output *loss = g_.lossOutput();
    if (!loss || !loss->value)
      return;
    llvm::DenseSet<const ir::Value *> needed{loss->value};
    for (auto it = g_.ops().rbegin(); it != g_.ops().rend(); ++it)
      if (needed.count((*it)->result()))
        for (const ir::Value *v : (*it)->operands())
          needed.insert(v);
    llvm::DenseSet<const ir::Value *> fromState;
    bool optimizerStarted = false;
    for (const auto &op : g_.ops()) {
      bool depends = llvm::any_of(op->operands(), [&](const ir::Value *v) {
        return v && (v->kind() == ir::ValueKind::State || fromState.count(v));
      });
      if (depends)
        fromState.insert(op->result());
      bool forward = needed.count(op->result()) != 0;
      optimizerStarted |= depends && !forward;
      phase_[op.get()] = forward            ? PlanPhase::Forward
                         : optimizerStarted ? PlanPhase::Optimizer
                                            : PlanPhase::Backward;
    }
  }

  const ir::Graph &g_;
  llvm::DenseMap<const ir::Op *, size_t> index_;
  llvm::DenseMap<const ir::Value *, llvm::SmallVector<const ir::Op *, 2>>
      users_;
  llvm::DenseMap<const ir::Value *, llvm::SmallVector<const ir::Value *, 1>>
      paramUpdatedBy_;
  llvm::DenseMap<const ir::Value *, std::string> gradOutputOf_;
  llvm::DenseMap<const ir::Op *, PlanPhase> phase_;
};

// The local types of one logical value on every device, as ir::localType
// gives them, with the part sizes computed once per axis rather than once
// per device (a mesh may have thousands of devices).
class LocalShapes {
public:
  LocalShapes(const ir::TensorType &logical, const ir::Sharding &sharding,
              const ir::Mesh &mesh)
      : logical_(logical) {
    for (const ir::Sharding::Entry &e : sharding.entries()) {
      int axis = mesh.axisIndex(e.axis);
      int64_t dim = e.placement.dim;
      if (e.placement.isSplit() && axis >= 0 && dim >= 0 &&
          dim < logical.rank())
        splits_.push_back(
            {axis, dim, ir::splitSizes(logical.shape[dim], mesh.axes()[axis])});
    }
  }
  ir::TensorType at(llvm::ArrayRef<int64_t> coords) const {
    ir::TensorType t = logical_;
    for (const Split &s : splits_)
      t.shape[s.dim] = s.sizes[coords[s.axis]];
    return t;
  }

private:
  struct Split {
    int axis;
    int64_t dim;
    std::vector<int64_t> sizes;
  };
  ir::TensorType logical_;
  std::vector<Split> splits_;
};

// Per-device rows are computed for at most this many devices, so that a
// mesh made in code beyond ir::kMaxMeshDevices (Mesh::parse refuses one)
// cannot exhaust memory.
constexpr int64_t kMaxReportedDevices = 65536;

int64_t reportedDevices(const PlanReport &r) {
  return std::min(r.mesh.numDevices(), kMaxReportedDevices);
}

// The mesh: the module's `mesh` attribute, else the programs' mesh.
ir::Mesh chooseMesh(const ir::Module &sharded,
                    const passes::DevicePrograms &programs,
                    std::vector<std::string> &notes) {
  const ir::AttrValue *attr = sharded.attrs().find(ir::kMeshAttr);
  const std::string *text = attr ? std::get_if<std::string>(attr) : nullptr;
  if (!text)
    return programs.mesh;
  std::string error;
  std::optional<ir::Mesh> mesh = ir::Mesh::parse(*text, error);
  if (!mesh) {
    notes.push_back("the module's mesh \"" + *text + "\" is not valid (" +
                    error + "); using the programs' mesh " +
                    programs.mesh.str());
    return programs.mesh;
  }
  if (!programs.programs.empty() && !(*mesh == programs.mesh))
    notes.push_back("the module's mesh " + mesh->str() +
                    " differs from the programs' mesh " + programs.mesh.str());
  return *mesh;
}

// The program of `device`, or null when there is none.
const ir::Module *programOf(const passes::DevicePrograms &programs,
                            int64_t device, size_t *index = nullptr) {
  if (device < 0 || static_cast<size_t>(device) >= programs.programOf.size())
    return nullptr;
  size_t p = programs.programOf[device];
  if (p >= programs.programs.size() || !programs.programs[p])
    return nullptr;
  if (index)
    *index = p;
  return programs.programs[p].get();
}

void addParams(PlanReport &r, const ir::Module &sharded,
               const passes::DevicePrograms &programs) {
  int64_t n = reportedDevices(r);
  for (const ir::Value *p : sharded.graph().params()) {
    PlanParam param;
    param.name = p->name();
    param.logical = p->type();
    param.sharding = p->sharding();
    LocalShapes fromPlacement(p->type(), p->sharding(), r.mesh);
    // The parameter in each program, looked up once per program.
    std::vector<const ir::Value *> inProgram(programs.programs.size());
    for (size_t k = 0; k < programs.programs.size(); ++k)
      if (programs.programs[k])
        if (const ir::Value *arg =
                programs.programs[k]->graph().findArgument(p->name()))
          if (arg->kind() == ir::ValueKind::Param)
            inProgram[k] = arg;
    std::vector<int64_t> missing;
    for (int64_t d = 0; d < n; ++d) {
      // The program's local type; the placement's where there is none.
      ir::TensorType local = fromPlacement.at(r.mesh.coords(d));
      size_t k = 0;
      if (programOf(programs, d, &k)) {
        if (inProgram[k])
          local = inProgram[k]->type();
        else
          missing.push_back(d);
      }
      auto it = llvm::find(param.shards, local);
      param.shardOfDevice.push_back(it - param.shards.begin());
      if (it == param.shards.end())
        param.shards.push_back(local);
    }
    if (!missing.empty())
      r.notes.push_back("the program of device" +
                        std::string(missing.size() > 1 ? "s " : " ") +
                        formatDeviceList(missing) + " has no parameter " +
                        p->name());
    r.params.push_back(std::move(param));
  }
}

void addComms(PlanReport &r, const ir::Module &sharded) {
  const ir::Graph &g = sharded.graph();
  ModuleFacts facts(g);
  int64_t n = reportedDevices(r);
  for (const auto &opPtr : g.ops()) {
    const ir::Op &op = *opPtr;
    if (!isCommOp(op) || op.numOperands() != 1 || !op.operand(0))
      continue;
    PlanComm c;
    c.opIndex = facts.indexOf(&op);
    c.kind = op.kind();
    c.axis = stringAttr(op, "axis");
    c.collective = op.info().has(ir::kCollective);
    c.scope = op.scope();
    c.phase = facts.phaseOf(&op);
    c.logical = op.type();
    const ir::Value *operand = op.operand(0);
    const ir::Value *moved = facts.origin(operand);
    c.producer = facts.describe(moved);
    if (moved && moved->definingOp())
      c.producerScope = moved->definingOp()->scope();
    std::string where = op.name().str() + " %" + std::to_string(c.opIndex);

    // The placement change on the axis: what the values say, checked
    // against what the op does.
    auto [from, to] = definedChange(op);
    c.from = from;
    c.to = to;
    if (const ir::Placement *p = operand->sharding().find(c.axis))
      c.from = *p;
    if (const ir::Placement *p = op.result()->sharding().find(c.axis))
      c.to = *p;
    if (c.from != from || c.to != to)
      r.notes.push_back(where + " changes " + c.from.str() + " -> " +
                        c.to.str() + " on " + c.axis + " but the op does " +
                        from.str() + " -> " + to.str());

    const ir::MeshAxis *axis = r.mesh.findAxis(c.axis);
    if (!axis)
      r.notes.push_back(where + " is on axis '" + c.axis +
                        "', which the mesh " + r.mesh.str() + " does not have");
    c.groupSize = axis ? axis->size : 1;
    // A collective over one device moves nothing: counted, not listed.
    if (axis && axis->size == 1 && c.collective) {
      ++r.oneDeviceCollectives;
      continue;
    }

    c.updateOf = facts.updateOf(op.result());
    if (c.updateOf.empty() && c.phase != PlanPhase::Forward && c.collective)
      c.gradientsOf = facts.gradientsOf(op);

    LocalShapes inShapes(operand->type(), operand->sharding(), r.mesh);
    LocalShapes outShapes(op.type(), op.result()->sharding(), r.mesh);
    for (int64_t d = 0; d < n; ++d) {
      llvm::SmallVector<int64_t, 4> coords = r.mesh.coords(d);
      uint64_t in = typeBytes(inShapes.at(coords));
      uint64_t out = typeBytes(outShapes.at(coords));
      c.bytesByDevice.push_back(commBytes(op.kind(), c.groupSize, in, out));
    }
    r.comms.push_back(std::move(c));
  }
}

void addDevices(PlanReport &r, const passes::DevicePrograms &programs,
                llvm::ArrayRef<const Executable *> exes) {
  // The argument bytes of each program, counted once.
  std::vector<PlanDeviceMemory> ofProgram(programs.programs.size());
  for (size_t k = 0; k < programs.programs.size(); ++k) {
    if (!programs.programs[k])
      continue;
    PlanDeviceMemory &m = ofProgram[k];
    m.program = k;
    for (const auto &arg : programs.programs[k]->graph().arguments()) {
      uint64_t b = typeBytes(arg->type());
      if (arg->kind() == ir::ValueKind::Param)
        m.paramBytes += b;
      else if (arg->kind() == ir::ValueKind::State)
        m.stateBytes += b;
      else
        m.inputBytes += b;
    }
    if (k < exes.size() && exes[k])
      m.arenaPeak = exes[k]->plan.peak;
  }
  std::vector<int64_t> without;
  int64_t n = reportedDevices(r);
  for (int64_t d = 0; d < n; ++d) {
    PlanDeviceMemory m;
    size_t k = 0;
    if (programOf(programs, d, &k))
      m = ofProgram[k];
    else
      without.push_back(d);
    m.device = d;
    for (const PlanComm &c : r.comms)
      if (static_cast<size_t>(d) < c.bytesByDevice.size())
        m.commBytes += c.bytesByDevice[d];
    r.devices.push_back(m);
  }
  if (!without.empty())
    r.notes.push_back(std::string(without.size() > 1 ? "devices " : "device ") +
                      formatDeviceList(without) +
                      (without.size() > 1 ? " have" : " has") +
                      " no program: their memory is not known");
  if (exes.size() != programs.programs.size())
    r.notes.push_back(std::to_string(exes.size()) + " executables for " +
                      std::to_string(programs.programs.size()) +
                      " programs: arena peaks are shown where known");
}

} // namespace

PlanReport
buildPlanReport(const ir::Module &sharded,
                const passes::DevicePrograms &programs,
                llvm::ArrayRef<const Executable *> executableOfProgram) {
  PlanReport r;
  r.moduleName = sharded.name();
  r.mesh = chooseMesh(sharded, programs, r.notes);
  r.numPrograms = programs.programs.size();
  int64_t n = r.mesh.numDevices();
  if (n > kMaxReportedDevices)
    r.notes.push_back("the mesh has " + std::to_string(n) +
                      " devices; per-device numbers cover the first " +
                      std::to_string(kMaxReportedDevices));
  if (static_cast<int64_t>(programs.programOf.size()) != n)
    r.notes.push_back("the mesh " + r.mesh.str() + " has " + std::to_string(n) +
                      " devices but " +
                      std::to_string(programs.programOf.size()) +
                      " have a program");
  addParams(r, sharded, programs);
  addComms(r, sharded);
  addDevices(r, programs, executableOfProgram);
  return r;
}

} // namespace mgc::backend
