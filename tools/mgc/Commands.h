// The mgc commands, and the pieces they share.
#pragma once

#include "tools/mgc/Options.h"

#include "ir/Graph.h"
#include "support/Diagnostics.h"

#include <string>
#include <vector>

namespace mgc::cli {

int runCompile(llvm::ArrayRef<std::string> args);
int runOpt(llvm::ArrayRef<std::string> args);
int runRun(llvm::ArrayRef<std::string> args);
int runEval(llvm::ArrayRef<std::string> args);
int runGenerate(llvm::ArrayRef<std::string> args);
int runExport(llvm::ArrayRef<std::string> args);

const CommandSpec &compileSpec();
const CommandSpec &optSpec();
const CommandSpec &runSpec();
const CommandSpec &evalSpec();
const CommandSpec &generateSpec();
const CommandSpec &exportSpec();

// Options that every command running a pass pipeline accepts (--passes,
// --print-ir-after, ...), and the code that applies them: one definition
// serves compile and opt.
std::vector<OptionSpec> passPipelineOptions();
// The registered passes with their summaries, for --help.
std::string passListHelp();
// Runs --passes on `module`, read from `sourceName` (which the passes'
// errors that have no location name).
int runPassPipeline(ir::Module &module, const ParsedArgs &args,
                    DiagnosticEngine &diag, llvm::StringRef sourceName);

// Options for where and how the result is printed (-o, --locations).
std::vector<OptionSpec> outputOptions();
// Prints the module to -o (default stdout). Writes a file through a
// temporary and a rename, so a failed write never leaves half a file.
int emitModule(const ir::Module &module, const ParsedArgs &args,
               DiagnosticEngine &diag);
// Writes text to -o (default stdout) the same way.
int emitText(const std::string &text, const ParsedArgs &args,
             DiagnosticEngine &diag);

// A file a command reads or writes, as a flag names it: ("--save", path);
// the model file is ("the model file", path).
struct NamedPath {
  std::string what, path;
};
// "" when no output names the same file as an input (the same file, or
// the same path before it exists); else the error, naming both: an output
// must never overwrite what the command reads.
std::string outputOverwritesInput(llvm::ArrayRef<NamedPath> outputs,
                                  llvm::ArrayRef<NamedPath> inputs);

// Prints an error of `mgc COMMAND` and returns `code`: a message from
// the library that already says "error:" is printed as it is (prefixed
// with the command when it starts with it), any other is prefixed with
// "mgc COMMAND: error: ".
int commandError(llvm::StringRef command, const std::string &message,
                 int code = kUserError);

// Parses arguments for a command, handling --help and usage errors. Returns
// nullopt with `exitCode` set when the command should stop.
std::optional<ParsedArgs> parseCommandArgs(const CommandSpec &spec,
                                           llvm::ArrayRef<std::string> args,
                                           int &exitCode);

} // namespace mgc::cli
