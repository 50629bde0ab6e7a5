// mgc compile: a model file to IR.
#include "tools/mgc/Commands.h"

#include "backend/Executable.h"
#include "backend/cpu/Kernels.h"
#include "frontend/Frontend.h"

#include "llvm/Support/Format.h"
#include "runtime/session/Pipeline.h"

#include "llvm/Support/raw_ostream.h"

namespace mgc::cli {

const CommandSpec &compileSpec() {
  static const CommandSpec spec = [] {
    CommandSpec s;
    s.name = "compile";
    s.usage = "mgc compile MODEL.mg [-D NAME=VALUE]... [--emit=ir|exe] "
              "[--passes=PIPELINE] [-o FILE|-]";
    s.summary = "Compile a model file and print what mgc makes of it.";
    s.positionalName = "a model file (MODEL.mg, or - for stdin)";
    s.minPositionals = s.maxPositionals = 1;
    s.options = {
        {"-D", "NAME=VALUE", "override the constant NAME of the model file",
         true},
        {"--emit",
         "KIND",
         "what to write: ir (the IR text) or exe (an executable: the "
         "training step when the model has a loss, unless --passes is "
         "given; the default when -o names a .mgx file)",
         false,
         {"ir", "exe"}},
        {"--no-warnings", "", "do not print warnings"},
    };
    for (auto &o : outputOptions())
      s.options.push_back(o);
    for (auto &o : passPipelineOptions())
      s.options.push_back(o);
    s.details = passListHelp() + "\nExit status: 0 success, 1 the model has errors, 2 usage "
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
  auto module = frontend::compileModelFile(args->positionals[0], options, diag);
  if (!module || diag.hasErrors())
    return kUserError;
  std::string out = args->get("-o", "-");
  bool exe = args->has("--emit") ? args->get("--emit", "ir") == "exe"
                                 : llvm::StringRef(out).endswith(".mgx");
  std::unique_ptr<backend::Executable> executable;
  if (exe && !args->has("--passes")) {
    // The program a session runs: the training step when the model has a
    // loss (the same function builds it for the executor library).
    auto exes = session::buildModelExecutables(std::move(module), diag);
    if (exes.failed())
      return kUserError;
    executable = exes->step ? std::move(exes->step) : std::move(exes->forward);
  } else {
    if (int rc = runPassPipeline(*module, *args, diag))
      return rc;
    if (!exe)
      return emitModule(*module, *args, diag);
    // The scheduled program with its memory plan for the CPU backend.
    executable =
        backend::buildExecutable(std::move(module), backend::cpu::scratchBytes);
  }
  if (out == "-") {
    llvm::outs() << backend::serializeExecutable(*executable);
    return kSuccess;
  }
  if (failed(backend::writeExecutableFile(*executable, out, diag)))
    return kUserError;
  // What the memory planner decided, in the spirit of a linker's summary.
  uint64_t argumentBytes = 0;
  for (const auto &arg : executable->module->graph().arguments())
    argumentBytes += static_cast<uint64_t>(arg->type().size()) *
                     ir::dtypeBytes(arg->type().dtype);
  llvm::outs() << llvm::format(
      "wrote %s: %zu ops, arena peak %.1f MiB, arguments %.1f MiB\n",
      out.c_str(), executable->order.size(),
      executable->plan.peak / 1048576.0, argumentBytes / 1048576.0);
  return kSuccess;
}

} // namespace mgc::cli
