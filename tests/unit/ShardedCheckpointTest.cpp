// Sharded checkpoints as transactions (runtime/ShardedCheckpoint): the
// index lists each shard's step and digest, a shard of another save is
// refused by name, and a save removes exactly the earlier saves' shards.
#include "runtime/ShardedCheckpoint.h"
#include "DataTestSupport.h"

#include "llvm/Support/FileSystem.h"

#include <doctest/doctest.h>

#include <fstream>

using namespace mgc;
using mgc::testing::TempDir;

namespace {

// Tensor "w" f32[4], split in two halves, one per rank, at `step` with
// values `base + i`; returns the index's path.
std::string saveTwoShards(const TempDir &dir, const std::string &name,
                          int64_t step, float base) {
  std::string index = dir.file(name);
  std::map<std::string, ir::TensorType> types{
      {"w", ir::TensorType(ir::DType::F32, {4})}};
  runtime::CheckpointInfo info;
  info.step = step;
  std::vector<runtime::ShardEntry> shards;
  for (int rank = 0; rank < 2; ++rank) {
    runtime::TensorSlab slab{
        "w", {2 * rank}, runtime::Tensor(ir::TensorType(ir::DType::F32, {2}))};
    for (int i = 0; i < 2; ++i)
      slab.data.set(i, base + 2 * rank + i);
    std::string path = runtime::shardPath(index, rank, 2, step);
    auto digest = runtime::saveShard(path, {slab}, types, info);
    REQUIRE(digest);
    runtime::ShardEntry entry{llvm::sys::path::filename(path).str(), step,
                              *digest};
    entry.slabs.push_back(
        {"w", runtime::slabKey(slab, {4}), entry.file, slab.offsets});
    shards.push_back(entry);
  }
  llvm::Error err = runtime::saveShardIndex(index, types, shards, info);
  REQUIRE_FALSE(static_cast<bool>(err));
  return index;
}

std::string loadError(const std::string &index) {
  auto loaded = runtime::loadShardedCheckpoint(index);
  return loaded ? "" : llvm::toString(loaded.takeError());
}

void copyFile(const std::string &from, const std::string &to) {
  REQUIRE_FALSE(static_cast<bool>(llvm::sys::fs::copy_file(from, to)));
}

} // namespace

TEST_CASE("sharded checkpoint: shards are named by step, listed with their "
          "digest, and another save's shard is refused by name") {
  TempDir dir;
  std::string index = saveTwoShards(dir, "run.ckpt", 3, 10);
  CHECK(runtime::shardPath(index, 1, 2, 3) ==
        index + ".step3.rank00001-of-00002.safetensors");
  auto loaded = runtime::loadShardedCheckpoint(index);
  REQUIRE(loaded);
  CHECK(loaded->tensors.at("w").get(3) == 13);

  // A shard of a later step copied over rank 1's.
  std::string later = saveTwoShards(dir, "later.ckpt", 4, 10);
  std::string rank1 = runtime::shardPath(index, 1, 2, 3);
  std::string kept = dir.file("kept");
  copyFile(rank1, kept);
  copyFile(runtime::shardPath(later, 1, 2, 4), rank1);
  CHECK(loadError(index).find("checkpoint shard '" + rank1 +
                              "' holds step 4, but its index '" + index +
                              "' is of step 3") == 0);
  // A shard of the same step with other contents.
  std::string other = saveTwoShards(dir, "other.ckpt", 3, 20);
  copyFile(runtime::shardPath(other, 1, 2, 3), rank1);
  CHECK(loadError(index).find("checkpoint shard '" + rank1 +
                              "' is not the one its index '" + index +
                              "' was written with") == 0);
  copyFile(kept, rank1);
  CHECK(loadError(index) == "");
}

TEST_CASE("sharded checkpoint: a save removes the earlier saves' shards of "
          "the same index and nothing else") {
  TempDir dir;
  std::string index = dir.file("run.ckpt");
  std::vector<std::string> files{
      "run.ckpt.step2.rank00000-of-00002.safetensors", // an earlier save
      "run.ckpt.rank00001-of-00004.safetensors",       // named before steps
      "run.ckpt.step3.rank00000-of-00002.safetensors", // this save's
      "run.ckpt.step3.rank00001-of-00002.safetensors",
      "run.ckpt.notes",                                 // not a shard
      "run.ckpt.stepx.rank00000-of-00002.safetensors",  // not one either
      "other.ckpt.step2.rank00000-of-00002.safetensors" // another index's
  };
  for (const std::string &f : files)
    mgc::testing::writeBytes(dir.file(f), "x");
  runtime::removeOtherShards(index, {files[2], files[3]});
  for (size_t i = 0; i < files.size(); ++i) {
    CAPTURE(files[i]);
    CHECK(llvm::sys::fs::exists(dir.file(files[i])) == (i >= 2));
  }
}
