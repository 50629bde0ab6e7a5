// libFuzzer target: any bytes as textual IR through the parser, the verifier
// and the standard passes; whatever parses must print and parse back to the
// same text. A module with a `mesh` attribute also goes through the shard
// pass and the partitioner: errors are fine, crashes and partitions that do
// not verify are not.
#include "ir/Printer.h"
#include "ir/Sharding.h"
#include "ir/TextParser.h"
#include "passes/Partition.h"
#include "passes/PassManager.h"

#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <string>
#include <variant>

using namespace mgc;

namespace {

// Larger meshes are legal but make one program per device: too slow for a
// fuzzer, and no different in kind.
constexpr int64_t kMaxFuzzDevices = 16;

void roundTrip(const ir::Module &module, DiagnosticEngine &diag) {
  std::string printed = ir::printModuleToString(module);
  auto reparsed = ir::parseModuleText("fuzz2.mgir", printed, diag);
  if (!reparsed || ir::printModuleToString(*reparsed) != printed)
    std::abort();
}

// Messages that only a bug in a pass can cause, whatever the input.
bool saysInternalError(const std::string &messages) {
  return messages.find("internal error") != std::string::npos ||
         messages.find("produced an invalid module") != std::string::npos;
}

void shardAndPartition(ir::Module &module) {
  const ir::AttrValue *attr = module.attrs().find(ir::kMeshAttr);
  if (!attr || !std::holds_alternative<std::string>(*attr))
    return;
  std::string error;
  std::optional<ir::Mesh> mesh =
      ir::Mesh::parse(std::get<std::string>(*attr), error);
  if (mesh && mesh->numDevices() > kMaxFuzzDevices)
    return;
  std::string messages;
  llvm::raw_string_ostream os(messages);
  DiagnosticEngine diag(os);
  passes::PassManager pm({}, os);
  bool sharded = succeeded(pm.parsePipeline("shard", diag)) &&
                 succeeded(pm.run(module, diag));
  if (sharded) {
    // The sharded module verified after the pass; its text must round-trip
    // with every placement and communication op.
    roundTrip(module, diag);
    (void)passes::partitionModule(module, diag);
  }
  if (saysInternalError(os.str()))
    std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  llvm::raw_null_ostream sink;
  DiagnosticEngine diag(sink);
  // Parsing verifies: whatever comes back is a well-formed module.
  auto module = ir::parseModuleText("fuzz.mgir", text, diag);
  if (!module)
    return 0;
  roundTrip(*module, diag);
  // The shard pass runs on a copy of its own, as parsed (the standard passes
  // below would fold away much of what it has to place).
  auto sharded =
      ir::parseModuleText("fuzz3.mgir", ir::printModuleToString(*module), diag);
  if (sharded)
    shardAndPartition(*sharded);
  passes::PassManager pm({}, sink);
  if (succeeded(pm.parsePipeline("canonicalize,cse,dce", diag)))
    (void)pm.run(*module, diag);
  return 0;
}
