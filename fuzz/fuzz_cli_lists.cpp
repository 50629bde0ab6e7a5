// libFuzzer target: any bytes as the command-line lists: the value of
// --prompt-tokens and --dp-weights (ParsedArgs' lists), --mesh, --stages
// and --passes, and as a whole command line (arguments one per line) of
// the mesh and model-size options. The first byte picks the parser.
// Usage errors are fine; crashes, reads of freed memory (a list's pieces
// outliving their string), integer overflow and leaks are not.
#include "ir/Sharding.h"
#include "passes/PassManager.h"
#include "runtime/session/StageRanges.h"
#include "tools/mgc/MeshOptions.h"

#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <string>
#include <vector>

using namespace mgc;
using namespace mgc::cli;

namespace {

CommandSpec listSpec() {
  CommandSpec spec;
  spec.name = "fuzz";
  spec.maxPositionals = 1;
  spec.options = meshOptions();
  for (const OptionSpec &o : modelSizeOptions())
    spec.options.push_back(o);
  spec.options.push_back({"--prompt-tokens", "ID,...", "token ids"});
  return spec;
}

// A list option's value as ParsedArgs hands it out: as strings and as the
// bounded integers of --prompt-tokens; every piece is read.
void parseList(const std::string &value) {
  std::string error;
  std::vector<std::string> args{"--prompt-tokens=" + value};
  std::optional<ParsedArgs> parsed = parseArgs(listSpec(), args, error);
  if (!parsed)
    return;
  size_t bytes = 0;
  for (const std::string &piece : parsed->getList("--prompt-tokens"))
    bytes += piece.size();
  if (bytes > value.size())
    std::abort();
  std::vector<int64_t> ids;
  std::string why =
      parsed->getIntList("--prompt-tokens", 0, INT32_MAX, "ids", ids);
  for (int64_t id : ids)
    if (id < 0 || id > INT32_MAX)
      std::abort();
  (void)why;
}

// A command line of the mesh and model-size options through the real
// readers of mgc run and mgc compile (their usage errors go to stderr).
void parseCommandLine(const std::string &text) {
  std::vector<std::string> args;
  llvm::SmallVector<llvm::StringRef, 16> lines;
  llvm::StringRef(text).split(lines, '\n');
  for (llvm::StringRef line : lines)
    args.push_back(line.str());
  std::string error;
  std::optional<ParsedArgs> parsed = parseArgs(listSpec(), args, error);
  if (!parsed)
    return;
  std::map<std::string, std::string> defines;
  int64_t batchSize = 0;
  (void)parseModelSizes(*parsed, defines, batchSize);
  int exitCode = 0;
  std::optional<MeshChoice> choice = parseMeshChoice(*parsed, "fuzz", exitCode);
  if (choice && choice->mesh && choice->mesh->numDevices() < 1)
    std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 3)
    return 0;
  std::string value(reinterpret_cast<const char *>(data) + 3, size - 3);
  std::string messages;
  llvm::raw_string_ostream sink(messages);
  DiagnosticEngine diag(sink);
  switch (data[0] % 5) {
  case 0:
    parseList(value);
    break;
  case 1: {
    std::string error;
    (void)ir::Mesh::parse(value, error);
    break;
  }
  case 2: {
    // Stage and layer counts as a pipeline has them: 1 to 64.
    int64_t stages = data[1] % 64 + 1, layers = data[2] % 64 + 1;
    auto first = session::parseStages(value, stages, layers, diag);
    if (first &&
        (static_cast<int64_t>(first->size()) != stages || first->front() != 0))
      std::abort();
    break;
  }
  case 3: {
    passes::PassManager pm({}, sink);
    (void)pm.parsePipeline(value, diag);
    break;
  }
  case 4:
    parseCommandLine(value);
    break;
  }
  return 0;
}
