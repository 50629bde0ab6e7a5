#include "tools/mgc/Commands.h"

#include "ir/Printer.h"
#include "passes/PassManager.h"
#include "support/AtomicFile.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

namespace mgc::cli {

std::optional<ParsedArgs> parseCommandArgs(const CommandSpec &spec,
                                           llvm::ArrayRef<std::string> args,
                                           int &exitCode) {
  std::string error;
  auto parsed = parseArgs(spec, args, error);
  if (!parsed) {
    llvm::errs() << "mgc " << spec.name << ": error: " << error << "\n";
    exitCode = kUsageError;
    return std::nullopt;
  }
  if (parsed->helpRequested) {
    llvm::outs() << formatHelp(spec);
    exitCode = kSuccess;
    return std::nullopt;
  }
  return parsed;
}

std::vector<OptionSpec> passPipelineOptions() {
  return {
      {"--passes",
       "PIPELINE",
       "comma-separated passes to run in order, e.g. canonicalize,cse,dce "
       "(empty: none)",
       false,
       {},
       /*mayBeEmpty=*/true},
      {"--print-ir-before", "PASS",
       "print the module to stderr before PASS runs ('all': every pass)", true},
      {"--print-ir-after", "PASS",
       "print the module to stderr after PASS runs ('all': every pass)", true},
      {"--time-passes", "", "print the time each pass took to stderr"},
      {"--dump-dir", "DIR",
       "write the module before the first pass and after each pass to "
       "DIR/NN-PASS.mgir"},
      {"--no-verify-each", "", "do not verify the module after every pass"},
  };
}

std::string passListHelp() {
  std::string s = "passes:\n";
  size_t width = 0;
  for (const passes::PassInfo &p : passes::registeredPasses())
    width = std::max(width, p.name.size());
  for (const passes::PassInfo &p : passes::registeredPasses())
    s += "  " + p.name.str() + std::string(width - p.name.size() + 2, ' ') +
         p.summary.str() + "\n";
  return s;
}

std::vector<OptionSpec> outputOptions() {
  return {
      {"-o", "FILE", "write the result to FILE ('-': stdout, the default)"},
      {"--locations", "", "print source locations, loc(\"file\":line:col)"},
  };
}

int runPassPipeline(ir::Module &module, const ParsedArgs &args,
                    DiagnosticEngine &diag, llvm::StringRef sourceName) {
  passes::PassManagerOptions options;
  options.printIRBefore = args.getAll("--print-ir-before");
  options.printIRAfter = args.getAll("--print-ir-after");
  options.timePasses = args.has("--time-passes");
  options.dumpDir = args.get("--dump-dir");
  options.verifyEach = !args.has("--no-verify-each");
  options.printLocations = args.has("--locations");
  options.sourceName = sourceName.str();
  passes::PassManager pm(options, llvm::errs());
  if (failed(pm.parsePipeline(args.get("--passes"), diag)) ||
      failed(pm.checkOptions(diag)))
    return kUsageError;
  if (failed(pm.run(module, diag)))
    return kUserError;
  return kSuccess;
}

int emitModule(const ir::Module &module, const ParsedArgs &args,
               DiagnosticEngine &diag) {
  ir::PrintOptions printOptions;
  printOptions.locations = args.has("--locations");
  return emitText(ir::printModuleToString(module, printOptions), args, diag);
}

namespace {

// Whether two paths name one file: the same file when both exist, else the
// same absolute path with . and .. resolved.
bool sameFile(const std::string &a, const std::string &b) {
  bool same = false;
  if (!llvm::sys::fs::equivalent(a, b, same))
    return same;
  auto normal = [](const std::string &p) {
    llvm::SmallString<256> s(p);
    llvm::sys::fs::make_absolute(s);
    llvm::sys::path::remove_dots(s, /*remove_dot_dot=*/true);
    return std::string(s);
  };
  return normal(a) == normal(b);
}

} // namespace

std::string outputOverwritesInput(llvm::ArrayRef<NamedPath> outputs,
                                  llvm::ArrayRef<NamedPath> inputs) {
  for (const NamedPath &out : outputs)
    for (const NamedPath &in : inputs)
      if (!out.path.empty() && !in.path.empty() && out.path != "-" &&
          sameFile(out.path, in.path))
        return out.what + " '" + out.path + "' is also " + in.what + " ('" +
               in.path + "'): one would overwrite the other; give " +
               "another path";
  return "";
}

int emitText(const std::string &text, const ParsedArgs &args,
             DiagnosticEngine &diag) {
  std::string path = args.get("-o", "-");
  if (path == "-") {
    llvm::outs() << text;
    llvm::outs().flush();
    return kSuccess;
  }
  if (llvm::Error err = writeFileAtomically(
          path, [&](FileSink &sink) { return sink.write(text); })) {
    diag.error(llvm::toString(std::move(err)));
    return kUserError;
  }
  return kSuccess;
}

int commandError(llvm::StringRef command, const std::string &message,
                 int code) {
  llvm::StringRef m(message);
  if (m.startswith("error:"))
    llvm::errs() << "mgc " << command << ": " << message << "\n";
  else if (m.contains("error:"))
    llvm::errs() << message << "\n";
  else
    llvm::errs() << "mgc " << command << ": error: " << message << "\n";
  return code;
}

} // namespace mgc::cli
