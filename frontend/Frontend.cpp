#include "frontend/Frontend.h"

#include "frontend/Lower.h"
#include "frontend/Parser.h"
#include "ir/Verifier.h"

namespace mgc::frontend {

std::unique_ptr<ir::Module> compileModelSource(llvm::StringRef fileName,
                                               llvm::StringRef text,
                                               const CompileOptions &options,
                                               DiagnosticEngine &diag) {
  // Register the text so diagnostics show source lines, unless the caller
  // already did (compileModelFile).
  const char *file = internFileName(fileName);
  if (diag.sourceText(fileName).empty() && !text.empty())
    diag.addSource(fileName, text);
  unsigned errorsBefore = diag.errorCount();
  FileAST ast = parseSource(file, text, diag);
  // Lowering runs even after syntax errors (the parser recovered), so one
  // run reports problems of both kinds.
  Lowerer lowerer(file, options, diag);
  std::unique_ptr<ir::Module> module = lowerer.run(ast);
  if (!module || diag.errorCount() != errorsBefore)
    return nullptr;
  if (failed(ir::verify(*module, diag)))
    return nullptr;
  return module;
}

std::unique_ptr<ir::Module> compileModelFile(llvm::StringRef path,
                                             const CompileOptions &options,
                                             DiagnosticEngine &diag) {
  std::string text;
  if (!diag.addSourceFile(path, &text))
    return nullptr;
  return compileModelSource(path == "-" ? "<stdin>" : path, text, options,
                            diag);
}

} // namespace mgc::frontend
