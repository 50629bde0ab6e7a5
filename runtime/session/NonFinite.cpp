// Where a step's values first stopped being finite
// (SessionOptions::findNonFinite), in words the user can act on: the op,
// its source line, its device on a mesh, and whether it made the NaN or
// infinity itself or was handed one.
#include "runtime/session/SessionImpl.h"

#include "llvm/ADT/StringExtras.h"

namespace mgc::session {

namespace {

// The text of line `line` (1-based) of `source`, trimmed; "" if none.
std::string sourceLine(llvm::StringRef source, uint32_t line) {
  if (line == 0)
    return "";
  llvm::SmallVector<llvm::StringRef, 0> lines;
  source.split(lines, '\n');
  return line <= lines.size() ? lines[line - 1].trim().str() : "";
}

std::string describe(const Session::Impl &impl,
                     const backend::NonFiniteOrigin &origin, bool onMesh) {
  const ir::Op &op = *origin.op;
  std::string text =
      "the first value that is not finite is the result of " + op.name().str();
  // A fused op says what it computes, its instructions in IR terms.
  if (const ir::AttrValue *expr = op.attrs().find("expr"))
    if (const auto *s = std::get_if<std::string>(expr))
      text += " `" + *s + "`";
  if (op.loc().valid()) {
    text += " at " + op.loc().str();
    if (op.loc().fileName() == impl.sourceName) {
      std::string line = sourceLine(impl.sourceText, op.loc().line);
      if (!line.empty())
        text += " (`" + line + "`)";
    }
  }
  if (onMesh)
    text += " on device " + std::to_string(origin.device);
  if (origin.received)
    text += "; it was received from another device (this process's "
            "devices made none that is not finite)";
  else if (origin.argument)
    text += "; its operand '" + origin.argument->name() + "' (" +
            ir::valueKindWord(origin.argument->kind()).str() +
            ") was not finite already";
  else
    text += "; its operands are finite";
  return text;
}

} // namespace

FailureOr<std::string> describeNonFinite(Session::Impl &impl,
                                         DiagnosticEngine &diag) {
  std::optional<backend::NonFiniteOrigin> origin;
  bool severalDevices = false;
  if (impl.meshRunner) {
    origin = impl.meshRunner->firstNonFinite();
    severalDevices = impl.meshRunner->step().mesh.numDevices() > 1;
  } else if (impl.stepRunner) {
    origin = impl.stepRunner->firstNonFinite();
  }
  std::string mine = origin ? describe(impl, *origin, severalDevices) : "";
  if (!impl.meshRunner || !impl.processes || impl.processes->size() <= 1)
    return mine;
  // Each rank saw its own devices: the lowest rank that made a value that
  // is not finite (rather than received one) has the lowest such device,
  // as ranks hold the devices in blocks of increasing order.
  std::vector<std::string> all;
  std::string error;
  char kind = !origin ? '-' : origin->received ? 'R' : 'M';
  if (failed(impl.processes->allGather(kind + mine, all, error))) {
    diag.error("gathering where the step stopped being finite: " + error);
    return failure();
  }
  for (char wanted : {'M', 'R'})
    for (const std::string &rank : all)
      if (!rank.empty() && rank[0] == wanted)
        return rank.substr(1);
  return std::string();
}

} // namespace mgc::session
