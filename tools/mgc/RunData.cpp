#include "tools/mgc/RunData.h"

#include "backend/Executable.h"
#include "frontend/Frontend.h"
#include "runtime/Checkpoint.h"
#include "runtime/DataArrays.h"
#include "runtime/DataPrefetch.h"
#include "runtime/DataSynthetic.h"
#include "runtime/DataTokens.h"
#include "support/InputFile.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstring>

namespace mgc::cli {

namespace {

ir::DType toIRDType(DType d) {
  switch (d) {
  case DType::F32:
    return ir::DType::F32;
  case DType::BF16:
    return ir::DType::BF16;
  case DType::F16:
    return ir::DType::F16;
  case DType::F64:
    return ir::DType::F64;
  case DType::I32:
    return ir::DType::I32;
  case DType::I64:
    return ir::DType::I64;
  }
  return ir::DType::F32;
}

DType toSessionDType(ir::DType d) {
  switch (d) {
  case ir::DType::F32:
    return DType::F32;
  case ir::DType::BF16:
    return DType::BF16;
  case ir::DType::F16:
    return DType::F16;
  case ir::DType::F64:
    return DType::F64;
  case ir::DType::I32:
    return DType::I32;
  case ir::DType::I64:
    return DType::I64;
  }
  return DType::F32;
}

// Ops through which integer ids pass unchanged in value: a range fixed
// downstream of them holds for the input too.
bool preservesValues(ir::OpKind kind) {
  return kind == ir::OpKind::Reshape || kind == ir::OpKind::Transpose ||
         kind == ir::OpKind::Slice || kind == ir::OpKind::Broadcast ||
         kind == ir::OpKind::Concat;
}

void noteRange(std::map<std::string, int64_t> &ranges, const std::string &name,
               int64_t bound) {
  if (bound <= 0)
    return;
  auto [it, inserted] = ranges.emplace(name, bound);
  if (!inserted)
    it->second = std::min(it->second, bound);
}

void collectIntRanges(const ir::Module &module, ModelFacts &facts) {
  const ir::Graph &graph = module.graph();
  // Values derived from each integer input without changing its values, in
  // graph order (operands come before their users).
  std::map<const ir::Value *, std::string> origin;
  for (ir::Value *input : graph.inputs())
    if (ir::isInteger(input->type().dtype))
      origin[input] = input->name();
  for (const auto &op : graph.ops()) {
    for (unsigned i = 0; i < op->numOperands(); ++i) {
      auto it = origin.find(op->operand(i));
      if (it == origin.end())
        continue;
      const std::string &name = it->second;
      if (op->kind() == ir::OpKind::Embedding && i == 1) {
        auto &table = op->operand(0)->type().shape;
        if (!table.empty())
          noteRange(facts.intRange, name, table[0]);
      } else if (op->kind() == ir::OpKind::CrossEntropy && i == 1) {
        auto &logits = op->operand(0)->type().shape;
        if (!logits.empty())
          noteRange(facts.intRange, name, logits.back());
      } else if (preservesValues(op->kind())) {
        origin[op->result()] = name;
      }
    }
  }
}

} // namespace

ModelFacts inspectModel(const std::string &path,
                        const std::map<std::string, std::string> &defines,
                        int64_t batchSize) {
  ModelFacts facts;
  std::string ignored;
  llvm::raw_string_ostream sink(ignored);
  DiagnosticEngine diag(sink);
  std::unique_ptr<ir::Module> module;
  std::unique_ptr<backend::Executable> exe;
  if (llvm::StringRef(path).endswith(".mgx")) {
    exe = backend::readExecutableFile(path, diag);
    if (!exe || !exe->module)
      return facts;
  } else {
    frontend::CompileOptions options;
    options.defines = defines;
    options.batchSize = batchSize;
    options.warnUnused = false;
    module = frontend::compileModelFile(path, options, diag);
    if (!module || diag.hasErrors())
      return facts;
  }
  const ir::Module &m = module ? *module : *exe->module;
  facts.read = true;
  facts.hasLoss = m.graph().lossOutput() != nullptr;
  facts.hasParams = !m.graph().params().empty();
  collectIntRanges(m, facts);
  auto number = [&](llvm::StringRef key) -> std::optional<double> {
    const ir::AttrValue *v = m.attrs().find(key);
    if (!v)
      return std::nullopt;
    if (auto *i = std::get_if<int64_t>(v))
      return static_cast<double>(*i);
    if (auto *d = std::get_if<double>(v))
      return *d;
    return std::nullopt;
  };
  if (auto steps = number("train.steps"); steps && *steps >= 1 && *steps < 9e15)
    facts.trainSteps = static_cast<int64_t>(*steps);
  if (auto seed = number("train.seed"); seed && *seed >= 0 && *seed < 1.8e19)
    facts.trainSeed = static_cast<uint64_t>(*seed);
  auto word = [&](llvm::StringRef key) {
    const ir::AttrValue *v = m.attrs().find(key);
    const std::string *s = v ? std::get_if<std::string>(v) : nullptr;
    return s ? *s : std::string();
  };
  facts.trainPrecision = word("train.precision");
  facts.compiled = exe != nullptr;
  return facts;
}

static bool hasInput(const std::vector<runtime::InputSpec> &inputs,
                     llvm::StringRef name) {
  for (const auto &i : inputs)
    if (i.name == name)
      return true;
  return false;
}

llvm::Expected<DataSetup> makeDataSource(const std::vector<TensorInfo> &inputs,
                                         const ModelFacts &facts,
                                         const DataChoice &choice) {
  std::vector<runtime::InputSpec> specs;
  for (const TensorInfo &info : inputs)
    specs.push_back(
        {info.name, ir::TensorType(toIRDType(info.dtype), info.shape)});
  DataSetup setup;
  if (!specs.empty() && !specs[0].type.shape.empty())
    setup.samplesPerStep = specs[0].type.shape[0];

  if (!choice.intRange.empty() &&
      (!choice.tokenFile.empty() || !choice.arrays.empty()))
    return runtime::dataError(
        "--int-range is for synthetic data; with " +
        llvm::Twine(choice.arrays.empty() ? "--text or --tokens" : "--data") +
        " the files give the values");
  if (!choice.tokenFile.empty()) {
    runtime::TokenSourceOptions options;
    options.path = choice.tokenFile;
    options.format = choice.tokenText  ? runtime::TokenFileFormat::TextBytes
                     : choice.tokenI32 ? runtime::TokenFileFormat::I32
                                       : runtime::TokenFileFormat::U16;
    options.tokensInput = !choice.tokensInput.empty() ? choice.tokensInput
                          : hasInput(specs, "tokens") ? "tokens"
                                                      : "idx";
    options.targetsInput =
        choice.targetsInput.empty() ? "targets" : choice.targetsInput;
    if (choice.positionsInput == "none")
      options.positionsInput = "";
    else if (!choice.positionsInput.empty())
      options.positionsInput = choice.positionsInput;
    else if (hasInput(specs, "pos"))
      options.positionsInput = "pos";
    auto vocab = facts.intRange.find(options.tokensInput);
    if (vocab != facts.intRange.end())
      options.vocabSize = vocab->second;
    options.seed = choice.seed;
    options.shuffle = choice.shuffle;
    auto tokens = runtime::findInput(specs, options.tokensInput, "tokens");
    if (!tokens)
      return tokens.takeError();
    setup.tokensPerStep = (*tokens)->type.size();
    auto source = runtime::makeTokenSource(specs, options);
    if (!source)
      return source.takeError();
    setup.source = std::move(*source);
    setup.description = std::string(choice.tokenText ? "text" : "tokens") +
                        " '" + choice.tokenFile + "'";
  } else if (!choice.arrays.empty()) {
    runtime::ArraySourceOptions options;
    options.seed = choice.seed;
    options.shuffle = choice.shuffle;
    options.intRange = facts.intRange;
    auto source = runtime::makeArraySource(specs, choice.arrays, options);
    if (!source)
      return source.takeError();
    setup.source = std::move(*source);
    setup.description = "arrays";
    for (const auto &b : choice.arrays)
      setup.description += " " + b.input + "='" + b.path + "'";
  } else {
    runtime::SyntheticOptions options;
    options.seed = choice.seed;
    for (const auto &[name, n] : choice.intRange) {
      auto input = runtime::findInput(specs, name, "--int-range");
      if (!input)
        return input.takeError();
      if (!ir::isInteger((*input)->type.dtype))
        return runtime::dataError(
            "--int-range " + name + "=" + llvm::Twine(n) + ": input '" + name +
            "' is " + (*input)->type.str() +
            "; --int-range sets the values of integer inputs (floats are "
            "normal)");
    }
    for (const auto &spec : specs) {
      if (!ir::isInteger(spec.type.dtype))
        continue;
      auto given = choice.intRange.find(spec.name);
      auto derived = facts.intRange.find(spec.name);
      options.intRange[spec.name] =
          given != choice.intRange.end()    ? given->second
          : derived != facts.intRange.end() ? derived->second
                                            : kDefaultIntRange;
    }
    auto source = runtime::makeSyntheticSource(specs, options);
    if (!source)
      return source.takeError();
    setup.source = std::move(*source);
    setup.description = "synthetic";
  }
  // Every value at once, before any step: a bad file stops the run before
  // it trains, not hours into it.
  if (llvm::Error err = setup.source->checkEveryValue())
    return err;
  setup.source = runtime::makePrefetchingSource(std::move(setup.source));
  return setup;
}

namespace {

// A file's size and a hash of three pieces of it; what cannot be read says
// so (the run reports the error when it opens the file).
std::string fileIdentity(const std::string &path) {
  auto file = InputFile::open(path, "data file");
  if (!file) {
    llvm::consumeError(file.takeError());
    return "unreadable";
  }
  constexpr uint64_t kPiece = 64 * 1024;
  uint64_t size = file->size();
  std::string pieces;
  for (uint64_t at :
       {uint64_t(0), size / 2, size > kPiece ? size - kPiece : 0}) {
    std::string piece(std::min(kPiece, size - std::min(at, size)), '\0');
    if (llvm::Error err = file->read(at, piece.size(), piece.data())) {
      llvm::consumeError(std::move(err));
      return "unreadable";
    }
    pieces += piece;
  }
  return std::to_string(size) + " B, " +
         runtime::hashModelSource(pieces).substr(0, 16);
}

} // namespace

std::string dataIdentity(const DataChoice &choice) {
  std::string out;
  if (!choice.tokenFile.empty()) {
    out = std::string(choice.tokenText  ? "text"
                      : choice.tokenI32 ? "i32 tokens"
                                        : "u16 tokens") +
          " (" + fileIdentity(choice.tokenFile) + ")";
  } else if (!choice.arrays.empty()) {
    out = "arrays";
    for (const runtime::ArrayBinding &a : choice.arrays)
      out += " " + a.input + " (" + fileIdentity(a.path) + ")";
  } else {
    out = "synthetic";
    for (const auto &[name, n] : choice.intRange)
      out += " " + name + " in [0, " + std::to_string(n) + ")";
  }
  return out + (choice.shuffle ? ", shuffled" : ", in order");
}

std::vector<OptionSpec> dataOptions() {
  return {
      {"--data", "NAME=FILE",
       "feed input NAME from the rows of a .npy file (every input needs "
       "one)",
       true},
      {"--text", "FILE", "language-model data: any file, one token per byte"},
      {"--tokens", "FILE",
       "language-model data: a flat binary file of tokens"},
      {"--token-dtype",
       "TYPE",
       "element type of --tokens (default u16)",
       false,
       {"u16", "i32"}},
      {"--tokens-input", "NAME",
       "input fed the tokens (default: tokens, else idx)"},
      {"--targets-input", "NAME",
       "input fed the next tokens (default: targets)"},
      {"--positions-input", "NAME",
       "input fed 0..T-1 (default: pos when the model has it; none: no "
       "such input)"},
  };
}

std::string parseDataChoice(const ParsedArgs &args, DataChoice &data) {
  for (const std::string &binding : args.getAll("--data")) {
    std::string name, path;
    if (!splitBinding(binding, name, path) || path.empty())
      return "--data expects NAME=FILE, got '" + binding + "'";
    data.arrays.push_back({name, path});
  }
  for (const std::string &binding : args.getAll("--int-range")) {
    std::string name, value;
    int64_t n = 0;
    if (!splitBinding(binding, name, value) || !parseInt(value, 1, n))
      return "--int-range expects NAME=N with N >= 1, got '" + binding + "'";
    data.intRange[name] = n;
  }
  int sources = !data.arrays.empty() + args.has("--text") + args.has("--tokens");
  if (sources > 1)
    return "--data, --text and --tokens are alternatives: give one of them";
  if (args.has("--token-dtype") && !args.has("--tokens"))
    return "--token-dtype applies to --tokens";
  if (args.has("--text"))
    data.tokenFile = args.get("--text");
  if (args.has("--tokens")) {
    data.tokenFile = args.get("--tokens");
    data.tokenText = false;
    data.tokenI32 = args.get("--token-dtype", "u16") == "i32";
  }
  data.tokensInput = args.get("--tokens-input");
  data.targetsInput = args.get("--targets-input");
  data.positionsInput = args.get("--positions-input");
  data.shuffle = !args.has("--no-shuffle");
  return "";
}

} // namespace mgc::cli
