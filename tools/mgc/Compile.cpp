// mgc compile: a model file to IR.
#include "tools/mgc/Commands.h"

#include "frontend/Frontend.h"

namespace mgc::cli {

const CommandSpec &compileSpec() {
  static const CommandSpec spec = [] {
    CommandSpec s;
    s.name = "compile";
    s.usage = "mgc compile MODEL.mg [-D NAME=VALUE]... [--emit=ir] "
              "[--passes=PIPELINE] [-o FILE|-]";
    s.summary = "Compile a model file and print what mgc makes of it.";
    s.positionalName = "a model file (MODEL.mg, or - for stdin)";
    s.minPositionals = s.maxPositionals = 1;
    s.options = {
        {"-D", "NAME=VALUE", "override the constant NAME of the model file",
         true},
        {"--emit", "KIND", "what to print", false, {"ir"}},
        {"--no-warnings", "", "do not print warnings"},
    };
    for (auto &o : outputOptions())
      s.options.push_back(o);
    for (auto &o : passPipelineOptions())
      s.options.push_back(o);
    s.details = "Exit status: 0 success, 1 the model has errors, 2 usage "
                "error.\n";
    return s;
  }();
  return spec;
}

int runCompile(llvm::ArrayRef<std::string> rawArgs) {
  int exitCode = kSuccess;
  auto args = parseCommandArgs(compileSpec(), rawArgs, exitCode);
  if (!args)
    return exitCode;

  frontend::CompileOptions options;
  for (const std::string &define : args->getAll("-D")) {
    auto eq = define.find('=');
    if (eq == std::string::npos || eq == 0) {
      llvm::errs() << "mgc compile: error: -D expects NAME=VALUE, got '"
                   << define << "'\n";
      return kUsageError;
    }
    options.defines[define.substr(0, eq)] = define.substr(eq + 1);
  }
  DiagnosticEngine diag;
  diag.setWarningsEnabled(!args->has("--no-warnings"));
  auto module =
      frontend::compileModelFile(args->positionals[0], options, diag);
  if (!module || diag.hasErrors())
    return kUserError;
  if (int rc = runPassPipeline(*module, *args, diag))
    return rc;
  return emitModule(*module, *args, diag);
}

} // namespace mgc::cli
