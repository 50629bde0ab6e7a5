// From .mg text to an ir::Module: lex, parse, check, lower.
#pragma once

#include "frontend/ConstEval.h"
#include "ir/Graph.h"
#include "support/Diagnostics.h"

#include <map>
#include <memory>
#include <string>

namespace mgc::frontend {

// -D NAME=VALUE overrides of `const` declarations, as written on the command
// line (the value is parsed as an integer or float expression literal).
using ConstOverrides = std::map<std::string, std::string>;

struct CompileOptions {
  ConstOverrides defines;
  // --batch-size: sets the constant the batch is written with (the leading
  // dimension of the model's first input, docs/language.md), as -D would;
  // an error where the batch is not written as a constant. 0: as the file
  // says.
  int64_t batchSize = 0;
  // Warn about parameters that no output depends on.
  bool warnUnused = true;
  // Where given: filled with the file's constants as compiled (-D applied),
  // by name, for what must agree with the model's sizes outside its graph
  // (a Hugging Face checkpoint's config.json).
  std::map<std::string, Number> *constantsOut = nullptr;
};

// Compiles model text. Errors and warnings go to `diag` with file, line,
// column, the source line and a caret. Returns null if there was any error.
// Never crashes, aborts or hangs on any input.
std::unique_ptr<ir::Module> compileModelSource(llvm::StringRef fileName,
                                               llvm::StringRef text,
                                               const CompileOptions &options,
                                               DiagnosticEngine &diag);

// Reads the file (reporting an error naming it if it cannot be read) and
// compiles it.
std::unique_ptr<ir::Module> compileModelFile(llvm::StringRef path,
                                             const CompileOptions &options,
                                             DiagnosticEngine &diag);

} // namespace mgc::frontend
