// The compiled, scheduled program: the module (kept as IR text, so that a
// runtime reads it back with ir::parseModuleText and needs no frontend), the
// op order, the memory plan and a format version. Serialised to a `.mgx`
// file (format in docs/executable.md), written atomically.
#pragma once

#include "backend/MemoryPlan.h"
#include "ir/Graph.h"
#include "support/Diagnostics.h"
#include "support/Result.h"

#include <memory>
#include <string>
#include <vector>

namespace mgc::backend {

constexpr int kExecutableFormatVersion = 1;

struct Executable {
  int formatVersion = kExecutableFormatVersion;
  std::unique_ptr<ir::Module> module;
  // Indices of the graph's ops in the order they run.
  std::vector<uint32_t> order;
  MemoryPlan plan;
};

// Schedules `module` (graph order, which the verifier guarantees is a valid
// one) and plans its memory with the scratch space of the target backend's
// kernels (cpu::scratchBytes for the CPU). Takes the module.
std::unique_ptr<Executable> buildExecutable(std::unique_ptr<ir::Module> module,
                                            ScratchFn scratch);

// The file contents and back. Reading checks the header, every section's
// length, a checksum of the whole file, and that the order and plan fit the
// module; errors name `fileName`.
std::string serializeExecutable(const Executable &exe);
std::unique_ptr<Executable> parseExecutable(llvm::StringRef fileName,
                                            llvm::StringRef contents,
                                            DiagnosticEngine &diag);

// Writes through a temporary file in the same folder, fsync and rename, so
// that a crash never leaves a half-written file in place of the old one.
LogicalResult writeExecutableFile(const Executable &exe, llvm::StringRef path,
                                  DiagnosticEngine &diag);
std::unique_ptr<Executable> readExecutableFile(llvm::StringRef path,
                                               DiagnosticEngine &diag);

// Checks that an order is a permutation of the graph's ops that defines
// every operand before use and that the plan fits (one slot per op, sizes
// matching the types, live buffers not overlapping). Reports with `what`
// naming the source.
LogicalResult checkExecutable(const Executable &exe, llvm::StringRef what,
                              DiagnosticEngine &diag);

} // namespace mgc::backend
