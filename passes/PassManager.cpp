#include "passes/PassManager.h"

#include "ir/Printer.h"
#include "ir/Verifier.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"

#include <chrono>
#include <optional>

namespace mgc::passes {

namespace {

std::string knownPassList() {
  std::string s;
  for (const PassInfo &info : registeredPasses()) {
    if (!s.empty())
      s += ", ";
    s += info.name.str();
  }
  return s;
}

const PassInfo *lookupPass(llvm::StringRef name) {
  for (const PassInfo &info : registeredPasses())
    if (info.name == name)
      return &info;
  return nullptr;
}

// Splits a comma-separated list, trimming spaces around each element.
llvm::SmallVector<llvm::StringRef, 8> splitList(llvm::StringRef text) {
  llvm::SmallVector<llvm::StringRef, 8> parts;
  text.split(parts, ',', /*MaxSplit=*/-1, /*KeepEmpty=*/true);
  for (llvm::StringRef &p : parts)
    p = p.trim();
  return parts;
}

// Whether `passName` is selected by a --print-ir-before/after list. Each
// entry may itself be a comma-separated list ("cse,dce").
bool selects(const std::vector<std::string> &list, llvm::StringRef passName) {
  for (const std::string &entry : list)
    for (llvm::StringRef name : splitList(entry))
      if (name == "all" || name == passName)
        return true;
  return false;
}

} // namespace

PassManager::PassManager(PassManagerOptions options,
                         llvm::raw_ostream &dumpStream)
    : options_(std::move(options)), dumpStream_(dumpStream) {}

PassManager::~PassManager() = default;

LogicalResult PassManager::parsePipeline(llvm::StringRef pipeline,
                                         DiagnosticEngine &diag) {
  if (pipeline.trim().empty())
    return success();
  // Resolve every name before adding any, so that a bad pipeline leaves the
  // manager unchanged.
  std::vector<const PassInfo *> resolved;
  bool ok = true;
  for (llvm::StringRef name : splitList(pipeline)) {
    if (name.empty()) {
      diag.error("empty pass name in --passes '" + pipeline +
                 "'; separate pass names with single commas");
      ok = false;
      continue;
    }
    const PassInfo *info = lookupPass(name);
    if (!info) {
      diag.error("unknown pass '" + name +
                 "' in --passes; known passes: " + knownPassList());
      ok = false;
      continue;
    }
    resolved.push_back(info);
  }
  if (!ok)
    return failure();
  for (const PassInfo *info : resolved)
    addPass(info->create());
  return success();
}

void PassManager::addPass(std::unique_ptr<Pass> pass) {
  if (pass)
    passes_.push_back(std::move(pass));
}

LogicalResult PassManager::checkOptions(DiagnosticEngine &diag) const {
  bool ok = true;
  auto check = [&](const std::vector<std::string> &list, const char *flag) {
    for (const std::string &entry : list) {
      for (llvm::StringRef name : splitList(entry)) {
        if (name == "all" || lookupPass(name))
          continue;
        bool added = llvm::any_of(
            passes_, [&](const auto &p) { return p->name() == name; });
        if (added)
          continue;
        if (name.empty())
          diag.error(llvm::Twine("empty pass name in ") + flag + "='" + entry +
                     "'");
        else
          diag.error("unknown pass '" + name + "' in " + flag +
                     "; known passes: " + knownPassList() + " (or all)");
        ok = false;
      }
    }
  };
  check(options_.printIRBefore, "--print-ir-before");
  check(options_.printIRAfter, "--print-ir-after");
  return ok ? success() : failure();
}

LogicalResult PassManager::run(ir::Module &module, DiagnosticEngine &diag) {
  ir::PrintOptions printOptions;
  printOptions.locations = options_.printLocations;

  auto dumpIR = [&](llvm::StringRef when, llvm::StringRef passName) {
    dumpStream_ << "// -----// IR Dump " << when << " " << passName
                << " //----- //\n";
    ir::printModule(module, dumpStream_, printOptions);
    dumpStream_ << "\n";
    dumpStream_.flush();
  };

  // Writes DIR/NN-<what>.mgir; reports and fails if the file cannot be
  // written.
  unsigned dumpIndex = 0;
  auto writeDump = [&](llvm::StringRef what) -> LogicalResult {
    llvm::SmallString<256> path(options_.dumpDir);
    unsigned n = dumpIndex++;
    std::string fileName =
        (n < 10 ? "0" : "") + std::to_string(n) + "-" + what.str() + ".mgir";
    llvm::sys::path::append(path, fileName);
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_Text);
    if (!ec) {
      ir::printModule(module, os, printOptions);
      os.close();
      ec = os.error();
      os.clear_error();
    }
    if (ec) {
      diag.error("cannot write IR dump '" + path + "': " + ec.message());
      return failure();
    }
    return success();
  };

  if (!options_.dumpDir.empty()) {
    if (std::error_code ec =
            llvm::sys::fs::create_directories(options_.dumpDir)) {
      diag.error("cannot create dump directory '" + options_.dumpDir +
                 "': " + ec.message());
      return failure();
    }
    if (failed(writeDump("input")))
      return failure();
  }

  using Clock = std::chrono::steady_clock;
  std::vector<std::pair<std::string, double>> timings;
  auto reportTimes = [&] {
    if (!options_.timePasses)
      return;
    double total = 0;
    for (const auto &t : timings)
      total += t.second;
    auto percent = [&](double s) {
      return total > 0 ? 100.0 * s / total : 0.0;
    };
    dumpStream_ << "===" << std::string(73, '-') << "===\n"
                << "                        ... Pass execution timing report "
                   "...\n"
                << "===" << std::string(73, '-') << "===\n"
                << llvm::format("  Total Execution Time: %.4f seconds\n\n",
                                total)
                << "  ----Wall Time----  ----Name----\n";
    for (const auto &t : timings)
      dumpStream_ << llvm::format("  %8.4f (%5.1f%%)  ", t.second,
                                  percent(t.second))
                  << t.first << "\n";
    dumpStream_ << llvm::format("  %8.4f (%5.1f%%)  ", total, 100.0)
                << "Total\n";
    dumpStream_.flush();
  };

  for (const auto &pass : passes_) {
    llvm::StringRef name = pass->name();
    if (selects(options_.printIRBefore, name))
      dumpIR("Before", name);

    unsigned errorsBefore = diag.errorCount();
    auto start = Clock::now();
    std::optional<DiagnosticSubject> aboutTheFile;
    if (!options_.sourceName.empty())
      aboutTheFile.emplace(diag, options_.sourceName);
    LogicalResult result = pass->run(module, diag);
    aboutTheFile.reset();
    timings.emplace_back(
        name.str(),
        std::chrono::duration<double>(Clock::now() - start).count());
    if (failed(result)) {
      // A pass normally says why it failed; make sure the user sees
      // something even when it did not.
      if (diag.errorCount() == errorsBefore)
        diag.error("pass '" + name + "' failed");
      reportTimes();
      return failure();
    }

    if (options_.verifyEach) {
      // Verify quietly first so that the headline comes before the
      // verifier's own messages.
      DiagnosticEngine quiet(llvm::nulls());
      if (failed(ir::verify(module, quiet))) {
        diag.error("pass '" + name + "' produced an invalid module");
        (void)ir::verify(module, diag);
        reportTimes();
        return failure();
      }
    }

    if (selects(options_.printIRAfter, name))
      dumpIR("After", name);
    if (!options_.dumpDir.empty() && failed(writeDump(name))) {
      reportTimes();
      return failure();
    }
  }
  reportTimes();
  return success();
}

} // namespace mgc::passes
