// Parses pipeline text ("canonicalize,cse,dce"), runs the passes in order,
// verifies after each (in tests and debug builds, or when asked), and offers
// the debugging dumps users expect from LLVM's opt.
#pragma once

#include "passes/Pass.h"

#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <string>
#include <vector>

namespace mgc::passes {

struct PassManagerOptions {
  // Pass names or "all".
  std::vector<std::string> printIRBefore;
  std::vector<std::string> printIRAfter;
  bool timePasses = false;
  // When non-empty: write the module before the first pass and after each
  // pass as DIR/NN-<pass>.mgir.
  std::string dumpDir;
  bool verifyEach = true;
  bool printLocations = false;
  // The file the module was read from: an error a pass reports with no
  // location ("module 'm' has no loss") names it.
  std::string sourceName;
};

struct PassInfo {
  llvm::StringRef name;
  llvm::StringRef summary;
  std::unique_ptr<Pass> (*create)();
};
llvm::ArrayRef<PassInfo> registeredPasses();

class PassManager {
public:
  explicit PassManager(PassManagerOptions options = {},
                       llvm::raw_ostream &dumpStream = llvm::errs());
  ~PassManager();

  // Appends the passes named in `pipeline` (comma separated, spaces
  // ignored; empty means none). Unknown names are reported with the list of
  // known passes.
  LogicalResult parsePipeline(llvm::StringRef pipeline, DiagnosticEngine &diag);
  void addPass(std::unique_ptr<Pass> pass);
  // Checks the print-ir-before/after names against the registry.
  LogicalResult checkOptions(DiagnosticEngine &diag) const;

  LogicalResult run(ir::Module &module, DiagnosticEngine &diag);

private:
  PassManagerOptions options_;
  llvm::raw_ostream &dumpStream_;
  std::vector<std::unique_ptr<Pass>> passes_;
};

} // namespace mgc::passes
