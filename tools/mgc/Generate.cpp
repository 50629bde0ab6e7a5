// mgc generate: continues a prompt with a trained language model, one token
// at a time, with a key/value cache (Session::startDecoding) or, with
// --no-cache, by running the whole forward program on the context for every
// token.
#include "tools/mgc/Commands.h"
#include "tools/mgc/RunData.h"
#include "tools/mgc/RunStart.h"
#include "tools/mgc/Sampling.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <mgc/Session.h>

#include <chrono>
#include <cstdint>
#include <functional>

namespace mgc::cli {

namespace {

int generateError(const std::string &message, int code = kUserError) {
  return commandError("generate", message, code);
}

int usage(const std::string &message) {
  return generateError(message, kUsageError);
}

const TensorInfo *findInfo(const std::vector<TensorInfo> &infos,
                           const std::string &name) {
  for (const TensorInfo &t : infos)
    if (t.name == name)
      return &t;
  return nullptr;
}

std::string listNames(const std::vector<TensorInfo> &infos) {
  std::string names;
  for (const TensorInfo &t : infos)
    names += (names.empty() ? "" : ", ") + t.name;
  return names.empty() ? "none" : names;
}

// The prompt's token ids: the bytes of --prompt, or the list of
// --prompt-tokens.
std::string readPrompt(const ParsedArgs &args, std::vector<int64_t> &ids) {
  if (args.has("--prompt") == args.has("--prompt-tokens"))
    return "give the prompt: --prompt TEXT (a byte-level model: one token per "
           "byte) or --prompt-tokens ID,ID,...";
  if (args.has("--prompt")) {
    for (unsigned char byte : args.get("--prompt"))
      ids.push_back(byte);
  } else {
    std::string why =
        args.getIntList("--prompt-tokens", 0, INT32_MAX, "token ids >= 0", ids);
    if (!why.empty())
      return why;
  }
  if (ids.empty())
    return "the prompt is empty: give at least one token";
  return "";
}

} // namespace

const CommandSpec &generateSpec() {
  static const CommandSpec spec = [] {
    CommandSpec s;
    s.name = "generate";
    s.usage = "mgc generate MODEL.mg [--resume CKPT] [-D NAME=VALUE]...\n"
              "       (--prompt TEXT | --prompt-tokens ID,...) [--max-tokens "
              "N] [--temperature X]\n"
              "       [--top-k K] [--seed S] [--no-cache] [--threads N]";
    s.summary = "Continue a prompt with a language model, one token at a "
                "time.";
    s.positionalName = "a model file (MODEL.mg)";
    s.minPositionals = s.maxPositionals = 1;
    s.options = {
        {"--resume", "CKPT",
         "the checkpoint whose parameters generate: one mgc saved, or a "
         "Hugging Face checkpoint through the model's name map (without it, "
         "the initial parameters of --seed)"},
        hfMapOption(),
        {"--prompt", "TEXT",
         "the prompt as text, one token per byte (a byte-level model, as "
         "mgc run --text trains); the output is text"},
        {"--prompt-tokens", "ID,...",
         "the prompt as token ids; the output is token ids"},
        {"--max-tokens", "N",
         "tokens to generate (default 64; fewer when the sequence reaches "
         "the model's context)"},
        {"--temperature", "X",
         "divide the logits by X before sampling; 0 is greedy (default 1)"},
        {"--top-k", "K",
         "sample among the K most likely tokens (default 0: all)"},
        {"--seed", "S",
         "seed of the sampling and, without --resume, of the parameters "
         "(default 0)"},
        {"--no-cache", "",
         "run the whole forward program on the context for each token "
         "instead of decoding one position with the key/value cache (the "
         "reference: slower, the same tokens)"},
        {"--tokens-input", "NAME",
         "input fed the tokens (default: tokens, "
         "else idx)"},
        {"--positions-input", "NAME",
         "input fed the positions (default: pos when the model has it; none: "
         "no such input)"},
        {"--logits-output", "NAME",
         "output holding the logits [..., T, V] (default logits)"},
        {"--threads", "N", "CPU worker threads (default: one per core)"},
    };
    // The model's sizes come first.
    std::vector<OptionSpec> sizes = modelSizeOptions();
    s.options.insert(s.options.begin(), sizes.begin(), sizes.end());
    s.details =
        "Every sequence of the model's batch (the tokens input's leading\n"
        "axes) starts from the prompt and is sampled with its own draws;\n"
        "each is printed (--batch-size 1 for one). The sequence stops after\n"
        "--max-tokens new tokens or when it fills the model's context (the\n"
        "tokens input's last axis). With --prompt, tokens are bytes: only\n"
        "the first 256 logits are sampled. A summary with the time per\n"
        "token goes to standard error. The key/value cache needs every op\n"
        "that mixes positions to be a causal attention (docs/generate.md);\n"
        "--no-cache decodes any model. Runs on the CPU, on one device.";
    return s;
  }();
  return spec;
}

int runGenerate(llvm::ArrayRef<std::string> rawArgs) {
  int exitCode = kSuccess;
  auto args = parseCommandArgs(generateSpec(), rawArgs, exitCode);
  if (!args)
    return exitCode;
  const std::string modelPath = args->positionals[0];

  SessionOptions options;
  options.hfMap = args->get("--hf-map");
  if (std::string why =
          parseModelSizes(*args, options.defines, options.batchSize);
      !why.empty())
    return usage(why);
  int64_t seed = 0, maxTokens = 64;
  SamplingOptions sampling;
  if (std::string why = parseThreads(*args, options.threads); !why.empty())
    return usage(why);
  if (args->has("--seed") && !parseInt(args->get("--seed"), 0, seed))
    return usage("--seed expects an integer >= 0, got '" +
                 args->get("--seed") + "'");
  if (args->has("--max-tokens") &&
      !parseInt(args->get("--max-tokens"), 1, maxTokens))
    return usage("--max-tokens expects an integer >= 1, got '" +
                 args->get("--max-tokens") + "'");
  if (args->has("--temperature") &&
      (!parseNumber(args->get("--temperature"), sampling.temperature) ||
       sampling.temperature < 0))
    return usage("--temperature expects a number >= 0, got '" +
                 args->get("--temperature") + "'");
  if (args->has("--top-k") &&
      !parseInt(args->get("--top-k"), 0, sampling.topK))
    return usage("--top-k expects an integer >= 0, got '" +
                 args->get("--top-k") + "'");
  std::vector<int64_t> prompt;
  if (std::string why = readPrompt(*args, prompt); !why.empty())
    return usage(why);
  const bool text = args->has("--prompt");
  options.seed = static_cast<uint64_t>(seed);

  auto session = Session::create(modelPath, options);
  if (!session)
    return generateError(session.status().message());
  Session &s = **session;
  // The parameters by name, as --init-from reads them: the batch size (and
  // so the model hash) of generation is not training's.
  if (args->has("--resume"))
    if (auto report = loadEveryParameter(s, args->get("--resume")); !report)
      return generateError(report.status().message());

  // The inputs that make the model a language model.
  std::vector<TensorInfo> inputs = s.inputs();
  DecodeOptions names;
  names.tokensInput = args->get("--tokens-input", findInfo(inputs, "tokens")
                                                      ? "tokens"
                                                      : "idx");
  std::string positions = args->get("--positions-input");
  names.positionsInput = positions == "none" ? ""
                         : !positions.empty() ? positions
                         : findInfo(inputs, "pos") ? "pos"
                                                   : "";
  names.logitsOutput = args->get("--logits-output", "logits");
  const TensorInfo *tokens = findInfo(inputs, names.tokensInput);
  if (!tokens || (tokens->dtype != DType::I32) || tokens->shape.empty())
    return generateError(
        "'" + modelPath + "' is not a language model mgc can generate from: " +
        (tokens ? "its input '" + names.tokensInput +
                      "' is not an i32 tensor of token ids"
                : "it has no input " +
                      (args->has("--tokens-input")
                           ? "'" + names.tokensInput + "'"
                           : std::string("'tokens' or 'idx'")) +
                      " of token ids (its inputs: " + listNames(inputs) +
                      "; name it with --tokens-input)"));
  const int64_t context = tokens->shape.back();
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < tokens->shape.size(); ++i)
    rows *= tokens->shape[i];
  if (static_cast<int64_t>(prompt.size()) > context)
    return generateError("the prompt has " + std::to_string(prompt.size()) +
                         " tokens, more than the model's context of " +
                         std::to_string(context) + " (input '" +
                         names.tokensInput + "' holds " +
                         std::to_string(context) + " positions)");

