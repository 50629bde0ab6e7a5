#include "runtime/DataTokens.h"

#include "support/InputFile.h"

#include <algorithm>
#include <cstring>
#include <optional>

namespace mgc::runtime {

namespace {

size_t tokenBytesOf(TokenFileFormat format) {
  return format == TokenFileFormat::U16   ? 2
         : format == TokenFileFormat::I32 ? 4
                                          : 1;
}

class TokenSource : public BatchSource {
public:
  TokenSource(std::vector<InputSpec> inputs, TokenSourceOptions options,
              InputFile file, int64_t numTokens, int64_t batch, int64_t context)
      : inputs_(std::move(inputs)), options_(std::move(options)),
        file_(std::move(file)), numTokens_(numTokens), batch_(batch),
        context_(context), windows_((numTokens - 1) / context) {}

  const std::vector<InputSpec> &inputs() const override { return inputs_; }
  int64_t position() const override { return step_; }
  std::optional<int64_t> batchesPerEpoch() const override {
    return windows_ / batch_;
  }

  llvm::Error seek(int64_t step) override {
    if (step < 0)
      return dataError("cannot seek token data to step " + llvm::Twine(step));
    step_ = step;
    return llvm::Error::success();
  }

  llvm::Error next(Batch &out) override;
  llvm::Error checkEveryValue() override;

private:
  // The vocabulary's size (0: unknown), and the error of token `v` at
  // `position` of the file when it is outside.
  int64_t vocabulary() const {
    return options_.format == TokenFileFormat::TextBytes ? 256
                                                         : options_.vocabSize;
  }
  std::optional<llvm::Error> outside(int64_t v, int64_t position) const {
    int64_t vocab = vocabulary();
    if (v >= 0 && (vocab <= 0 || v < vocab))
      return std::nullopt;
    return dataError(
        "'" + options_.path + "': token " + llvm::Twine(v) + " at position " +
        llvm::Twine(position) + " is outside the vocabulary [0, " +
        (vocab > 0 ? llvm::Twine(vocab) : llvm::Twine("2^31")) + ")");
  }
  size_t tokenBytes() const { return tokenBytesOf(options_.format); }
  // Token i of the bytes `p` read from the file.
  int64_t token(const char *p, int64_t i) const {
    switch (options_.format) {
    case TokenFileFormat::TextBytes:
      return static_cast<uint8_t>(p[i]);
    case TokenFileFormat::U16: {
      uint16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      return v;
    }
    case TokenFileFormat::I32: {
      int32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
    }
    return 0;
  }
  static void store(Tensor &t, int64_t i, int64_t v) {
    if (t.dtype() == ir::DType::I32)
      t.as<int32_t>()[i] = static_cast<int32_t>(v);
    else
      t.as<int64_t>()[i] = v;
  }

  std::vector<InputSpec> inputs_;
  TokenSourceOptions options_;
  InputFile file_;
  std::vector<char> window_; // the bytes of one window, read from the file
  int64_t numTokens_, batch_, context_, windows_;
  int64_t step_ = 0;
  int64_t permEpoch_ = -1;
  std::vector<int64_t> perm_;
};

llvm::Error TokenSource::next(Batch &out) {
  int64_t perEpoch = windows_ / batch_;
  int64_t epoch = step_ / perEpoch;
  int64_t first = (step_ % perEpoch) * batch_;
  if (options_.shuffle && epoch != permEpoch_) {
    perm_ = epochPermutation(windows_, options_.seed, epoch);
    permEpoch_ = epoch;
  }
  Batch batch;
  for (const InputSpec &input : inputs_) {
    Tensor t(input.type);
    if (input.name == options_.positionsInput) {
      for (int64_t i = 0; i < t.numel(); ++i)
        store(t, i, i % context_);
    } else {
      int64_t shift = input.name == options_.targetsInput ? 1 : 0;
      RowRange rows = rowsOf(input.name, batch_);
      for (int64_t b = rows.begin; b < rows.end; ++b) {
        int64_t window = options_.shuffle ? perm_[first + b] : first + b;
        int64_t start = window * context_ + shift;
        window_.resize(context_ * tokenBytes());
        if (llvm::Error err = file_.read(start * tokenBytes(), window_.size(),
                                         window_.data()))
          return err;
        for (int64_t i = 0; i < context_; ++i) {
          int64_t v = token(window_.data(), i);
          if (std::optional<llvm::Error> err = outside(v, start + i))
            return std::move(*err);
          store(t, b * context_ + i, v);
        }
      }
    }
    batch.emplace(input.name, std::move(t));
  }
  out = std::move(batch);
  ++step_;
  return llvm::Error::success();
}

llvm::Error TokenSource::checkEveryValue() {
  // The file in chunks of a million tokens.
  constexpr int64_t kChunk = 1 << 20;
  std::vector<char> bytes;
  for (int64_t first = 0; first < numTokens_; first += kChunk) {
    int64_t n = std::min(kChunk, numTokens_ - first);
    bytes.resize(static_cast<size_t>(n) * tokenBytes());
    if (llvm::Error err =
            file_.read(first * tokenBytes(), bytes.size(), bytes.data()))
      return err;
    for (int64_t i = 0; i < n; ++i)
      if (std::optional<llvm::Error> err =
              outside(token(bytes.data(), i), first + i))
        return std::move(*err);
  }
  return llvm::Error::success();
}

} // namespace

llvm::Expected<std::unique_ptr<BatchSource>>
makeTokenSource(std::vector<InputSpec> inputs, TokenSourceOptions options) {
  // Which inputs are fed, and their types.
  if (options.tokensInput.empty() || options.targetsInput.empty() ||
      options.tokensInput == options.targetsInput)
    return dataError("token data needs two distinct inputs for the tokens "
                     "and the targets");
  std::string file = "token file '" + options.path + "'";
  llvm::Expected<const InputSpec *> tokens =
      findInput(inputs, options.tokensInput, file + " (tokens)");
  if (!tokens)
    return tokens.takeError();
  llvm::Expected<const InputSpec *> targets =
      findInput(inputs, options.targetsInput, file + " (targets)");
  if (!targets)
    return targets.takeError();
  const ir::TensorType &tt = (*tokens)->type;
  if (tt.rank() != 2 || !ir::isInteger(tt.dtype) || tt.shape[0] <= 0 ||
      tt.shape[1] <= 0)
    return dataError("token input '" + options.tokensInput + "' is " +
                     tt.str() + "; token data feeds an integer [B, T] input");
  if ((*targets)->type != tt)
    return dataError("target input '" + options.targetsInput + "' is " +
                     (*targets)->type.str() + " but token input '" +
                     options.tokensInput + "' is " + tt.str() +
                     "; they must be equal");
  int64_t batch = tt.shape[0], context = tt.shape[1];
  if (!options.positionsInput.empty()) {
    llvm::Expected<const InputSpec *> positions =
        findInput(inputs, options.positionsInput, file + " (positions)");
    if (!positions)
      return positions.takeError();
    const ir::TensorType &pt = (*positions)->type;
    bool ok =
        ir::isInteger(pt.dtype) &&
        ((pt.rank() == 1 && pt.shape[0] == context) ||
         (pt.rank() == 2 && pt.shape[0] == batch && pt.shape[1] == context));
    if (!ok)
      return dataError("position input '" + options.positionsInput + "' is " +
                       pt.str() + "; it must be an integer [" +
                       llvm::Twine(context) + "] or [" + llvm::Twine(batch) +
                       ", " + llvm::Twine(context) + "]");
  }
  for (const InputSpec &input : inputs)
    if (input.name != options.tokensInput &&
        input.name != options.targetsInput &&
        input.name != options.positionsInput)
      return dataError("input '" + input.name + "' (" + input.type.str() +
                       ") is not fed by token data (which feeds '" +
                       options.tokensInput + "', '" + options.targetsInput +
                       "'" +
                       (options.positionsInput.empty()
                            ? std::string()
                            : ", '" + options.positionsInput + "'") +
                       ")");
  if (options.vocabSize < 0)
    return dataError("vocabulary size " + llvm::Twine(options.vocabSize) +
                     " is negative");

  llvm::Expected<InputFile> opened =
      InputFile::open(options.path, options.format == TokenFileFormat::TextBytes
                                        ? "text file"
                                        : "token file");
  if (!opened)
    return opened.takeError();
  size_t bytes = opened->size();
  // A .npy file's header would be read as tokens.
  char magic[6] = {};
  if (options.format != TokenFileFormat::TextBytes && bytes >= 6) {
    if (llvm::Error err = opened->read(0, 6, magic))
      return err;
    if (llvm::StringRef(magic, 6) == "\x93NUMPY")
      return dataError(
          "token file '" + options.path +
          "' is a .npy file: --tokens reads a flat binary file of tokens "
          "with no header (write one with numpy: "
          "array.astype(numpy.uint16).tofile(path))");
  }
  size_t tokenBytes = tokenBytesOf(options.format);
  if (bytes % tokenBytes)
    return dataError("token file '" + options.path + "' is " +
                     llvm::Twine(bytes) + " bytes, not a whole number of " +
                     llvm::Twine(tokenBytes) + "-byte tokens");
  int64_t numTokens = static_cast<int64_t>(bytes / tokenBytes);
  int64_t windows = numTokens > 0 ? (numTokens - 1) / context : 0;
  if (windows < batch)
    return dataError("token file '" + options.path + "' holds " +
                     llvm::Twine(numTokens) +
                     " tokens: " + llvm::Twine(windows) + " windows of " +
                     llvm::Twine(context + 1) +
                     " tokens, fewer than one batch of " + llvm::Twine(batch));
  return std::unique_ptr<BatchSource>(std::make_unique<TokenSource>(
      std::move(inputs), std::move(options), std::move(*opened), numTokens,
      batch, context));
}

} // namespace mgc::runtime
