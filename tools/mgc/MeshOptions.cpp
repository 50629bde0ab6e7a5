#include "tools/mgc/MeshOptions.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

namespace mgc::cli {

namespace {

// "dp: data parallel, tp: tensor parallel", from the table of axes.
std::string axesMeaning() {
  std::string s;
  for (const ir::MeshAxisKind &k : ir::kMeshAxisKinds) {
    llvm::StringRef meaning = llvm::StringRef(k.meaning).split(':').first;
    s += (s.empty() ? "" : ", ") + std::string(k.name) + ": " + meaning.str();
  }
  return s;
}

} // namespace

std::vector<OptionSpec> meshOptions() {
  return {
      {"--mesh", "AXES",
       "the device mesh: named axes and their sizes, e.g. dp=4 or dp=2,tp=2 "
       "(" +
           axesMeaning() +
           "; any may be 1); mgc run trains on that many simulated devices"},
      {"--devices", "N", "N devices, data parallel: the same as --mesh dp=N"},
      {"--dp-weights", "W,...",
       "relative speed of the dp devices: each gets that share of every "
       "batch, e.g. 3,1"},
      {"--zero",
       "STAGE",
       "ZeRO on the dp axis: 1 or 2 split the optimizer state and the "
       "update over the dp devices (0: off)",
       false,
       {"0", "1", "2"}},
      {"--bucket-mib", "MIB",
       "fuse the gradient all-reduces into buckets of this many MiB, each "
       "issued as soon as its last gradient exists (default 25; 0: one "
       "all-reduce per gradient)"},
      {"--accumulate", "K",
       "gradient accumulation: split each batch into K micro-batches per "
       "device, run them one after another and communicate the summed "
       "gradients once per step (the result is the step on the whole batch; "
       "works with or without a mesh)"},
      {"--microbatches", "M",
       "micro-batches per step, the same as --accumulate; with a pp axis "
       "they flow through the pipeline (default: one per pipeline device)"},
      {"--pipeline-schedule",
       "NAME",
       "with a pp axis: the order in which each stage runs the forwards "
       "and backwards of the micro-batches (default 1f1b; docs/pipeline.md)",
       false,
       {"gpipe", "1f1b", "interleaved", "zb-h1"}},
      {"--virtual-stages", "V",
       "with --pipeline-schedule interleaved: model chunks per pipeline "
       "device (default 1)"},
      {"--stages", "RANGES",
       "with a pp axis: the layers (repeat iterations) of each stage, e.g. "
       "0-5,6-11 (default: balanced by the cost model)"},
      {"--cluster", "FILE.json",
       "the devices (speed, memory) and links of the mesh, one per device "
       "in mesh order (samples/clusters/): with a pp axis the stages are "
       "balanced for them; without, each dp device's share of the batch "
       "follows its speed (as --dp-weights)"},
  };
}

std::optional<MeshChoice> parseMeshChoice(const ParsedArgs &args,
                                          llvm::StringRef command,
                                          int &exitCode) {
  auto usage = [&](const std::string &message) -> std::optional<MeshChoice> {
    llvm::errs() << "mgc " << command << ": error: " << message << "\n";
    exitCode = kUsageError;
    return std::nullopt;
  };
  MeshChoice choice;
  if (args.has("--mesh") && args.has("--devices"))
    return usage("--mesh and --devices are alternatives: give one of them");
  std::string text;
  if (args.has("--devices")) {
    int64_t n = 0;
    if (llvm::StringRef(args.get("--devices")).getAsInteger(10, n) || n < 1 ||
        n > 4096)
      return usage("--devices expects an integer from 1 to 4096, got '" +
                   args.get("--devices") + "'");
    text = "dp=" + std::to_string(n);
  } else if (args.has("--mesh")) {
    text = args.get("--mesh");
  }
  if (!text.empty()) {
    std::string error;
    choice.mesh = ir::Mesh::parse(text, error);
    if (!choice.mesh)
      return usage("--mesh '" + text + "': " + error);
  }
  if (args.has("--dp-weights")) {
    const ir::MeshAxis *dp =
        choice.mesh ? choice.mesh->findAxis(ir::kDataAxis) : nullptr;
    if (!dp)
      return usage("--dp-weights needs a mesh with a dp axis (--mesh or "
                   "--devices)");
    std::vector<int64_t> weights;
    std::string why = args.getIntList("--dp-weights", 1, 1000000,
                                      "positive integers", weights);
    if (!why.empty())
      return usage(why);
    if (static_cast<int64_t>(weights.size()) != dp->size)
      return usage("--dp-weights has " + std::to_string(weights.size()) +
                   " weights for dp=" + std::to_string(dp->size) +
                   ": expected one per dp device");
    std::vector<ir::MeshAxis> axes(choice.mesh->axes().begin(),
                                   choice.mesh->axes().end());
    for (ir::MeshAxis &a : axes)
      if (a.name == ir::kDataAxis)
        a.weights = ir::allEqual(weights) ? std::vector<int64_t>{} : weights;
    choice.mesh = ir::Mesh(std::move(axes));
  }
  if (args.has("--zero")) {
    choice.zero = std::stoi(args.get("--zero"));
    if (choice.zero != 0 &&
        (!choice.mesh || !choice.mesh->findAxis(ir::kDataAxis)))
      return usage("--zero " + args.get("--zero") +
                   " needs a mesh with a dp axis (--mesh or --devices)");
  }
  if (args.has("--bucket-mib")) {
    if (!choice.mesh)
      return usage("--bucket-mib needs a mesh (--mesh or --devices)");
    llvm::StringRef text = args.get("--bucket-mib");
    if (text.getAsDouble(choice.bucketMiB) || !(choice.bucketMiB >= 0) ||
        choice.bucketMiB > 1e6)
      return usage("--bucket-mib expects a number of MiB >= 0, got '" +
                   text.str() + "'");
  }
  if (args.has("--accumulate") && args.has("--microbatches"))
    return usage("--accumulate and --microbatches are one setting: give one "
                 "of them");
  for (const char *flag : {"--accumulate", "--microbatches"}) {
    if (!args.has(flag))
      continue;
    if (llvm::StringRef(args.get(flag)).getAsInteger(10, choice.accumulate) ||
        choice.accumulate < 1 || choice.accumulate > 65536)
      return usage(std::string(flag) +
                   " expects a number of micro-batches from 1 to 65536, got '" +
                   args.get(flag) + "'");
    if (!choice.mesh && choice.accumulate > 1)
      choice.mesh = ir::Mesh();
  }
  bool pipeline = choice.mesh && choice.mesh->findAxis(ir::kPipelineAxis);
  for (const char *flag :
       {"--pipeline-schedule", "--virtual-stages", "--stages"})
    if (args.has(flag) && !pipeline)
      return usage(std::string(flag) +
                   " is for a pipeline: give the mesh a pp axis (--mesh "
                   "pp=N)");
  choice.schedule = args.get("--pipeline-schedule");
  choice.stages = args.get("--stages");
  choice.cluster = args.get("--cluster");
  // Never ignored: without a mesh there is nothing to place on it.
  if (args.has("--cluster") && !choice.mesh)
    return usage("--cluster describes the devices of a mesh: give one "
                 "(--mesh or --devices)");
  if (args.has("--virtual-stages")) {
    int64_t v = 0;
    if (llvm::StringRef(args.get("--virtual-stages")).getAsInteger(10, v) ||
        v < 1 || v > 1024)
      return usage("--virtual-stages expects a number of model chunks per "
                   "device from 1 to 1024, got '" +
                   args.get("--virtual-stages") + "'");
    if (v > 1 && choice.schedule != "interleaved")
      return usage("--virtual-stages " + std::to_string(v) +
                   " is the interleaved schedule's: give "
                   "--pipeline-schedule interleaved");
    choice.virtualStages = static_cast<int>(v);
  }
  return choice;
}

} // namespace mgc::cli
