// Hugging Face checkpoints in a model's own names. A name map, written as
// JSON beside the model file (samples/gpt.hf.json), says which tensor of a
// `transformers` checkpoint holds which parameter and how its layout
// differs (a fused q/k/v matrix, torch's [out, in] Linear weights, a padded
// vocabulary, a longer position table), and which config.json entries must
// agree with which of the model's constants. importHf applies a map to a
// checkpoint's tensors; exportHf goes back. docs/checkpoints.md describes
// the format.
#pragma once

#include "runtime/SafeTensors.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mgc::runtime {

// One tensor of the checkpoint and the parameters it holds.
struct HfTensorRule {
  // Its name; "{i}" stands for a layer's index (0 .. the layers - 1).
  std::string hf;
  // The parameter it holds, or (with `split`) the parameters whose values
  // it holds one after the other; an empty name is a part the model has
  // no parameter for (dropped on import, zeros on export: `why` says why
  // that is sound).
  std::vector<std::string> mgc;
  int64_t split = -1;     // the dimension the parts follow each other on
  bool transpose = false; // held as [out, in] (torch's Linear), used [in, out]
  int64_t padDim = -1;    // may be longer in the model: zero rows on import
  int64_t truncateDim = -1; // may be shorter in the model: leading rows taken
  std::string why;
};

// A config.json entry and the model's constant of the same size.
struct HfConfigEntry {
  std::string key;
  std::string constant;
  // The model's constant may exceed the checkpoint's (a vocabulary padded
  // to a multiple of 64) or fall short of it (a shorter context): the
  // tensor rules' padDim and truncateDim.
  enum class Relation { Equal, ModelMayBeLarger, ModelMayBeSmaller };
  Relation relation = Relation::Equal;
};

struct HfMap {
  std::string path; // where it was read, for errors
  std::string modelType;
  std::vector<std::string> architectures;
  // A prefix that a checkpoint's names may carry ("transformer."); export
  // writes it.
  std::string prefix;
  std::string layers; // the constant that counts the layers ("L")
  std::vector<HfConfigEntry> config;
  // config.json entries the model's code fixes (its activation, its norm's
  // epsilon): a checkpoint with another value is refused; export writes
  // them.
  llvm::json::Object fixed;
  std::vector<HfTensorRule> tensors;
  std::vector<std::string> ignore; // buffers the model recomputes
  // (name, the tensor it must equal): a head tied to the embedding; not
  // written on export (transformers ties them).
  std::vector<std::pair<std::string, std::string>> tied;
};

// Reads and checks a map; errors name the file and the entry.
llvm::Expected<HfMap> parseHfMap(llvm::StringRef text, llvm::StringRef path);
llvm::Expected<HfMap> loadHfMap(llvm::StringRef path);

// The model's constants as compiled (integers as integers).
using ModelConstants = std::map<std::string, llvm::json::Value>;
// The model's parameters and their types.
using ParamTypes = std::map<std::string, ir::TensorType>;

struct HfImport {
  TensorMap tensors;               // by parameter name, in its type
  std::vector<std::string> notes;  // what was padded, cut or dropped
  std::vector<std::string> unused; // tensors no rule takes
};

// The parameters a checkpoint's tensors hold. `config` (config.json; null
// without one) is checked against `constants` first, so that a checkpoint
// of another size is refused with the -D flags that make the model fit.
// Tensors are converted to their parameter's element type.
llvm::Expected<HfImport> importHf(const HfMap &map, const TensorMap &tensors,
                                  const llvm::json::Object *config,
                                  const ParamTypes &params,
                                  const ModelConstants &constants,
                                  llvm::StringRef checkpoint);

struct HfExportOptions {
  // The vocabulary to write (the padDim tensors cut to it); unset: the
  // model's.
  std::optional<int64_t> vocabulary;
  ir::DType dtype = ir::DType::F32;
};

struct HfExport {
  TensorMap tensors;
  llvm::json::Object config;
};

// The checkpoint of the parameters `params` (every one the map names must
// be there) and its config.json.
llvm::Expected<HfExport> exportHf(const HfMap &map, const TensorMap &params,
                                  const ModelConstants &constants,
                                  const HfExportOptions &options);

} // namespace mgc::runtime
