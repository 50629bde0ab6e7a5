#include "frontend/Frontend.h"

namespace mgc::frontend {

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
