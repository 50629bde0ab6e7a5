#include "runtime/Checkpoint.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/xxhash.h"

namespace mgc::runtime {

static bool isChecksumKey(llvm::StringRef key) {
  return key.startswith(ckpt_keys::ChecksumPrefix);
}

static bool isReservedKey(llvm::StringRef key) {
  using namespace ckpt_keys;
  for (const char *k :
       {Format, FormatVersion, Step, Optimizer, Seed, RngState, SourceHash})
    if (key == k)
      return true;
  return isChecksumKey(key);
}

std::string xxh64Hex(llvm::StringRef bytes) {
  return llvm::utohexstr(llvm::xxHash64(bytes), /*LowerCase=*/true,
                         /*Width=*/16);
}

std::string checksumOf(const Tensor &t) {
  return xxh64Hex(
      llvm::StringRef(reinterpret_cast<const char *>(t.data()), t.nbytes()));
}

// Every tensor has a checksum and matches it, or the file has none at all
// (written before checksums, or by another tool).
static llvm::Error verifyChecksums(const TensorMap &tensors,
                                   const StringMap &metadata,
                                   llvm::StringRef fileName) {
  auto fail = [&](const llvm::Twine &msg) {
    return llvm::createStringError(std::errc::invalid_argument,
                                   "invalid checkpoint '%s': %s",
                                   fileName.str().c_str(), msg.str().c_str());
  };
  bool any = false;
  for (const auto &[key, value] : metadata) {
    if (!isChecksumKey(key))
      continue;
    any = true;
    llvm::StringRef name = llvm::StringRef(key).drop_front(
        llvm::StringRef(ckpt_keys::ChecksumPrefix).size());
    if (!tensors.count(name.str()))
      return fail("metadata \"" + key + "\" is the checksum of a tensor '" +
                  name + "' the file does not hold");
  }
  if (!any)
    return llvm::Error::success();
  for (const auto &[name, tensor] : tensors) {
    auto it = metadata.find(ckpt_keys::ChecksumPrefix + name);
    if (it == metadata.end())
      return fail("tensor '" + name +
                  "' has no checksum, though the others "
                  "have");
    std::string actual = checksumOf(tensor);
    if (it->second != actual)
      return fail("tensor '" + name + "' does not match its checksum (xxh64 " +
                  it->second + " stored, " + actual +
                  " of its bytes): the file is corrupted");
  }
  return llvm::Error::success();
}

StringMap checkpointMetadata(const CheckpointInfo &info) {
  using namespace ckpt_keys;
  StringMap m;
  for (const auto &[key, value] : info.extra)
    if (!isReservedKey(key))
      m[key] = value;
  m[Format] = "mgc";
  m[FormatVersion] = std::to_string(kCheckpointFormatVersion);
  m[Step] = std::to_string(info.step);
  m[Optimizer] = info.optimizer;
  m[Seed] = std::to_string(info.seed);
  m[RngState] = info.rngState;
  m[SourceHash] = info.sourceHash;
  return m;
}

llvm::Expected<CheckpointInfo>
parseCheckpointMetadata(const StringMap &metadata, llvm::StringRef fileName) {
  using namespace ckpt_keys;
  auto fail = [&](const llvm::Twine &msg) {
    return llvm::createStringError(std::errc::invalid_argument,
                                   "invalid checkpoint '%s': %s",
                                   fileName.str().c_str(), msg.str().c_str());
  };
  CheckpointInfo info;
  // A file another library wrote (safetensors' Python writers put their
  // framework there: "pt", "np", "flax") is tensors without a training
  // state: none of its metadata is ours to read.
  if (auto format = metadata.find(Format);
      format != metadata.end() && format->second != "mgc") {
    info.foreignFormat = format->second;
    return info;
  }
  for (const auto &[key, value] : metadata) {
    llvm::StringRef v = value;
    if (key == Format) {
      continue;
    } else if (key == FormatVersion) {
      int64_t version;
      if (v.getAsInteger(10, version) || version < 1)
        return fail("metadata \"format_version\" '" + v +
                    "' is not a positive integer");
      if (version > kCheckpointFormatVersion)
        return fail("format version " + v +
                    " is newer than this build reads (" +
                    llvm::Twine(kCheckpointFormatVersion) + ")");
    } else if (key == Step) {
      if (v.getAsInteger(10, info.step) || info.step < 0)
        return fail("metadata \"step\" '" + v +
                    "' is not a non-negative integer");
    } else if (key == Seed) {
      if (v.getAsInteger(10, info.seed))
        return fail("metadata \"seed\" '" + v +
                    "' is not an unsigned 64-bit integer");
    } else if (key == Optimizer) {
      info.optimizer = value;
    } else if (key == RngState) {
      info.rngState = value;
    } else if (key == SourceHash) {
      info.sourceHash = value;
    } else if (isChecksumKey(key)) {
      continue; // checked against the tensors by loadCheckpoint
    } else {
      info.extra[key] = value;
    }
  }
  return info;
}

llvm::Error saveCheckpoint(llvm::StringRef path, const Checkpoint &checkpoint) {
  for (const auto &entry : checkpoint.info.extra)
    if (isReservedKey(entry.first))
      return llvm::createStringError(
          std::errc::invalid_argument,
          "cannot write '%s': metadata key '%s' is reserved",
          path.str().c_str(), entry.first.c_str());
  StringMap metadata = checkpointMetadata(checkpoint.info);
  for (const auto &[name, tensor] : checkpoint.tensors)
    metadata[ckpt_keys::ChecksumPrefix + name] = checksumOf(tensor);
  return saveSafeTensors(path, checkpoint.tensors, metadata);
}

llvm::Expected<Checkpoint> loadCheckpoint(llvm::StringRef path,
                                          llvm::StringRef what) {
  llvm::Expected<SafeTensorsContents> contents = loadSafeTensors(path, what);
  if (!contents)
    return contents.takeError();
  if (llvm::Error err =
          verifyChecksums(contents->tensors, contents->metadata, path))
    return err;
  llvm::Expected<CheckpointInfo> info =
      parseCheckpointMetadata(contents->metadata, path);
  if (!info)
    return info.takeError();
  Checkpoint checkpoint;
  checkpoint.info = std::move(*info);
  checkpoint.tensors = std::move(contents->tensors);
  return checkpoint;
}

std::string hashModelSource(llvm::StringRef source) {
  std::array<uint8_t, 32> digest = llvm::SHA256::hash(llvm::ArrayRef<uint8_t>(
      reinterpret_cast<const uint8_t *>(source.data()), source.size()));
  return llvm::toHex(digest, /*LowerCase=*/true);
}

} // namespace mgc::runtime
