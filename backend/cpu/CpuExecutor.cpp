// The CPU executor: resolves every operand once (argument or arena offset),
// then each run binds the argument tensors and walks the steps.
#include "backend/cpu/CpuExecutor.h"

#include "backend/MemoryPlan.h"
#include "backend/PlanReport.h"
#include "backend/cpu/Elem.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <new>

namespace mgc::backend::cpu {

namespace {} // namespace

CpuExecutor::CpuExecutor(const Executable &exe, const CpuOptions &options,
                         unsigned threads)
    : exe_(exe), pool_(threads), comm_(options.comm),
      findNonFinite_(options.findNonFinite) {}

CpuExecutor::~CpuExecutor() {
  ::operator delete(arena_, std::align_val_t(kArenaAlignment));
}

std::unique_ptr<CpuExecutor> CpuExecutor::create(const Executable &exe,
                                                 const CpuOptions &options,
                                                 DiagnosticEngine &diag) {
  if (!exe.module) {
    diag.error("the executable has no module");
    return nullptr;
  }
  if (failed(checkExecutable(exe, exe.module->name(), diag)))
    return nullptr;
  unsigned threads = options.threads ? options.threads : hardwareThreads();
  std::unique_ptr<CpuExecutor> ex(new CpuExecutor(exe, options, threads));
  const ir::Graph &graph = exe.module->graph();
  for (const auto &arg : graph.arguments())
    ex->arguments_.push_back(arg.get());
  std::vector<const ir::Op *> ops;
  for (const auto &op : graph.ops()) {
    ex->offsetOf_[op->result()] = exe.plan.slots[ops.size()].offset;
    ops.push_back(op.get());
  }
  for (uint32_t i : exe.order) {
    const ir::Op *op = ops[i];
    const OpSlot &slot = exe.plan.slots[i];
    // Scratch must be at least what this backend's kernel needs: an
    // executable planned for another backend may have less.
    if (slot.scratchSize < scratchBytes(*op)) {
      diag.error(op->loc(), "the executable's plan gives " + op->name().str() +
                                " less scratch space than "
                                "the CPU kernel needs");
      return nullptr;
    }
    Step step{op,          kernelFor(op->kind()), {},
              slot.offset, slot.scratchOffset,    slot.scratchSize};
    if (!step.kernel) {
      diag.error(op->loc(), "no CPU kernel for op '" + op->name().str() + "'");
      return nullptr;
    }
    for (const ir::Value *v : op->operands())
      step.operands.push_back(ex->sourceOf(v));
    ex->steps_.push_back(std::move(step));
  }
  ex->foldTransposes();
  ex->placeUpdates();
  uint64_t bytes = std::max<uint64_t>(exe.plan.peak, kArenaAlignment);
  ex->arena_ = static_cast<std::byte *>(
      ::operator new(bytes, std::align_val_t(kArenaAlignment), std::nothrow));
  if (!ex->arena_) {
    // How much was asked for against what the machine has, and what to
    // change: the plan's peak follows the model's sizes.
    long pages = ::sysconf(_SC_PHYS_PAGES), pageSize = ::sysconf(_SC_PAGESIZE);
    std::string machine =
        pages > 0 && pageSize > 0
            ? " (this machine has " +
                  formatBytes(static_cast<uint64_t>(pages) *
                              static_cast<uint64_t>(pageSize)) +
                  ")"
            : std::string();
    diag.error("cannot allocate the " + formatBytes(bytes) +
               " of memory that model '" + exe.module->name() +
               "' needs at its peak" + machine +
               ": make its sizes (batch, context, width) smaller, or split it "
               "over a mesh");
    return nullptr;
  }
  return ex;
}

namespace {

LogicalResult skipped(const KernelArgs &) { return success(); }

bool isMatmul(const ir::Op &op) {
  return op.kind() == ir::OpKind::Matmul ||
         op.kind() == ir::OpKind::MatmulEpilogue;
}

// A transpose of a floating-point matrix, [N, K] -> [K, N].
bool transposesMatrix(const ir::Op &op) {
  const ir::Value *x = op.operand(0);
  return op.kind() == ir::OpKind::Transpose && x->type().rank() == 2 &&
         !ir::isInteger(x->type().dtype) &&
         op.attrs().getInts("perm") == std::vector<int64_t>{1, 0};
}

} // namespace

bool CpuExecutor::arenaKept(const Source &src, size_t from, size_t to) const {
  const uint64_t lo = src.offset, hi = src.offset + typeBytes(*src.type);
  auto overlaps = [&](uint64_t offset, uint64_t size) {
    return size > 0 && offset < hi && lo < offset + size;
  };
  for (size_t i = from; i <= to; ++i) {
    const Step &s = steps_[i];
    if (overlaps(s.offset, typeBytes(s.op->type())) ||
        overlaps(s.scratchOffset, s.scratchSize))
      return false;
  }
  return true;
}

void CpuExecutor::foldTransposes() {
  llvm::DenseMap<const ir::Value *, std::vector<std::pair<size_t, unsigned>>>
      uses;
  for (size_t i = 0; i < steps_.size(); ++i)
    for (unsigned j = 0; j < steps_[i].op->numOperands(); ++j)
      uses[steps_[i].op->operand(j)].push_back({i, j});
  llvm::DenseSet<const ir::Value *> kept;
  const ir::Graph &g = exe_.module->graph();
  for (const ir::Output &o : g.outputs())
    kept.insert(o.value);
  for (const ir::Update &u : g.updates())
    kept.insert(u.value);
  for (size_t index = 0; index < steps_.size(); ++index) {
    Step &t = steps_[index];
    const ir::Value *v = t.op->result();
    if (!transposesMatrix(*t.op) || kept.contains(v) ||
        kept.contains(t.op->operand(0)))
      continue;
    auto it = uses.find(v);
    if (it == uses.end() ||
        !llvm::all_of(it->second, [&](const auto &use) {
          // A transposed a: only with a matrix b (one GEMM of its rows).
          // The matrix turned must be there when the matmul runs: an
          // argument is; an op's result only if no step from the
          // transpose to the matmul writes over its bytes (the plan may
          // reuse them once the transpose has read them).
          const ir::Op &user = *steps_[use.first].op;
          return isMatmul(user) && use.second < 2 &&
                 user.operand(1)->type().rank() == 2 &&
                 (t.operands[0].argument >= 0 ||
                  arenaKept(t.operands[0], index, use.first));
        }))
      continue;
    for (const auto &[user, operand] : it->second) {
      steps_[user].operands[operand] = t.operands[0];
      steps_[user].transposed[operand] = !steps_[user].transposed[operand];
    }
    t.kernel = skipped;
  }
}

void CpuExecutor::placeUpdates() {
  const ir::Graph &g = exe_.module->graph();
  llvm::DenseMap<const ir::Value *, size_t> stepOf;
  for (size_t i = 0; i < steps_.size(); ++i)
    stepOf[steps_[i].op->result()] = i;
  llvm::DenseMap<const ir::Value *, unsigned> valueUses;
  for (const ir::Update &u : g.updates())
    ++valueUses[u.value];
  llvm::DenseSet<const ir::Value *> outputs;
  for (const ir::Output &o : g.outputs())
    outputs.insert(o.value);
  // The last step reading each argument (after foldTransposes redirected
  // matmuls to the matrices themselves).
  std::vector<size_t> lastRead(arguments_.size(), 0);
  for (size_t i = 0; i < steps_.size(); ++i)
    for (const Source &src : steps_[i].operands)
      if (src.argument >= 0)
        lastRead[src.argument] = i;
  for (const ir::Update &u : g.updates()) {
    auto producer = stepOf.find(u.value);
    if (producer == stepOf.end() || valueUses[u.value] != 1 ||
        outputs.contains(u.target) ||
        steps_[producer->second].op->kind() != ir::OpKind::Fused ||
        u.value->type() != u.target->type())
      continue;
    int a = static_cast<int>(llvm::find(arguments_, u.target) -
                             arguments_.begin());
    // No step after the producer may read the old value.
    if (lastRead[a] > producer->second)
      continue;
    steps_[producer->second].update = a;
    updateArgument_[u.value] = a;
  }
  // The readers of a marked value look for it where the run put it.
  for (Step &step : steps_)
    for (unsigned j = 0; j < step.op->numOperands(); ++j)
      if (step.operands[j].argument < 0)
        if (auto it = updateArgument_.find(step.op->operand(j));
            it != updateArgument_.end())
          step.operands[j].update = it->second;
}

CpuExecutor::Source CpuExecutor::sourceOf(const ir::Value *v) const {
  Source s;
  s.type = &v->type();
  if (v->isArgument()) {
    for (size_t i = 0; i < arguments_.size(); ++i)
      if (arguments_[i] == v)
        s.argument = static_cast<int>(i);
  } else {
    s.offset = offsetOf_.lookup(v);
    if (auto it = updateArgument_.find(v); it != updateArgument_.end())
      s.update = it->second;
  }
  return s;
}

TensorRef CpuExecutor::resolve(const Source &s,
                               llvm::ArrayRef<const runtime::Tensor *> args) {
  if (s.argument >= 0)
    // Kernels never write their operands; the cast only fits TensorRef.
    return {const_cast<std::byte *>(args[s.argument]->data()), s.type};
  if (s.update >= 0 && inPlace_[s.update])
    // An update's value in its target, which the caller lent for it.
    return {const_cast<std::byte *>(args[s.update]->data()), s.type};
  return {arena_ + s.offset, s.type};
}

namespace {
CpuExecutor::TensorRefs refsTo(const NamedTensors &tensors) {
  CpuExecutor::TensorRefs refs;
  for (const auto &[name, tensor] : tensors)
    refs.emplace(name, &tensor);
  return refs;
}
} // namespace

LogicalResult CpuExecutor::bindArguments(const NamedTensors &arguments,
                                         Bound &bound, DiagnosticEngine &diag,
                                         llvm::StringRef prefix) {
  return bindArguments(refsTo(arguments), bound, diag, prefix);
}

LogicalResult CpuExecutor::bindArguments(const TensorRefs &arguments,
                                         Bound &bound, DiagnosticEngine &diag,
                                         llvm::StringRef prefix) {
  unsigned before = diag.errorCount();
  {
    std::lock_guard<std::mutex> lock(nonFiniteMutex_);
    nonFinite_.reset();
  }
  bound.assign(arguments_.size(), nullptr);
  inPlace_.assign(arguments_.size(), 0);
  for (size_t i = 0; i < arguments_.size(); ++i) {
    const ir::Value &arg = *arguments_[i];
    auto it = arguments.find(arg.name());
    if (it == arguments.end()) {
      diag.error(prefix.str() + "missing tensor for " +
                 ir::valueKindWord(arg.kind()).str() + " '" + arg.name() + "'");
      continue;
    }
    if (it->second->type() != arg.type()) {
      diag.error(prefix.str() + "tensor '" + arg.name() + "' has type " +
                 it->second->type().str() + " but the model expects " +
                 arg.type().str());
      continue;
    }
    bound[i] = it->second;
  }
  for (const auto &[name, tensor] : arguments)
    if (!exe_.module->graph().findArgument(name))
      diag.error(prefix.str() + "tensor '" + name +
                 "' is not an input, parameter or state of the model");
  return diag.errorCount() == before ? success() : failure();
}

LogicalResult CpuExecutor::runStep(size_t index, const Bound &bound,
                                   ThreadPool &pool, std::string &error) {
  const Step &step = steps_[index];
  llvm::SmallVector<TensorRef, 4> operands;
  for (const Source &s : step.operands)
    operands.push_back(resolve(s, bound));
  std::string why;
  Source result;
  result.offset = step.offset;
  result.type = &step.op->type();
  result.update = step.update;
  KernelArgs args{*step.op,
                  operands,
                  resolve(result, bound),
                  arena_ + step.scratchOffset,
                  step.scratchSize,
                  pool,
                  &why,
                  comm_,
                  {step.transposed[0], step.transposed[1]}};
  if (succeeded(step.kernel(args))) {
    if (findNonFinite_ && step.kernel != skipped)
      checkFinite(index, args.out, operands);
    return success();
  }
  error = "op %" + std::to_string(index) + " (" + step.op->name().str() +
          "): " + why;
  return failure();
}

namespace {
// Whether every element of `t` is a finite number (integers always are).
bool allFinite(TensorRef t) {
  return visitDType(t.dtype(), [&]<typename S>() {
    if constexpr (kIsInt<S>) {
      return true;
    } else {
      const S *p = t.as<S>();
      for (int64_t i = 0, n = t.size(); i < n; ++i)
        if (!std::isfinite(Elem<S>::load(p[i])))
          return false;
      return true;
    }
  });
}
} // namespace

void CpuExecutor::checkFinite(size_t index, TensorRef result,
                              llvm::ArrayRef<TensorRef> operands) {
  const Step &step = steps_[index];
  // A constant is what the model says, an infinity used as a mask
  // included: not where a step went wrong.
  if (step.op->kind() == ir::OpKind::Constant || allFinite(result))
    return;
  std::lock_guard<std::mutex> lock(nonFiniteMutex_);
  if (nonFinite_ && nonFinite_->step <= index)
    return;
  NonFiniteOrigin origin;
  origin.step = index;
  origin.op = step.op;
  bool operandsFinite = true;
  for (size_t i = 0; i < operands.size(); ++i) {
    if (allFinite(operands[i]))
      continue;
    operandsFinite = false;
    if (step.operands[i].argument >= 0) {
      origin.argument = arguments_[step.operands[i].argument];
      break;
    }
  }
  origin.received = operandsFinite && step.op->info().has(ir::kCollective);
  nonFinite_ = origin;
}

std::optional<NonFiniteOrigin> CpuExecutor::firstNonFinite() const {
  std::lock_guard<std::mutex> lock(nonFiniteMutex_);
  return nonFinite_;
}

RunResult CpuExecutor::collectResults(const Bound &bound,
                                      const UpdateTargets *updateInto) {
  auto copyOut = [&](const ir::Value *v) {
    runtime::Tensor t = runtime::Tensor::uninitialized(v->type());
    TensorRef src = resolve(sourceOf(v), bound);
    if (t.nbytes())
      std::memcpy(t.data(), src.data, t.nbytes());
    return t;
  };
  RunResult result;
  const ir::Graph &graph = exe_.module->graph();
  for (const ir::Output &o : graph.outputs())
    result.outputs[o.name] = copyOut(o.value);
  // Every op has run: an argument an update targets is no longer read, so
  // its new value may overwrite it. An update whose value is an argument
  // itself is copied out first, before any argument is overwritten.
  auto target = [&](const ir::Update &u) -> runtime::Tensor * {
    if (!updateInto || sourceOf(u.value).argument >= 0)
      return nullptr;
    auto it = updateInto->find(u.target->name());
    return it != updateInto->end() && it->second->type() == u.value->type()
               ? it->second
               : nullptr;
  };
  for (const ir::Update &u : graph.updates())
    if (!target(u))
      result.updates[u.target->name()] = copyOut(u.value);
  for (const ir::Update &u : graph.updates()) {
    runtime::Tensor *into = target(u);
    const std::byte *src = into ? resolve(sourceOf(u.value), bound).data
                                : nullptr;
    if (into && into->nbytes() && src != into->data())
      std::memcpy(into->data(), src, into->nbytes());
  }
  return result;
}

void CpuExecutor::lendUpdateTargets(const Bound &bound,
                                    const UpdateTargets &updateInto) {
  // Updates placed in their targets: where the caller lent the argument
  // itself as the target.
  for (const auto &[value, a] : updateArgument_) {
    auto it = updateInto.find(arguments_[a]->name());
    inPlace_[a] = it != updateInto.end() && it->second == bound[a];
  }
}

FailureOr<RunResult> CpuExecutor::run(const NamedTensors &arguments,
                                      DiagnosticEngine &diag) {
  return run(refsTo(arguments), diag);
}

FailureOr<RunResult> CpuExecutor::run(const TensorRefs &arguments,
                                      DiagnosticEngine &diag,
                                      const UpdateTargets *updateInto) {
  Bound bound;
  if (failed(bindArguments(arguments, bound, diag)))
    return failure();
  if (updateInto)
    lendUpdateTargets(bound, *updateInto);
  std::string error;
  for (size_t i = 0; i < steps_.size(); ++i)
    if (failed(runStep(i, bound, pool_, error))) {
      diag.error(steps_[i].op->loc(), error);
      return failure();
    }
  return collectResults(bound, updateInto);
}

} // namespace mgc::backend::cpu
