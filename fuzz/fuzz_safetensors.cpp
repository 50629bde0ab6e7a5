// libFuzzer target: any bytes as a safetensors file, then as a checkpoint
// (metadata and checksums). Errors are fine; crashes, hangs and leaks are
// not. Whatever decodes must encode and decode back to the same tensors.
#include "runtime/Checkpoint.h"
#include "runtime/SafeTensors.h"

#include <cstdlib>
#include <cstring>
#include <string>

using namespace mgc;
using namespace mgc::runtime;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  llvm::Expected<SafeTensorsContents> decoded =
      decodeSafeTensors(bytes, "fuzz.safetensors");
  if (!decoded) {
    llvm::consumeError(decoded.takeError());
    return 0;
  }
  llvm::Expected<CheckpointInfo> info =
      parseCheckpointMetadata(decoded->metadata, "fuzz.safetensors");
  if (!info)
    llvm::consumeError(info.takeError());
  llvm::Expected<std::string> again =
      encodeSafeTensors(decoded->tensors, decoded->metadata);
  if (!again) {
    // Decoding accepts what encoding refuses only for names: a tensor
    // named "" or "__metadata__" cannot be decoded either.
    llvm::consumeError(again.takeError());
    return 0;
  }
  llvm::Expected<SafeTensorsContents> back =
      decodeSafeTensors(*again, "fuzz2.safetensors");
  if (!back || back->tensors.size() != decoded->tensors.size() ||
      back->metadata != decoded->metadata)
    std::abort();
  for (const auto &[name, t] : decoded->tensors) {
    auto it = back->tensors.find(name);
    if (it == back->tensors.end() || it->second.type() != t.type() ||
        (t.nbytes() && std::memcmp(it->second.data(), t.data(), t.nbytes())))
      std::abort();
  }
  return 0;
}
