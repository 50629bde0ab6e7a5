#include "tools/mgc/RunValidation.h"

#include "llvm/Support/Error.h"

namespace mgc::cli {

std::vector<OptionSpec> Validation::options() {
  return {
      {"--eval-every", "K",
       "every K steps and after the last, report the mean loss (and a "
       "classifier's accuracy) over --eval-data (where the training runs; its time is "
       "not counted in the training's rate)"},
      {"--eval-data", "FILE",
       "held-out data in the training data's form: a token file like "
       "--text/--tokens, else NAME=FILE.npy for each input",
       true},
      {"--eval-batches", "N",
       "evaluate the first N batches of --eval-data (default: every whole "
       "batch of it)"},
  };
}

std::string Validation::parse(const ParsedArgs &args,
                              const DataChoice &training,
                              std::optional<Validation> &out) {
  bool any = args.has("--eval-data") || args.has("--eval-batches");
  if (!args.has("--eval-every"))
    return any ? "--eval-data and --eval-batches need --eval-every K" : "";
  Validation v;
  if (!parseInt(args.get("--eval-every"), 1, v.every_))
    return "--eval-every expects an integer >= 1, got '" +
           args.get("--eval-every") + "'";
  if (args.has("--eval-batches") &&
      !parseInt(args.get("--eval-batches"), 1, v.maxBatches_))
    return "--eval-batches expects an integer >= 1, got '" +
           args.get("--eval-batches") + "'";
  std::vector<std::string> files = args.getAll("--eval-data");
  if (files.empty())
    return "--eval-every needs the held-out data: --eval-data FILE (a token "
           "file, for --text/--tokens) or --eval-data NAME=FILE.npy for each "
           "input";
  v.data_ = training;
  v.data_.shuffle = false;
  v.data_.arrays.clear();
  v.data_.intRange.clear();
  if (!training.tokenFile.empty()) {
    if (files.size() != 1)
      return "--eval-data takes one token file when training reads "
             "--text/--tokens, got " +
             std::to_string(files.size());
    v.data_.tokenFile = files[0];
  } else {
    for (const std::string &binding : files) {
      std::string name, path;
      if (!splitBinding(binding, name, path) || path.empty())
        return "--eval-data expects NAME=FILE.npy (training reads arrays or "
               "synthetic data), got '" +
               binding + "'";
      v.data_.arrays.push_back({name, path});
    }
  }
  out = std::move(v);
  return "";
}

std::vector<NamedPath> Validation::files() const {
  std::vector<NamedPath> files;
  if (!data_.tokenFile.empty())
    files.push_back({"the --eval-data file", data_.tokenFile});
  for (const auto &a : data_.arrays)
    files.push_back({"the --eval-data of " + a.input, a.path});
  return files;
}

llvm::Error Validation::open(const std::vector<TensorInfo> &inputs,
                             const ModelFacts &facts) {
  auto setup = makeDataSource(inputs, facts, data_);
  if (!setup)
    return setup.takeError();
  std::optional<int64_t> perPass = setup->source->batchesPerEpoch();
  batches_ = perPass ? *perPass : maxBatches_;
  if (maxBatches_ > 0 && maxBatches_ < batches_)
    batches_ = maxBatches_;
  if (batches_ <= 0)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "the data " + setup->description +
            " hold less than one batch of the model");
  description_ = std::to_string(batches_) +
                 (batches_ == 1 ? " batch of " : " batches of ") +
                 setup->description;
  source_ = std::move(setup->source);
  return llvm::Error::success();
}

llvm::Expected<EvalResult> Validation::run(Session &session) {
  if (auto err = source_->seek(0))
    return std::move(err);
  return evaluate(session, *source_, batches_);
}

} // namespace mgc::cli
