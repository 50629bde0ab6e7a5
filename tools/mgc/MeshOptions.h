// The mesh flags shared by mgc compile and mgc run: --mesh, --devices,
// --dp-weights, --zero, --bucket-mib, --accumulate (or --microbatches) and
// the pipeline's --pipeline-schedule, --virtual-stages and --stages, and
// their checking (usage errors name the flag).
#pragma once

#include "tools/mgc/Options.h"

#include "ir/Sharding.h"

#include <optional>
#include <string>
#include <vector>

namespace mgc::cli {

struct MeshChoice {
  // None: one device, no accumulation. With --accumulate alone, the mesh
  // of one device (no axes).
  std::optional<ir::Mesh> mesh;
  int zero = 0;
  double bucketMiB = 25;
  int64_t accumulate = 1; // micro-batches per step
  // With a pp axis: the pipeline's settings (SessionOptions' schedule,
  // virtualStages and stages).
  std::string schedule;
  int virtualStages = 1;
  std::string stages;
  std::string cluster;
};

std::vector<OptionSpec> meshOptions();

// The mesh the flags ask for. On a usage error prints it (prefixed with
// "mgc COMMAND: error: ") and returns nullopt with `exitCode` set.
std::optional<MeshChoice> parseMeshChoice(const ParsedArgs &args,
                                          llvm::StringRef command,
                                          int &exitCode);

} // namespace mgc::cli
