// libFuzzer target: any bytes as a model file through parse, check and
// lowering; whatever compiles is also printed, parsed back (the round trip
// must hold) and run through the standard passes. Nothing may crash, hang or
// leak; diagnostics are discarded.
#include "frontend/Frontend.h"
#include "ir/Printer.h"
#include "ir/TextParser.h"
#include "passes/PassManager.h"

#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

using namespace mgc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  llvm::raw_null_ostream sink;
  DiagnosticEngine diag(sink);
  frontend::CompileOptions options;
  auto module = frontend::compileModelSource("fuzz.mg", text, options, diag);
  if (!module)
    return 0;
  std::string printed = ir::printModuleToString(*module);
  DiagnosticEngine reparseDiag(sink);
  auto reparsed = ir::parseModuleText("fuzz.mgir", printed, reparseDiag);
  if (!reparsed || ir::printModuleToString(*reparsed) != printed)
    std::abort(); // the text form must round-trip every module we make
  passes::PassManager pm({}, sink);
  if (succeeded(pm.parsePipeline("canonicalize,cse,dce", diag)))
    (void)pm.run(*module, diag);
  return 0;
}
