// Helpers for the frontend tests: compile model text with captured
// diagnostics.
#pragma once

#include "SourcePath.h"
#include "frontend/Frontend.h"

#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <string>

namespace mgc::frontend::testing {

struct Compiled {
  std::unique_ptr<ir::Module> module;
  std::string diags;
  unsigned errors = 0;
  unsigned warnings = 0;
};

inline Compiled compileText(const std::string &text,
                            const ConstOverrides &defines = {},
                            const std::string &fileName = "test.mg") {
  Compiled c;
  llvm::raw_string_ostream os(c.diags);
  DiagnosticEngine diag(os);
  CompileOptions options;
  options.defines = defines;
  c.module = compileModelSource(fileName, text, options, diag);
  os.flush();
  c.errors = diag.errorCount();
  c.warnings = diag.warningCount();
  return c;
}

inline Compiled compileFile(const std::string &path,
                            const ConstOverrides &defines = {}) {
  Compiled c;
  llvm::raw_string_ostream os(c.diags);
  DiagnosticEngine diag(os);
  CompileOptions options;
  options.defines = defines;
  c.module = compileModelFile(path, options, diag);
  os.flush();
  c.errors = diag.errorCount();
  c.warnings = diag.warningCount();
  return c;
}

// A model of samples/ (e.g. "gpt.mg") with `defines`.
inline Compiled compileSample(const std::string &name,
                              const ConstOverrides &defines = {}) {
  return compileFile(mgc::test::sourceDir() + "/samples/" + name, defines);
}

// samples/gpt.mg with V = 64, B = 4, 2 heads, and these sizes; null when
// it does not compile.
inline std::unique_ptr<ir::Module> tinyGpt(int64_t layers, int64_t T,
                                           int64_t D) {
  return compileSample("gpt.mg", {{"V", "64"},
                                  {"T", std::to_string(T)},
                                  {"D", std::to_string(D)},
                                  {"H", "2"},
                                  {"L", std::to_string(layers)},
                                  {"B", "4"}})
      .module;
}

inline bool contains(const std::string &haystack, const std::string &needle) {
  return haystack.find(needle) != std::string::npos;
}

} // namespace mgc::frontend::testing
