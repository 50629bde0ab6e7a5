// The one device allocation of a CUDA executor, laid out as
//   [error record | arena | arguments | second inputs | scratch
//    | communication scratch | workspace | group descriptors]
// each piece aligned. Internal to the backend.
#pragma once

#include "backend/Executable.h"
#include "backend/LaunchGroups.h"
#include "backend/cuda/CudaExecutor.h"

#include <cstdint>
#include <vector>

namespace mgc::backend::cuda {

constexpr uint64_t kAlign = 256;
inline uint64_t alignUp(uint64_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

// The launch plan options of executor options.
inline LaunchOptions launchOptionsOf(const CudaOptions &options) {
  return {options.groupLaunches, options.groupLaunches};
}

// Where the pieces of the device allocation start.
struct Layout {
  uint64_t error = 0, arena = 0, arguments = 0, scratch = 0, commScratch = 0,
           workspace = 0, descriptors = 0, total = 0;
  // By graph argument, for each input set (set 1 differs from set 0 for
  // inputs only, and only with a graph).
  std::vector<uint64_t> argumentOffsets[2];
  uint64_t inputBytes = 0; // of one set of inputs, aligned
  bool twoInputSets = false;
  size_t descriptorsPerSet = 0;
};

Layout layoutOf(const Executable &exe, const CudaOptions &options,
                const LaunchPlan &plan);

} // namespace mgc::backend::cuda
