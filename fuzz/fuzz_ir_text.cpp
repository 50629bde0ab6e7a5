// libFuzzer target: any bytes as textual IR through the parser, the verifier
// and the standard passes; whatever parses must print and parse back to the
// same text.
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
  auto module = ir::parseModuleText("fuzz.mgir", text, diag);
  if (!module)
    return 0;
  std::string printed = ir::printModuleToString(*module);
  auto reparsed = ir::parseModuleText("fuzz2.mgir", printed, diag);
  if (!reparsed || ir::printModuleToString(*reparsed) != printed)
    std::abort();
  passes::PassManager pm({}, sink);
  if (succeeded(pm.parsePipeline("canonicalize,cse,dce", diag)))
    (void)pm.run(*module, diag);
  return 0;
}
