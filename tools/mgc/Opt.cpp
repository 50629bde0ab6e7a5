// mgc opt: run passes on textual IR, like LLVM's opt.
#include "tools/mgc/Commands.h"

#include "ir/TextParser.h"

namespace mgc::cli {

const CommandSpec &optSpec() {
  static const CommandSpec spec = [] {
    CommandSpec s;
    s.name = "opt";
    s.usage = "mgc opt FILE.mgir [--passes=PIPELINE] [-o FILE|-]";
    s.summary = "Read textual IR, run a pass pipeline on it, print the "
                "result.\nWith no --passes the module is printed unchanged.";
    s.positionalName = "an IR file (FILE.mgir, or - for stdin)";
    s.minPositionals = s.maxPositionals = 1;
    for (auto &o : passPipelineOptions())
      s.options.push_back(o);
    for (auto &o : outputOptions())
      s.options.push_back(o);
    s.details = passListHelp() +
                "\nExit status: 0 success, 1 the input has errors, 2 usage "
                "error.\n";
    return s;
  }();
  return spec;
}

int runOpt(llvm::ArrayRef<std::string> rawArgs) {
  int exitCode = kSuccess;
  auto args = parseCommandArgs(optSpec(), rawArgs, exitCode);
  if (!args)
    return exitCode;
  std::string overwrite = outputOverwritesInput(
      {{"-o", args->get("-o")}}, {{"the IR file", args->positionals[0]}});
  if (!overwrite.empty()) {
    llvm::errs() << "mgc opt: error: " << overwrite << "\n";
    return kUsageError;
  }
  DiagnosticEngine diag;
  std::string text;
  const std::string &path = args->positionals[0];
  if (!diag.addSourceFile(path, &text))
    return kUserError;
  std::string sourceName = path == "-" ? "<stdin>" : path;
  auto module = ir::parseModuleText(sourceName, text, diag);
  if (!module)
    return kUserError;
  if (int rc = runPassPipeline(*module, *args, diag, sourceName))
    return rc;
  return emitModule(*module, *args, diag);
}

} // namespace mgc::cli
