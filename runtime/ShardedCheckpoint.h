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

// The file of rank `rank` of `ranks` for the save of step `step` beside the
// index at `indexPath`: "<indexPath>.step3.rank00001-of-00004.safetensors".
// Each save writes files of its own, so that a save that stops half way
// leaves the index before it and that index's shards as they were.
std::string shardPath(llvm::StringRef indexPath, int rank, int ranks,
                      int64_t step);

// A digest of a shard's contents (XXH64 of its keys and their tensors'
// bytes), 16 hex digits: the index lists it, so that a shard of another save
// is recognised.
std::string shardDigest(const TensorMap &tensors);

// Writes one rank's shard atomically, with the checkpoint's metadata.
// `whole` gives each tensor's whole shape (for the keys). Returns its
// digest.
llvm::Expected<std::string>
saveShard(llvm::StringRef path, const std::vector<TensorSlab> &slabs,
          const std::map<std::string, ir::TensorType> &whole,
          const CheckpointInfo &info);

// One slab as the index lists it.
struct SlabEntry {
  std::string name, key, file; // file: relative to the index's folder
  std::vector<int64_t> offsets;
};

// One shard as the index lists it, and the slabs it holds: what each rank
// sends rank 0 after writing its shard.
struct ShardEntry {
  std::string file; // relative to the index's folder
  int64_t step = 0;
  std::string digest;
  std::vector<SlabEntry> slabs;
};

// The index, atomically, written after every shard: {"metadata": {the
// checkpoint's metadata}, "shards": [{"file", "step", "digest"}],
// "weight_map": {key: file}, "tensors": {name: {"dtype", "shape", "slabs":
// [{"key", "file", "offsets"}]}}}.
llvm::Error saveShardIndex(llvm::StringRef path,
                           const std::map<std::string, ir::TensorType> &types,
                           const std::vector<ShardEntry> &shards,
                           const CheckpointInfo &info);

// After the index at `indexPath` was written: removes the shards of earlier
// saves to the same path that this process can see (files named as
// shardPath names them, or as before steps were in the name), except
// `keep` (file names). Errors are ignored: another rank may have removed a
// file first, and a file left over is never read.
void removeOtherShards(llvm::StringRef indexPath,
                       const std::vector<std::string> &keep);

// Whether `path` is an index (its first byte opens a JSON object) rather
// than a safetensors file (whose first 8 bytes are a length).
bool isShardIndex(llvm::StringRef path);

// Reads an index and its shards and reassembles every tensor whole. Errors
// name the file and what is wrong: a missing shard or key, a shard of
// another step or save than the index lists (a save that stopped half way,
// a file copied in), a slab outside its tensor or of another dtype, a
// tensor its slabs do not cover exactly.
llvm::Expected<Checkpoint> loadShardedCheckpoint(llvm::StringRef indexPath);

// A shard entry as JSON text (what each rank sends rank 0) and back.
std::string shardEntryToJson(const ShardEntry &entry);
llvm::Expected<ShardEntry> shardEntryFromJson(llvm::StringRef text);

} // namespace mgc::runtime
