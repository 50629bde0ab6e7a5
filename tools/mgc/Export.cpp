// mgc export: a checkpoint's parameters written in another library's form.
// --format hf writes a Hugging Face checkpoint (model.safetensors and
// config.json) through the model's name map, so that transformers'
// from_pretrained loads what mgc trained.
#include "tools/mgc/Commands.h"
#include "tools/mgc/RunStart.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <mgc/Session.h>

namespace mgc::cli {

namespace {

int exportError(const std::string &message, int code = kUserError) {
  return commandError("export", message, code);
}

std::string inFolder(const std::string &folder, const char *name) {
  llvm::SmallString<256> path(folder);
  llvm::sys::path::append(path, name);
  return path.str().str();
}

} // namespace

const CommandSpec &exportSpec() {
  static const CommandSpec spec = [] {
    CommandSpec s;
    s.name = "export";
    s.usage = "mgc export MODEL.mg --from CKPT --format hf -o FOLDER "
              "[-D NAME=VALUE]... [--hf-map FILE]\n"
              "       [--vocab-size N] [--dtype f32|bf16|f16]";
    s.summary = "Write a checkpoint's parameters as a Hugging Face checkpoint "
                "that transformers loads.";
    s.positionalName = "a model file (MODEL.mg)";
    s.minPositionals = s.maxPositionals = 1;
    s.options = {
        {"--from", "CKPT",
         "the checkpoint whose parameters are written: one mgc saved "
         "(sharded ones included) or a Hugging Face one; it must hold every "
         "parameter of the model"},
        {"--format", "FORMAT", "hf: a Hugging Face checkpoint", false, {"hf"}},
        {"-o", "FOLDER",
         "the folder written: FOLDER/model.safetensors and "
         "FOLDER/config.json, each replaced atomically"},
        hfMapOption(),
        {"--vocab-size", "N",
         "the vocabulary written (default: the model's): a model whose "
         "vocabulary is padded to a multiple of 64 writes the tokenizer's, "
         "its first N rows"},
        {"--dtype",
         "TYPE",
         "the tensors' type (default f32)",
         false,
         {"f32", "bf16", "f16"}},
    };
    // The model's sizes come first.
    std::vector<OptionSpec> sizes = modelSizeOptions();
    s.options.insert(s.options.begin(), sizes.begin(), sizes.end());
    s.details =
        "The name map (MODEL.hf.json beside the model file, or --hf-map)\n"
        "says which Hugging Face tensor holds which parameter; the\n"
        "config.json it writes takes the model's constants (-D applied).\n"
        "samples/gpt.hf.json and samples/llama.hf.json map the two samples\n"
        "to GPT2LMHeadModel and LlamaForCausalLM (docs/checkpoints.md).";
    return s;
  }();
  return spec;
}

int runExport(llvm::ArrayRef<std::string> rawArgs) {
  int exitCode = kSuccess;
  auto args = parseCommandArgs(exportSpec(), rawArgs, exitCode);
  if (!args)
    return exitCode;
  const std::string modelPath = args->positionals[0];
  for (const char *required : {"--from", "--format", "-o"})
    if (!args->has(required))
      return exportError(std::string("give ") + required + " (" +
                             exportSpec().usage + ")",
                         kUsageError);
  SessionOptions options;
  if (std::string why =
          parseModelSizes(*args, options.defines, options.batchSize);
      !why.empty())
    return exportError(why, kUsageError);
  options.hfMap = args->get("--hf-map");
  HuggingFaceExport how;
  if (args->has("--vocab-size") &&
      !parseInt(args->get("--vocab-size"), 1, how.vocabulary))
    return exportError("--vocab-size expects an integer >= 1, got '" +
                           args->get("--vocab-size") + "'",
                       kUsageError);
  std::string dtype = args->get("--dtype", "f32");
  how.dtype = dtype == "bf16"  ? DType::BF16
              : dtype == "f16" ? DType::F16
                               : DType::F32;

  const std::string from = args->get("--from"), folder = args->get("-o");
  std::string overwrite =
      outputOverwritesInput({{"-o", inFolder(folder, "model.safetensors")},
                             {"-o", inFolder(folder, "config.json")}},
                            {{"the model file", modelPath},
                             {"--from", from},
                             {"--from", inFolder(from, "model.safetensors")},
                             {"--from", inFolder(from, "config.json")},
                             {"--hf-map", options.hfMap}});
  if (!overwrite.empty())
    return exportError(overwrite, kUsageError);

  auto session = Session::create(modelPath, options);
  if (!session)
    return exportError(session.status().message());
  Session &s = **session;
  auto report = loadEveryParameter(s, from);
  if (!report)
    return exportError(report.status().message());
  if (Status st = s.exportHuggingFace(folder, how); !st)
    return exportError(st.message());
  llvm::outs() << "exported the " << report->loaded.size() << " parameters of "
               << from << " to " << folder
               << " (model.safetensors, config.json; " << dtype << ")\n";
  return kSuccess;
}

} // namespace mgc::cli