  std::vector<std::vector<int64_t>> seqs(static_cast<size_t>(rows), prompt);
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  // Appends a sampled token to every sequence from logits [rows, V] at
  // `at` (each row's logits start at row * rowStride + at).
  auto sampleAll = [&](const Tensor &logits, int64_t rowStride,
                       int64_t at) -> std::string {
    if (logits.dtype() != DType::F32)
      return "the output '" + names.logitsOutput + "' is not f32 logits";
    const int64_t vocab = logits.shape().back();
    const int64_t usable = text ? std::min<int64_t>(vocab, 256) : vocab;
    const float *data = reinterpret_cast<const float *>(logits.data());
    for (int64_t r = 0; r < rows; ++r)
      seqs[r].push_back(
          sampleToken(data + r * rowStride + at, usable, sampling, rng));
    return "";
  };
  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  Clock::time_point firstToken;
  int64_t generated = 0;
  const bool cached = !args->has("--no-cache");
  auto done = [&] {
    return generated == maxTokens ||
           static_cast<int64_t>(seqs[0].size()) == context;
  };
  if (cached) {
    if (Status st = s.startDecoding(names); !st)
      return generateError(st.message());
    std::vector<int64_t> shape = tokens->shape;
    shape.back() = 1;
    while (!done()) {
      int64_t p = s.decodePosition();
      std::vector<int> next;
      for (const auto &seq : seqs)
        next.push_back(static_cast<int>(seq[p]));
      auto logits = s.decodeNext(Tensor::fromInts(shape, next));
      if (!logits)
        return generateError(logits.status().message());
      if (p + 1 < static_cast<int64_t>(seqs[0].size()))
        continue; // still reading the prompt
      if (logits->shape().size() < 2 || logits->shape()[logits->shape().size() - 2] != 1)
        return generateError("the output '" + names.logitsOutput +
                             "' is not logits [..., T, V]");
      if (std::string why = sampleAll(*logits, logits->shape().back(), 0);
          !why.empty())
        return generateError(why);
      if (++generated == 1)
        firstToken = Clock::now();
    }
  } else {
    while (!done()) {
      int64_t len = static_cast<int64_t>(seqs[0].size());
      std::vector<int> ids(static_cast<size_t>(rows * context), 0);
      for (int64_t r = 0; r < rows; ++r)
        std::copy(seqs[r].begin(), seqs[r].end(), ids.begin() + r * context);
      for (const TensorInfo &in : inputs) {
        Tensor value = in.name == names.tokensInput
                           ? Tensor::fromInts(in.shape, ids)
                           : Tensor::zeros(in.dtype, in.shape);
        if (in.name == names.positionsInput) {
          std::vector<int> pos(static_cast<size_t>(context));
          for (int64_t t = 0; t < context; ++t)
            pos[t] = static_cast<int>(t);
          value = Tensor::fromInts(in.shape, pos);
        }
        if (Status st = s.feed(in.name, value); !st)
          return generateError(st.message());
      }
      auto outs = s.forward();
      if (!outs)
        return generateError(outs.status().message());
      auto it = outs->find(names.logitsOutput);
      if (it == outs->end() || it->second.shape().size() < 2 ||
          it->second.shape()[it->second.shape().size() - 2] != context)
        return generateError("'" + modelPath + "' has no output '" +
                             names.logitsOutput + "' of logits [..., " +
                             std::to_string(context) + ", V]");
      int64_t V = it->second.shape().back();
      if (std::string why = sampleAll(it->second, context * V, (len - 1) * V);
          !why.empty())
        return generateError(why);
      if (++generated == 1)
        firstToken = Clock::now();
    }
  }
  auto end = Clock::now();

