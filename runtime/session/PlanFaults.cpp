#include "runtime/session/PlanFaults.h"

#include "llvm/ADT/StringRef.h"

#include <cstdlib>

namespace mgc::session {

FailureOr<std::optional<PlanFault>> planFault(DiagnosticEngine &diag) {
  const char *value = std::getenv("MGC_PLAN_FAULT");
  if (!value || !*value)
    return std::optional<PlanFault>();
  llvm::StringRef text(value);
  if (text == "repeat-micro-batch")
    return std::optional<PlanFault>(
        PlanFault{PlanFault::Kind::RepeatMicroBatch});
  int64_t n = 0;
  if (text.consume_front("drop-all-reduce:") && !text.getAsInteger(10, n) &&
      n >= 1)
    return std::optional<PlanFault>(
        PlanFault{PlanFault::Kind::DropAllReduce, n});
  diag.error("MGC_PLAN_FAULT='" + std::string(value) +
             "': expected drop-all-reduce:N (N >= 1) or repeat-micro-batch");
  return failure();
}

void injectPlanFault(ir::Module &program, const PlanFault &fault) {
  if (fault.kind != PlanFault::Kind::DropAllReduce)
    return;
  int64_t seen = 0;
  for (const auto &op : program.graph().ops())
    if (op->kind() == ir::OpKind::AllReduce && ++seen == fault.index) {
      program.graph().replaceAllUsesWith(op->result(), op->operands()[0]);
      return;
    }
}

int64_t rowsOfMicroBatch(int64_t i, const std::optional<PlanFault> &fault) {
  return fault && fault->kind == PlanFault::Kind::RepeatMicroBatch && i == 1
             ? 0
             : i;
}

} // namespace mgc::session
