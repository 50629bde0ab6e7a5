// Checkpoints of a job of several processes (docs/checkpoints.md,
// "Sharded checkpoints"): each rank writes one safetensors file with the
// parts of the tensors its devices hold, each part once (a part replicated
// on an axis is written by the device at coordinate 0 there), and rank 0
// writes last an index in the style of Hugging Face's
// model.safetensors.index.json that maps every key to its file and every
// tensor to the slabs that make it. Loading reassembles whole tensors, so
// any mesh, process count or a single process can resume.
#pragma once

#include "runtime/Checkpoint.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mgc::runtime {

// A box of a tensor: where it starts in the whole tensor, per dimension,
// and its elements (of the box's shape).
struct TensorSlab {
  std::string name;
  std::vector<int64_t> offsets;
  Tensor data;
};

// The key of a slab in its shard: NAME when it is the whole tensor of
// `whole`'s shape, else NAME[a:b,c:d] (the half-open ranges it covers).
std::string slabKey(const TensorSlab &slab, llvm::ArrayRef<int64_t> whole);

// The file of rank `rank` of `ranks` beside the index at `indexPath`:
// "<indexPath>.rank00001-of-00004.safetensors".
std::string shardPath(llvm::StringRef indexPath, int rank, int ranks);

// Writes one rank's shard atomically, with the checkpoint's metadata.
// `whole` gives each tensor's whole shape (for the keys).
llvm::Error saveShard(llvm::StringRef path,
                      const std::vector<TensorSlab> &slabs,
                      const std::map<std::string, ir::TensorType> &whole,
                      const CheckpointInfo &info);

// One slab as the index lists it.
struct SlabEntry {
  std::string name, key, file; // file: relative to the index's folder
  std::vector<int64_t> offsets;
};

// The index, atomically: {"metadata": {the checkpoint's metadata},
// "weight_map": {key: file}, "tensors": {name: {"dtype", "shape", "slabs":
// [{"key", "file", "offsets"}]}}}.
llvm::Error saveShardIndex(llvm::StringRef path,
                           const std::map<std::string, ir::TensorType> &types,
                           const std::vector<SlabEntry> &slabs,
                           const CheckpointInfo &info);

// Whether `path` is an index (its first byte opens a JSON object) rather
// than a safetensors file (whose first 8 bytes are a length).
bool isShardIndex(llvm::StringRef path);

// Reads an index and its shards and reassembles every tensor whole. Errors
// name the file and what is wrong: a missing shard or key, a slab outside
// its tensor or of another dtype, a tensor its slabs do not cover exactly.
llvm::Expected<Checkpoint> loadShardedCheckpoint(llvm::StringRef indexPath);

// The slab entries of `slabs` as JSON text (what each rank sends rank 0)
// and back.
std::string slabEntriesToJson(const std::vector<SlabEntry> &entries);
llvm::Expected<std::vector<SlabEntry>>
slabEntriesFromJson(llvm::StringRef text);

} // namespace mgc::runtime
