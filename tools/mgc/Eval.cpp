// mgc eval: the mean loss (and a classifier's accuracy) of a model's
// parameters over one pass of a data set, with the executor library's
// forward program.
#include "tools/mgc/Commands.h"
#include "tools/mgc/Evaluate.h"
#include "tools/mgc/RunData.h"
#include "tools/mgc/RunStart.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <mgc/Session.h>

#include <charconv>
#include <cmath>

namespace mgc::cli {

namespace {

int evalError(const std::string &message, int code = kUserError) {
  return commandError("eval", message, code);
}

int usage(const std::string &message) {
  return evalError(message, kUsageError);
}

// The shortest decimal that reads back as `v` ("2.0794415416798357").
std::string shortestDigits(double v) {
  char text[32];
  auto end = std::to_chars(text, text + sizeof text, v).ptr;
  return std::string(text, end);
}

} // namespace

const CommandSpec &evalSpec() {
  static const CommandSpec spec = [] {
    CommandSpec s;
    s.name = "eval";
    s.usage = "mgc eval MODEL.mg|MODEL.mgx [--resume CKPT | --init-from CKPT "
              "| --seed S] "
              "[-D NAME=VALUE]...\n"
              "       (--data NAME=FILE.npy... | --text FILE | --tokens FILE "
              "--token-dtype u16|i32)\n"
              "       [--max-batches N] [--mesh AXES] [--threads N] [--backend "
              "cpu|cuda|auto] [--precision fp32|bf16|fp16]";
    s.summary = "Report a model's mean loss (and, for a classifier, its "
                "accuracy) over a data set.";
    s.positionalName = "a model file (MODEL.mg or MODEL.mgx)";
    s.minPositionals = s.maxPositionals = 1;
    s.options = {
        {"--resume", "CKPT",
         "the checkpoint whose parameters are evaluated (any checkpoint "
         "mgc run saved, sharded ones included); without it, the initial "
         "parameters of --seed"},
        {"--init-from", "CKPT",
         "the checkpoint whose parameters are evaluated, read by name as "
         "mgc run --init-from reads them: a checkpoint of another model that "
         "has every parameter of this one, or a Hugging Face checkpoint "
         "through the model's name map"},
        hfMapOption(),
        {"--seed", "S",
         "seed of the initial parameters (default: train.seed, "
         "else 0)"},
    };
    // The model's sizes come first.
    std::vector<OptionSpec> sizes = modelSizeOptions();
    s.options.insert(s.options.begin(), sizes.begin(), sizes.end());
    for (OptionSpec o : dataOptions())
      s.options.push_back(o);
    for (OptionSpec o : std::vector<OptionSpec>{
             {"--max-batches", "N",
              "evaluate at most the first N batches (default: every whole "
              "batch of one pass over the data)"},
             {"--threads", "N",
              "CPU worker threads (default: one per core); a mesh in one "
              "process shares them among its simulated devices, at least one "
              "each"},
             {"--backend",
              "NAME",
              "cpu (default), cuda (one CUDA device) or auto (CUDA when a "
              "device is present)",
              false,
              {"cpu", "cuda", "auto"}},
             {"--mesh", "AXES",
              "evaluate on a mesh of simulated devices (dp, tp; e.g. "
              "dp=2,tp=2): each device its part of every batch and of the "
              "parameters, as training places them"},
             {"--precision",
              "P",
              "fp32, bf16 or fp16 (default: train.precision, else fp32)",
              false,
              {"fp32", "bf16", "fp16"}},
         })
      s.options.push_back(o);
    s.details =
        "The data are read in order, one batch of the model's batch size at\n"
        "a time; a last part smaller than a batch is not evaluated. The loss\n"
        "is the mean of the batches' losses (each the mean over its\n"
        "positions). A model whose loss is a cross_entropy is a classifier:\n"
        "its accuracy is the share of positions whose target has the\n"
        "largest logit. The forward program runs on one device, or with\n"
        "--mesh on a mesh's devices (no pp axis); a checkpoint saved on any\n"
        "mesh or by several processes is read whole.";
    return s;
  }();
  return spec;
}

int runEval(llvm::ArrayRef<std::string> rawArgs) {
  int exitCode = kSuccess;
  auto args = parseCommandArgs(evalSpec(), rawArgs, exitCode);
  if (!args)
    return exitCode;
  const std::string modelPath = args->positionals[0];

  SessionOptions options;
  if (std::string why =
          parseModelSizes(*args, options.defines, options.batchSize);
      !why.empty())
    return usage(why);
  int64_t maxBatches = 0, seed = 0;
  if (std::string why = parseThreads(*args, options.threads); !why.empty())
    return usage(why);
  if (args->has("--max-batches") &&
      !parseInt(args->get("--max-batches"), 1, maxBatches))
    return usage("--max-batches expects an integer >= 1, got '" +
                 args->get("--max-batches") + "'");
  if (args->has("--seed") && !parseInt(args->get("--seed"), 0, seed))
    return usage("--seed expects an integer >= 0, got '" +
                 args->get("--seed") + "'");
  if (args->has("--resume") && args->has("--init-from"))
    return usage("--resume and --init-from are alternatives: give one "
                 "checkpoint");
  options.hfMap = args->get("--hf-map");
  options.backend = args->get("--backend", "cpu");
  options.precision = args->get("--precision");
  options.mesh = args->get("--mesh");

  DataChoice data;
  if (std::string why = parseDataChoice(*args, data); !why.empty())
    return usage(why);
  if (data.arrays.empty() && data.tokenFile.empty())
    return usage("give the data to evaluate on: --data NAME=FILE.npy for "
                 "each input, --text FILE or --tokens FILE (a loss over "
                 "random data would mean nothing)");
  data.shuffle = false;

  ModelFacts facts =
      inspectModel(modelPath, options.defines, options.batchSize);
  if (facts.read && !facts.hasLoss)
    return evalError("'" + modelPath +
                     "' has no loss: mgc eval reports the mean of a model's "
                     "scalar `loss = ...` output over the data");
  if (!args->has("--seed") && facts.trainSeed)
    seed = static_cast<int64_t>(*facts.trainSeed);
  options.seed = static_cast<uint64_t>(seed);
  data.seed = options.seed;

  auto session = Session::create(modelPath, options);
  if (!session)
    return evalError(session.status().message());
  Session &s = **session;
  std::string what = "the initial parameters (seed " + std::to_string(seed) +
                     ")";
  if (args->has("--resume")) {
    if (Status st = s.loadCheckpoint(args->get("--resume")); !st)
      return evalError(st.message());
    what = "'" + args->get("--resume") + "' (step " +
           std::to_string(s.stepCount()) + ")";
  } else if (args->has("--init-from")) {
    if (auto report = loadEveryParameter(s, args->get("--init-from")); !report)
      return evalError(report.status().message());
    what = "'" + args->get("--init-from") + "'";
  }

  auto setup = makeDataSource(s.inputs(), facts, data);
  if (!setup)
    return evalError(llvm::toString(setup.takeError()));
  std::optional<int64_t> perPass = setup->source->batchesPerEpoch();
  int64_t batches = perPass ? *perPass : maxBatches;
  if (maxBatches > 0 && maxBatches < batches)
    batches = maxBatches;
  if (batches <= 0)
    return evalError("the data " + setup->description +
                     " hold less than one batch of the model");

  auto result = evaluate(s, *setup->source, batches);
  if (!result)
    return evalError(llvm::toString(result.takeError()));

  int64_t perBatch =
      setup->tokensPerStep ? setup->tokensPerStep : setup->samplesPerStep;
  std::string units = setup->tokensPerStep ? "tokens" : "samples";
  llvm::outs() << "evaluated " << what << " on " << setup->description << ": "
               << batches << (batches == 1 ? " batch, " : " batches, ")
               << batches * perBatch << " " << units << "\n";
  // The shortest digits that read back as the same double, as --log-json
  // writes them: two runs compare to the last bit.
  llvm::outs() << "loss " << shortestDigits(result->loss);
  if (result->accuracy)
    llvm::outs() << ", accuracy " << shortestDigits(*result->accuracy);
  llvm::outs() << "\n";
  llvm::outs().flush();
  return llvm::outs().has_error() ? kUserError : kSuccess;
}

} // namespace mgc::cli
