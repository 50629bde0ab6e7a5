// Where `mgc run` gets its batches: synthetic data, .npy files bound to
// inputs, or a language-model token stream, chosen from the command line;
// and what the training loop needs to know about the model for that.
#pragma once

#include "runtime/DataArrays.h"
#include "tools/mgc/Options.h"

#include "mgc/Session.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mgc::cli {

// Facts read from the model's IR that the session API does not expose.
struct ModelFacts {
  // For each integer input whose use fixes its range: the exclusive upper
  // bound (the table rows of an embedding, the class count of a
  // cross_entropy). The smallest bound when there are several uses.
  std::map<std::string, int64_t> intRange;
  // The train section's steps and seed, when the model file sets them.
  std::optional<int64_t> trainSteps;
  std::optional<uint64_t> trainSeed;
  // The train section's precision ("fp32", "bf16"), empty when unset.
  std::string trainPrecision;
  // Whether the model is a compiled executable (its schedule is fixed).
  bool compiled = false;
  // Whether the model was read, and what there is to train: a loss output
  // and parameters (for .mgx: a training step).
  bool read = false;
  bool hasLoss = false, hasParams = false;
};

// Compiles (.mg) or reads (.mgx) the model once more to learn its facts.
// Errors are not reported here: the session reports them.
ModelFacts inspectModel(const std::string &path,
                        const std::map<std::string, std::string> &defines,
                        int64_t batchSize);

struct DataChoice {
  // --data NAME=FILE, in order.
  std::vector<runtime::ArrayBinding> arrays;
  // --text FILE or --tokens FILE (with the format).
  std::string tokenFile;
  bool tokenText = true;
  bool tokenI32 = false;
  // Input names for the token stream; empty: chosen from the model.
  std::string tokensInput, targetsInput, positionsInput;
  // --int-range NAME=N for synthetic integer inputs.
  std::map<std::string, int64_t> intRange;
  uint64_t seed = 0;
  bool shuffle = true;
};

// The flags that choose a data file (--data, --text, --tokens and the
// token stream's --token-dtype and input names), shared by mgc run and mgc
// eval.
std::vector<OptionSpec> dataOptions();
// Reads those flags (and --int-range, --no-shuffle where the command has
// them) into `choice`; returns the usage error, empty when there is none.
std::string parseDataChoice(const ParsedArgs &args, DataChoice &choice);

// What identifies the data `choice` reads, for the ranks of a job to
// compare (SessionOptions::sameOnEveryRank): the source and how it is read,
// and each file's size and a hash of its first, middle and last 64 KiB
// (the contents, not the paths, which may differ between machines).
std::string dataIdentity(const DataChoice &choice);

// Integer inputs whose use does not fix a range hold [0, 2) unless
// --int-range says otherwise.
constexpr int64_t kDefaultIntRange = 2;

struct DataSetup {
  std::unique_ptr<runtime::BatchSource> source;
  // Tokens per step for a language model, 0 otherwise (then samples).
  int64_t tokensPerStep = 0;
  int64_t samplesPerStep = 1;
  std::string description; // "synthetic", "text 'a.txt'", ...
};

// Builds the source (with background prefetch) for the session's inputs.
llvm::Expected<DataSetup> makeDataSource(const std::vector<TensorInfo> &inputs,
                                         const ModelFacts &facts,
                                         const DataChoice &choice);

} // namespace mgc::cli
