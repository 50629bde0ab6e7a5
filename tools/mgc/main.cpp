// mgc: the command-line driver. Each command lives in its own file.
#include "tools/mgc/Commands.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <exception>
#include <new>
#include <string>
#include <vector>

using namespace mgc::cli;

namespace {

struct Command {
  const char *name;
  int (*run)(llvm::ArrayRef<std::string>);
  const CommandSpec &(*spec)();
};

const Command kCommands[] = {
    {"compile", runCompile, compileSpec},
    {"opt", runOpt, optSpec},
    {"run", runRun, runSpec},
    {"eval", runEval, evalSpec},
    {"generate", runGenerate, generateSpec},
    {"export", runExport, exportSpec},
};

void printToolHelp(llvm::raw_ostream &os) {
  os << "usage: mgc <command> [options]\n\n"
        "mgc compiles neural-network models written in the .mg language to a "
        "graph IR,\nruns passes on it and trains it on the CPU.\n\ncommands:\n";
  for (const Command &c : kCommands)
    os << "  " << llvm::left_justify(c.name, 10)
       << c.spec().summary.substr(0, c.spec().summary.find('\n')) << "\n";
  os << "\noptions:\n  -h, --help    show this help\n"
        "  --version     show the version\n\n"
        "Run 'mgc <command> --help' for the options of a command.\n";
}

// A command's exit status, made an error when what it wrote to standard
// output did not all arrive (a full disk, a closed pipe, /dev/full): said,
// rather than left to the stream's destructor, which aborts the process.
// The command has done everything else it does first (a run has saved its
// checkpoint).
int checkedOutput(int status) {
  llvm::raw_fd_ostream &out = llvm::outs();
  out.flush();
  if (!out.has_error())
    return status;
  std::error_code ec = out.error();
  out.clear_error();
  llvm::errs() << "mgc: error: writing standard output: " << ec.message()
               << "\n";
  llvm::errs().clear_error();
  return status == kSuccess ? kUserError : status;
}

int dispatch(const std::vector<std::string> &args) {
  if (args.empty()) {
    printToolHelp(llvm::errs());
    return kUsageError;
  }
  const std::string &first = args[0];
  if (first == "--help" || first == "-h" || first == "help") {
    printToolHelp(llvm::outs());
    return kSuccess;
  }
  if (first == "--version") {
    llvm::outs() << "mgc " << MGC_VERSION << "\n";
    return kSuccess;
  }
  for (const Command &c : kCommands)
    if (first == c.name)
      return c.run(llvm::ArrayRef<std::string>(args).drop_front());
  llvm::errs() << "mgc: error: unknown command '" << first << "' (commands: ";
  for (const Command &c : kCommands)
    llvm::errs() << (&c == kCommands ? "" : ", ") << c.name;
  llvm::errs() << "; see 'mgc --help')\n";
  return kUsageError;
}

} // namespace

int main(int argc, char **argv) {
  // The library turns exceptions into errors at its boundary; this catches
  // what the driver's own code meets (a refused thread of the data loader,
  // memory running out), so that nothing ends the process uncaught.
  int status;
  try {
    status = dispatch(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::bad_alloc &) {
    llvm::errs() << "mgc: error: out of memory\n";
    status = kUserError;
  } catch (const std::exception &e) {
    llvm::errs() << "mgc: error: " << e.what() << "\n";
    status = kUserError;
  }
  return checkedOutput(status);
}
