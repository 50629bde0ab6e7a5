// Training checkpoints: parameters and optimizer state as a safetensors file
// (see SafeTensors.h) with the training state in its "__metadata__" strings.
// Any safetensors reader can open one; docs/checkpoints.md lists the keys.
#pragma once

#include "runtime/SafeTensors.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace mgc::runtime {

// The version written by saveCheckpoint; loading refuses newer versions.
inline constexpr int64_t kCheckpointFormatVersion = 1;

// Metadata keys (all values are strings, as the safetensors format requires).
namespace ckpt_keys {
inline constexpr const char *Format = "format";                // "mgc"
inline constexpr const char *FormatVersion = "format_version"; // "1"
inline constexpr const char *Step = "step";                    // "10"
inline constexpr const char *Optimizer = "optimizer";          // "adamw"
inline constexpr const char *Seed = "seed";                    // "42"
inline constexpr const char *RngState = "rng_state";           // opaque
inline constexpr const char *SourceHash = "source_hash";       // sha256 hex
// "xxh64.<tensor>": XXH64 (seed 0) of the tensor's bytes as stored, 16 hex
// digits; safetensors has no checksum of its own.
inline constexpr const char *ChecksumPrefix = "xxh64.";
} // namespace ckpt_keys

struct CheckpointInfo {
  int64_t step = 0;       // optimizer steps taken when saved
  std::string optimizer;  // "sgd", "adamw", ... ("" when unknown)
  uint64_t seed = 0;      // the run's seed
  std::string rngState;   // opaque random-generator state ("" when unused)
  std::string sourceHash; // hash of the model source (see hashModelSource)
  // The "format" another writer gave the file ("pt" for torch's), which
  // then has only tensors; "" for mgc's checkpoints and files without one.
  std::string foreignFormat;
  // Further string metadata, kept and written back as is. Keys above are
  // reserved and may not appear here.
  StringMap extra;
};

struct Checkpoint {
  CheckpointInfo info;
  // Parameters under their model names; optimizer state under names of the
  // caller's choosing (docs/checkpoints.md suggests "opt.<slot>.<param>").
  TensorMap tensors;
};

// The metadata map a checkpoint is written with, and its inverse. Parsing
// fails on a malformed value of a known key, or a newer format version.
StringMap checkpointMetadata(const CheckpointInfo &info);
llvm::Expected<CheckpointInfo>
parseCheckpointMetadata(const StringMap &metadata, llvm::StringRef fileName);

// Writes atomically: a crash during the save leaves the previous file whole.
// Every tensor's checksum goes into the metadata.
llvm::Error saveCheckpoint(llvm::StringRef path, const Checkpoint &checkpoint);

// Reads and validates; errors name the file and what is wrong, a tensor
// whose bytes do not match its checksum among it. A plain safetensors file
// without mgc metadata (or checksums), or one whose "format" is another
// writer's, loads with default info. `what` names
// the file's role in errors.
llvm::Expected<Checkpoint> loadCheckpoint(llvm::StringRef path,
                                          llvm::StringRef what = "checkpoint");

// XXH64 (seed 0) of `bytes`, as 16 lowercase hex digits; a tensor's
// checksum is that of its bytes as stored (ckpt_keys::ChecksumPrefix).
std::string xxh64Hex(llvm::StringRef bytes);
std::string checksumOf(const Tensor &t);

// SHA-256 of a model's source text, as 64 lowercase hex digits.
std::string hashModelSource(llvm::StringRef source);

} // namespace mgc::runtime