  for (int64_t r = 0; r < rows; ++r) {
    if (rows > 1)
      llvm::outs() << (r ? "\n" : "") << "=== sequence " << r + 1 << " of "
                   << rows << " ===\n";
    if (text) {
      for (int64_t id : seqs[r])
        llvm::outs() << static_cast<char>(id);
    } else {
      for (size_t i = 0; i < seqs[r].size(); ++i)
        llvm::outs() << (i ? " " : "") << seqs[r][i];
    }
    llvm::outs() << "\n";
  }
  llvm::outs().flush();
  auto seconds = [](Clock::duration d) {
    return std::chrono::duration<double>(d).count();
  };
  double rest = seconds(end - firstToken);
  llvm::errs() << llvm::format(
      "generated %lld tokens x %lld sequences (%s): prompt of %zu tokens "
      "and first token %.3f s, then %.1f tokens/s per sequence\n",
      static_cast<long long>(generated), static_cast<long long>(rows),
      cached ? "key/value cache" : "no cache, whole context per token",
      prompt.size(), seconds(firstToken - start),
      generated > 1 && rest > 0 ? (generated - 1) / rest : 0.0);
  if (generated < maxTokens)
    llvm::errs() << "stopped at the model's context of " << context
                 << " tokens\n";
  return llvm::outs().has_error() ? kUserError : kSuccess;
}

} // namespace mgc::cli
