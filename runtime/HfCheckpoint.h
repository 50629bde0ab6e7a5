// Hugging Face checkpoints on disk, as `save_pretrained` writes them: a
// folder with config.json and model.safetensors, or with
// model.safetensors.index.json and the files its "weight_map" names; or a
// lone .safetensors file that torch's writer marked ("format": "pt"), with
// the config.json beside it when there is one.
#pragma once

#include "runtime/SafeTensors.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <optional>
#include <string>

namespace mgc::runtime {

struct HfCheckpoint {
  TensorMap tensors;
  std::optional<llvm::json::Object> config; // config.json, where there is one
};

// Whether `path` is a folder, or a safetensors file that another writer
// than mgc marked with its "format" (mgc's checkpoints are read as such).
bool isHfCheckpoint(llvm::StringRef path);

// Reads the tensors and config.json; errors name the file.
llvm::Expected<HfCheckpoint> loadHfCheckpoint(llvm::StringRef path);

// Writes `folder`/model.safetensors (metadata "format": "pt", which
// transformers' loader asks for) and `folder`/config.json, each
// atomically, making the folder where it does not exist.
llvm::Error saveHfCheckpoint(llvm::StringRef folder, const TensorMap &tensors,
                             const llvm::json::Object &config);

} // namespace mgc::runtime
