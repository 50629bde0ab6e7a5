// Building, checking, writing and reading executables. The file is text:
//   mgx 1
//   section module <bytes>\n<IR text>
//   section order <bytes>\n<op indices>
//   section plan <bytes>\n<peak> then one "<offset> <size> <scratch offset>
//   <scratch size>" line per op
//   checksum <16 hex digits of FNV-1a 64 over everything before this line>
#include "backend/Executable.h"

#include "ir/Printer.h"
#include "ir/TextParser.h"
#include "support/AtomicFile.h"
#include "support/InputFile.h"
#include "support/Random.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

#include <numeric>
#include <sstream>

namespace mgc::backend {

namespace {

std::string hex16(uint64_t v) {
  std::string s = llvm::utohexstr(v, /*LowerCase=*/true);
  return std::string(16 - s.size(), '0') + s;
}

// Reads "section NAME BYTES\n" then BYTES bytes from `rest`.
bool readSection(llvm::StringRef &rest, llvm::StringRef name,
                 llvm::StringRef &body, std::string &why) {
  auto [line, after] = rest.split('\n');
  llvm::SmallVector<llvm::StringRef, 3> words;
  line.split(words, ' ');
  uint64_t bytes = 0;
  if (words.size() != 3 || words[0] != "section" || words[1] != name ||
      words[2].getAsInteger(10, bytes)) {
    why = "expected section '" + name.str() + "'";
    return false;
  }
  if (after.size() < bytes) {
    why = "section '" + name.str() + "' is truncated";
    return false;
  }
  body = after.take_front(bytes);
  rest = after.drop_front(bytes);
  return true;
}

// Whitespace-separated unsigned integers.
bool parseNumbers(llvm::StringRef text, std::vector<uint64_t> &out) {
  std::istringstream in{text.str()};
  std::string word;
  while (in >> word) {
    uint64_t v = 0;
    if (llvm::StringRef(word).getAsInteger(10, v))
      return false;
    out.push_back(v);
  }
  return true;
}

} // namespace

std::unique_ptr<Executable> buildExecutable(std::unique_ptr<ir::Module> module,
                                            ScratchFn scratch) {
  auto exe = std::make_unique<Executable>();
  exe->order.resize(module->graph().numOps());
  std::iota(exe->order.begin(), exe->order.end(), 0u);
  exe->plan = planMemory(module->graph(), exe->order, scratch);
  exe->module = std::move(module);
  return exe;
}

std::string serializeExecutable(const Executable &exe) {
  std::string body = "mgx " + std::to_string(exe.formatVersion) + "\n";
  auto section = [&](llvm::StringRef name, const std::string &text) {
    body += "section " + name.str() + " " + std::to_string(text.size()) + "\n";
    body += text;
  };
  ir::PrintOptions options;
  options.locations = true; // errors at run time still point at the model
  section("module", ir::printModuleToString(*exe.module, options));
  std::string order;
  for (uint32_t i : exe.order)
    order += std::to_string(i) + "\n";
  section("order", order);
  std::string plan = std::to_string(exe.plan.peak) + "\n";
  for (const OpSlot &s : exe.plan.slots)
    plan += std::to_string(s.offset) + " " + std::to_string(s.size) + " " +
            std::to_string(s.scratchOffset) + " " +
            std::to_string(s.scratchSize) + "\n";
  section("plan", plan);
  uint64_t sum = hashName(body);
  return body + "checksum " + hex16(sum) + "\n";
}

std::unique_ptr<Executable> parseExecutable(llvm::StringRef fileName,
                                            llvm::StringRef contents,
                                            DiagnosticEngine &diag) {
  auto fail = [&](const llvm::Twine &why) -> std::unique_ptr<Executable> {
    diag.error("'" + fileName + "' is not a valid mgc executable: " + why);
    return nullptr;
  };
  if (!contents.startswith("mgx "))
    return fail("missing the 'mgx' header");
  // The checksum line comes last; everything before it is covered.
  size_t pos = contents.rfind("checksum ");
  if (pos == llvm::StringRef::npos || (pos > 0 && contents[pos - 1] != '\n'))
    return fail("missing checksum (the file is truncated)");
  llvm::StringRef body = contents.take_front(pos);
  llvm::StringRef sumText = contents.drop_front(pos + 9).rtrim("\n");
  uint64_t expected = 0;
  if (sumText.size() != 16 || sumText.getAsInteger(16, expected))
    return fail("malformed checksum line");
  if (hashName(body) != expected)
    return fail("checksum mismatch (the file is corrupted)");

  auto [header, rest] = body.split('\n');
  int version = 0;
  if (header.drop_front(4).getAsInteger(10, version))
    return fail("malformed header '" + header + "'");
  if (version != kExecutableFormatVersion)
    return fail("format version " + llvm::Twine(version) +
                " is not supported (this mgc reads version " +
                llvm::Twine(kExecutableFormatVersion) + ")");
  llvm::StringRef moduleText, orderText, planText;
  std::string why;
  if (!readSection(rest, "module", moduleText, why) ||
      !readSection(rest, "order", orderText, why) ||
      !readSection(rest, "plan", planText, why))
    return fail(why);
  if (!rest.empty())
    return fail("unexpected data after the plan section");

  auto exe = std::make_unique<Executable>();
  exe->formatVersion = version;
  exe->module =
      ir::parseModuleText((fileName + ":module").str(), moduleText, diag);
  if (!exe->module)
    return fail("its module does not parse");
  std::vector<uint64_t> order, plan;
  if (!parseNumbers(orderText, order))
    return fail("malformed order section");
  if (!parseNumbers(planText, plan) || plan.empty() ||
      (plan.size() - 1) % 4 != 0)
    return fail("malformed plan section");
  for (uint64_t v : order) {
    if (v > UINT32_MAX)
      return fail("op index out of range in the order section");
    exe->order.push_back(static_cast<uint32_t>(v));
  }
  exe->plan.peak = plan[0];
  for (size_t i = 1; i + 3 < plan.size(); i += 4)
    exe->plan.slots.push_back({plan[i], plan[i + 1], plan[i + 2], plan[i + 3]});
  if (failed(checkExecutable(*exe, fileName, diag)))
    return nullptr;
  return exe;
}

LogicalResult checkExecutable(const Executable &exe, llvm::StringRef what,
                              DiagnosticEngine &diag) {
  auto fail = [&](const llvm::Twine &why) {
    diag.error("'" + what + "' is not a valid mgc executable: " + why);
    return failure();
  };
  const ir::Graph &graph = exe.module->graph();
  size_t n = graph.numOps();
  if (exe.order.size() != n)
    return fail("the order lists " + llvm::Twine(exe.order.size()) +
                " ops but the module has " + llvm::Twine(n));
  if (exe.plan.slots.size() != n)
    return fail("the plan has " + llvm::Twine(exe.plan.slots.size()) +
                " slots but the module has " + llvm::Twine(n) + " ops");
  llvm::DenseMap<const ir::Value *, uint32_t> index;
  std::vector<const ir::Op *> ops;
  for (const auto &op : graph.ops()) {
    index[op->result()] = static_cast<uint32_t>(ops.size());
    ops.push_back(op.get());
  }
  std::vector<bool> done(n, false);
  for (uint32_t i : exe.order) {
    if (i >= n || done[i])
      return fail("the order is not a permutation of the ops");
    for (const ir::Value *v : ops[i]->operands()) {
      auto it = index.find(v);
      if (it != index.end() && !done[it->second])
        return fail("op " + llvm::Twine(i) + " runs before its operand");
    }
    done[i] = true;
  }
  for (size_t i = 0; i < n; ++i) {
    const OpSlot &s = exe.plan.slots[i];
    if (s.size != typeBytes(ops[i]->type()))
      return fail("the plan gives op " + llvm::Twine(i) + " " +
                  llvm::Twine(s.size) + " bytes but its type " +
                  ops[i]->type().str() + " needs " +
                  llvm::Twine(typeBytes(ops[i]->type())));
    if (s.offset > exe.plan.peak || s.size > exe.plan.peak - s.offset ||
        s.scratchOffset > exe.plan.peak ||
        s.scratchSize > exe.plan.peak - s.scratchOffset)
      return fail("op " + llvm::Twine(i) + "'s buffer lies outside the arena");
  }
  // A plan whose live buffers overlap would silently corrupt results: check
  // it against the liveness of the order.
  std::vector<BufferRequest> requests = resultBuffers(graph, exe.order);
  std::vector<uint32_t> waits = waitSteps(graph, exe.order);
  std::vector<uint64_t> offsets;
  for (const OpSlot &s : exe.plan.slots)
    offsets.push_back(s.offset);
  for (uint32_t i = 0; i < n; ++i)
    if (exe.plan.slots[i].scratchSize > 0) {
      requests.push_back(
          scratchBuffer(exe.plan.slots[i].scratchSize, i, requests, waits));
      offsets.push_back(exe.plan.slots[i].scratchOffset);
    }
  if (auto conflict = findConflict(requests, offsets))
    return fail("the plan overlaps two buffers that are live together");
  return success();
}

LogicalResult writeExecutableFile(const Executable &exe, llvm::StringRef path,
                                  DiagnosticEngine &diag) {
  std::string text = serializeExecutable(exe);
  if (llvm::Error err = writeFileAtomically(
          path, [&](FileSink &sink) { return sink.write(text); })) {
    diag.error(llvm::toString(std::move(err)));
    return failure();
  }
  return success();
}

std::unique_ptr<Executable> readExecutableFile(llvm::StringRef path,
                                               DiagnosticEngine &diag) {
  llvm::Expected<std::string> text =
      readInputFile(path, "executable", kMaxTextInputBytes);
  if (!text) {
    diag.error(llvm::toString(text.takeError()));
    return nullptr;
  }
  return parseExecutable(path, *text, diag);
}

} // namespace mgc::backend
