// The interpreter's driver: checks the arguments, walks the ops in graph
// order, dispatches each to its evaluation function through a table indexed
// by OpKind, and frees every intermediate tensor after its last use.
#include "ir/Interpreter.h"

#include "ir/InterpreterKernels.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <array>
#include <cmath>

namespace mgc::ir {

namespace {

using interp::EvalContext;
using interp::EvalFn;

// One entry per row of OpKinds.def, in table order: adding an op there
// without an evaluation function here fails to build.
constexpr EvalFn kEvaluators[] = {
#define MGC_OP(Id, Name, Arity, Attrs, Rule, Traits, Summary) &interp::eval##Id,
#include "ir/OpKinds.def"
};
constexpr size_t kNumEvaluators = sizeof(kEvaluators) / sizeof(kEvaluators[0]);

// Tensors larger than this are refused rather than risking an allocation
// failure: the oracle is meant for small graphs (8 GiB of doubles).
constexpr int64_t kMaxElements = int64_t(1) << 30;

std::string kindWord(const Value &v) {
  switch (v.kind()) {
  case ValueKind::Param:
    return "parameter";
  case ValueKind::State:
    return "state";
  default:
    return "input";
  }
}

// Integer tensors are held as doubles: each value must be a whole number in
// the dtype's range (i64 limited to the doubles that are exact, |v| <= 2^53).
bool isValidInteger(double v, DType dtype) {
  if (!std::isfinite(v) || v != std::trunc(v))
    return false;
  if (dtype == DType::I32)
    return v >= -2147483648.0 && v <= 2147483647.0;
  return std::fabs(v) <= 9007199254740992.0;
}

LogicalResult checkArguments(const Graph &graph, const TensorMap &arguments,
                             DiagnosticEngine &diag) {
  unsigned before = diag.errorCount();
  for (const auto &arg : graph.arguments()) {
    auto declaredHere = [&] {
      if (arg->loc().valid())
        diag.note(arg->loc(), "'" + arg->name() + "' is declared here");
    };
    auto it = arguments.find(arg->name());
    if (it == arguments.end()) {
      diag.error("missing tensor for " + kindWord(*arg) + " '" + arg->name() +
                 "'");
      declaredHere();
      continue;
    }
    const HostTensor &t = it->second;
    if (t.type != arg->type()) {
      diag.error("tensor '" + arg->name() + "' has type " + t.type.str() +
                 " but the model expects " + arg->type().str());
      declaredHere();
      continue;
    }
    if (static_cast<int64_t>(t.data.size()) != t.type.size()) {
      diag.error("tensor '" + arg->name() + "' has " +
                 llvm::Twine(static_cast<uint64_t>(t.data.size())) +
                 " values but its type " + t.type.str() + " needs " +
                 llvm::Twine(t.type.size()));
      continue;
    }
    if (isInteger(t.type.dtype)) {
      for (size_t i = 0; i < t.data.size(); ++i)
        if (!isValidInteger(t.data[i], t.type.dtype)) {
          diag.error("tensor '" + arg->name() + "' holds " +
                     interp::formatNumber(t.data[i]) + " in element " +
                     llvm::Twine(static_cast<uint64_t>(i)) +
                     ", which is not an " + dtypeName(t.type.dtype) + " value");
          break;
        }
    }
  }
  for (const auto &[name, tensor] : arguments)
    if (!graph.findArgument(name))
      diag.error("tensor '" + name +
                 "' is not an input or parameter of the model");
  return diag.errorCount() == before ? success() : failure();
}

} // namespace

bool hasEvaluator(OpKind kind) {
  size_t i = static_cast<size_t>(kind);
  return i < kNumEvaluators && kEvaluators[i] != nullptr;
}

FailureOr<TensorMap> interpret(const Module &module, const TensorMap &arguments,
                               DiagnosticEngine &diag, TensorMap *updated) {
  const Graph &graph = module.graph();
  if (failed(checkArguments(graph, arguments, diag)))
    return failure();

  // Where each value lives: arguments are read in place, results are owned
  // by `results` (one slot per op, so the pointers stay stable).
  llvm::DenseMap<const Value *, const HostTensor *> env;
  for (const auto &arg : graph.arguments())
    env[arg.get()] = &arguments.find(arg->name())->second;

  // Index of the last op that reads each result; outputs are kept to the end.
  llvm::DenseMap<const Value *, size_t> lastUse;
  llvm::DenseMap<const Value *, size_t> slotOf;
  {
    size_t index = 0;
    for (const auto &op : graph.ops()) {
      for (const Value *v : op->operands())
        lastUse[v] = index;
      ++index;
    }
    for (const Output &o : graph.outputs())
      lastUse[o.value] = SIZE_MAX;
    for (const Update &u : graph.updates())
      lastUse[u.value] = SIZE_MAX;
  }

  std::vector<HostTensor> results(graph.numOps());
  size_t index = 0;
  for (const auto &opPtr : graph.ops()) {
    const Op &op = *opPtr;
    std::string what =
        "op %" + std::to_string(index) + " (" + op.name().str() + ")";
    size_t kindIndex = static_cast<size_t>(op.kind());
    if (kindIndex >= kNumEvaluators || !kEvaluators[kindIndex]) {
      diag.error(op.loc(), what + " has no evaluation function");
      return failure();
    }
    llvm::SmallVector<const HostTensor *, 3> operands;
    llvm::SmallVector<TensorType, 3> types;
    for (unsigned i = 0; i < op.numOperands(); ++i) {
      auto it = env.find(op.operand(i));
      if (it == env.end() || !it->second) {
        diag.error(op.loc(), what + " uses operand " + std::to_string(i) +
                                 " before it is defined");
        return failure();
      }
      operands.push_back(it->second);
      types.push_back(it->second->type);
    }
    // The evaluation functions trust shapes and attributes; re-checking here
    // keeps an unverified module from reading out of bounds.
    TypeOrError expected = inferResultType(op.kind(), types, op.attrs());
    if (!expected.ok()) {
      diag.error(op.loc(), what + ": " + expected.message());
      return failure();
    }
    if (expected.type() != op.type()) {
      diag.error(op.loc(), what + " declares result type " + op.type().str() +
                               " but its operands give " +
                               expected.type().str());
      return failure();
    }
    if (op.type().size() > kMaxElements) {
      diag.error(op.loc(), what + " result " + op.type().str() +
                               " is too large for the reference interpreter");
      return failure();
    }

    results[index] = HostTensor(op.type());
    EvalContext ctx{op, operands, results[index], diag};
    if (failed(kEvaluators[kindIndex](ctx)))
      return failure();
    env[op.result()] = &results[index];
    slotOf[op.result()] = index;
    if (!lastUse.count(op.result())) // never read: drop it now
      std::vector<double>().swap(results[index].data);

    for (const Value *v : op.operands()) {
      auto last = lastUse.find(v);
      auto slot = slotOf.find(v);
      if (last != lastUse.end() && last->second == index &&
          slot != slotOf.end()) {
        std::vector<double>().swap(results[slot->second].data);
        env[v] = nullptr;
      }
    }
    ++index;
  }

  TensorMap outputs;
  for (const Output &o : graph.outputs()) {
    auto it = env.find(o.value);
    if (it == env.end() || !it->second) {
      diag.error(o.loc, "output '" + o.name + "' is not a value of the graph");
      return failure();
    }
    outputs[o.name] = *it->second;
  }
  if (updated) {
    // Read everything first: all updates of a step see the values from
    // before it, even when one update's value is another's target.
    TensorMap next;
    for (const Update &u : graph.updates()) {
      auto it = env.find(u.value);
      if (!u.target || !u.target->isPersistent() || it == env.end() ||
          !it->second) {
        diag.error(u.loc, "update is not of a parameter or state to a value "
                          "of the graph");
        return failure();
      }
      if (it->second->type != u.target->type()) {
        diag.error(u.loc, "update of '" + u.target->name() + "' has type " +
                              it->second->type.str() + " but '" +
                              u.target->name() + "' is " +
                              u.target->type().str());
        return failure();
      }
      next[u.target->name()] = *it->second;
    }
    *updated = std::move(next);
  }
  return outputs;
}

void applyUpdates(TensorMap &arguments, const TensorMap &updated) {
  for (const auto &[name, tensor] : updated)
    arguments[name] = tensor;
}

namespace interp {

std::string EvalContext::describeOperand(unsigned i) const {
  const Value *v = op.operand(i);
  if (v->isArgument())
    return kindWord(*v) + " '" + v->name() + "'";
  const Op *def = v->definingOp();
  std::string s = "the result of " + (def ? def->name().str() : "an op");
  if (def && def->loc().valid())
    s += " at " + def->loc().str();
  return s;
}

LogicalResult EvalContext::error(const llvm::Twine &message) const {
  diag.error(op.loc(), message);
  return failure();
}

std::vector<int64_t> rowMajorStrides(llvm::ArrayRef<int64_t> shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    strides[d - 1] = strides[d] * shape[d];
  return strides;
}

void stridedGather(const double *in, int64_t base,
                   llvm::ArrayRef<int64_t> outShape,
                   llvm::ArrayRef<int64_t> inStrides, double *out) {
  int64_t total = numElements(outShape).value_or(0);
  if (total == 0)
    return;
  size_t rank = outShape.size();
  llvm::SmallVector<int64_t, 6> idx(rank, 0);
  int64_t offset = base;
  for (int64_t n = 0; n < total; ++n) {
    out[n] = in[offset];
    // Advance the multi-index like an odometer, keeping the offset in step.
    for (size_t d = rank; d-- > 0;) {
      offset += inStrides[d];
      if (++idx[d] < outShape[d])
        break;
      offset -= inStrides[d] * outShape[d];
      idx[d] = 0;
    }
  }
}

LogicalResult checkIds(EvalContext &ctx, unsigned operand, int64_t limit,
                       const char *what) {
  const std::vector<double> &ids = ctx.in(operand).data;
  for (size_t n = 0; n < ids.size(); ++n) {
    double v = ids[n];
    if (!(v >= 0 && v < static_cast<double>(limit)))
      return ctx.error(llvm::Twine(what) + " " + formatNumber(v) +
                       " is out of range [0, " + llvm::Twine(limit) +
                       ") in element " + llvm::Twine(static_cast<uint64_t>(n)) +
                       " of " + ctx.describeOperand(operand));
  }
  return success();
}

MeanRstd rowMeanRstd(const double *in, int64_t d, double eps, bool centered) {
  double mean = 0;
  for (int64_t j = 0; j < d && centered; ++j)
    mean += in[j];
  mean /= static_cast<double>(d);
  double var = 0;
  for (int64_t j = 0; j < d; ++j)
    var += (in[j] - mean) * (in[j] - mean);
  var /= static_cast<double>(d);
  return {mean, 1.0 / std::sqrt(var + eps)};
}

void fillAboveDiagonal(std::vector<double> &data, int64_t t, double value) {
  int64_t matrices = t == 0 ? 0 : static_cast<int64_t>(data.size()) / (t * t);
  for (int64_t mi = 0; mi < matrices; ++mi)
    for (int64_t r = 0; r < t; ++r)
      for (int64_t col = r + 1; col < t; ++col)
        data[(mi * t + r) * t + col] = value;
}

std::string formatNumber(double value) {
  if (std::isfinite(value) && value == std::trunc(value) &&
      std::fabs(value) < 1e18)
    return std::to_string(static_cast<int64_t>(value));
  return formatDouble(value);
}

} // namespace interp

} // namespace mgc::ir
