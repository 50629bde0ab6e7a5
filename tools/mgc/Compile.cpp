// mgc compile: a model file to IR.
#include "tools/mgc/Commands.h"
#include "tools/mgc/MeshOptions.h"

#include "backend/Executable.h"
#include "backend/PlanReport.h"
#include "backend/cpu/Kernels.h"
#include "frontend/Frontend.h"
#include "ir/Printer.h"
#include "ir/TargetModule.h"
#include "passes/MixedPrecision.h"

#include "runtime/session/MeshStep.h"
#include "runtime/session/Pipeline.h"
#include "runtime/session/PipelinePlan.h"
#include "runtime/session/PlanWarnings.h"
#include "runtime/session/TargetCheck.h"
#include "llvm/Support/Format.h"

#include "llvm/Support/raw_ostream.h"

namespace mgc::cli {

const CommandSpec &compileSpec() {
  static const CommandSpec spec = [] {
    CommandSpec s;
    s.name = "compile";
    s.usage = "mgc compile MODEL.mg [-D NAME=VALUE]... [--emit=KIND] "
              "[--passes=PIPELINE] [-o FILE|-]\n"
              "                            [--precision fp32|bf16|fp16] "
              "[--backend cpu|cuda]\n"
              "       mgc compile MODEL.mg --mesh AXES [--zero N] "
              "[--accumulate K] [--emit=plan|plan-json|dot|ir|device-ir]\n"
              "                            [--device K] [--microbatches M] "
              "[--pipeline-schedule NAME] [--virtual-stages V]\n"
              "                            [--stages RANGES] "
              "[--cluster FILE.json] [--dp-weights W,...]";
    s.summary = "Compile a model file and print what mgc makes of it.";
    s.positionalName = "a model file (MODEL.mg, or - for stdin)";
    s.minPositionals = s.maxPositionals = 1;
    s.options = {
        {"--emit",
         "KIND",
         "what to write: ir (the IR text) or exe (an executable: the "
         "training step when the model has a loss, unless --passes is "
         "given; the default when -o names a .mgx file); with a mesh: ir "
         "(the training step with every value's placement and the "
         "communication), device-ir (one device's program, see --device), "
         "plan (a table of placements, communication and memory per "
         "device), plan-json (the same as JSON), dot (a Graphviz graph of "
         "the partitioned step)",
         false,
         {"ir", "exe", "device-ir", "plan", "plan-json", "dot"}},
        {"--device", "K",
         "the device whose program --emit=device-ir prints "
         "(default 0)"},
        {"--no-warnings", "", "do not print warnings"},
        {"--backend",
         "NAME",
         "the backend the programs are compiled for: cpu (default) or cuda "
         "(fused ops within the CUDA backend's limits, and every program "
         "checked as the CUDA backend checks it before it runs; needs no "
         "GPU)",
         false,
         {"cpu", "cuda"}},
        {"--precision",
         "P",
         "compute precision of the step and the forward program "
         "(train.precision): fp32, bf16 or fp16 (bf16 or f16 matmuls and "
         "activations, f32 weights, norms and loss; fp16 with dynamic loss "
         "scaling; docs/mixed-precision.md); with --emit=ir and no "
         "--passes, the model after the mixed-precision pass",
         false,
         {"fp32", "bf16", "fp16"}},
    };
    // The model's sizes come first.
    std::vector<OptionSpec> sizes = modelSizeOptions();
    s.options.insert(s.options.begin(), sizes.begin(), sizes.end());
    for (auto &o : meshOptions())
      s.options.push_back(o);
    for (auto &o : outputOptions())
      s.options.push_back(o);
    for (auto &o : passPipelineOptions())
      s.options.push_back(o);
    s.details = passListHelp() +
                "\nExit status: 0 success, 1 the model has errors, 2 usage "
                "error.\n";
    return s;
  }();
  return spec;
}

// A pipelined step: its plan, or the programs of every stage (ir) or of
// one pipeline device (device-ir), then the apply part.
static int emitPipeline(const session::MeshStep &step, const std::string &emit,
                        int64_t device, const ir::PrintOptions &print,
                        const ParsedArgs &args, DiagnosticEngine &diag) {
  const session::PipelinePart &part = *step.pipeline;
  std::string text;
  llvm::raw_string_ostream os(text);
  std::string applyTitle =
      "// The apply part: runs once per step, with the gradients summed over "
      "the micro-batches; shown whole, before each pipeline device takes "
      "its own parameters' part of it (with its dp all-reduces in "
      "buckets).\n";
  // The apply part's plan report (the dp collectives and the optimizer).
  auto applyReport = [&] {
    std::vector<const backend::Executable *> executables;
    for (const auto &exe : step.step.executables)
      executables.push_back(exe.get());
    return backend::buildPlanReport(step.logicalOf(step.step),
                                    step.step.programs, executables);
  };
  if (emit == "plan") {
    session::printPipelinePlan(part, os);
    os << "\n" << llvm::StringRef(applyTitle).drop_front(3);
    backend::printPlan(applyReport(), os);
    return emitText(os.str(), args, diag);
  }
  if (emit == "plan-json") {
    // One document: the pipeline and the apply part's report.
    os << "{\"pipeline\": ";
    session::printPipelinePlanJson(part, os);
    os << ", \"apply\": ";
    backend::printPlanJson(applyReport(), os);
    os << "}\n";
    return emitText(os.str(), args, diag);
  }
  if (emit != "ir" && emit != "device-ir") {
    llvm::errs() << "mgc compile: error: --emit=" << emit
                 << " does not show a pipeline yet (use plan, plan-json, ir "
                    "or device-ir)\n";
    return kUsageError;
  }
  const passes::PipelineSplit &split = part.splits.front();
  for (int64_t s = 0; s < split.stages; ++s) {
    int64_t d = part.schedule.deviceOf(s);
    if (emit == "device-ir" && d != device)
      continue;
    for (int p = 0; p < split.numPhases(); ++p)
      os << "// Stage " << s << " on device " << d << ", its "
         << passes::phaseName(static_cast<passes::Phase>(p),
                              split.splitBackward)
         << " program (of every micro-batch"
         << (part.splits.size() > 1 ? " that runs the first split" : "")
         << "): its recv and send ops are its messages from and to the "
            "neighbouring stages, its pipe.* inputs and outputs what it keeps "
            "between its phases.\n"
         << ir::printModuleToString(*split.programs[s][p], print) << "\n";
  }
  // Each pipeline device's part of the apply part (of the stage mesh's
  // device 0).
  for (int64_t d = 0; d < part.applySplit.devices; ++d) {
    if (emit == "device-ir" && d != device)
      continue;
    if (part.applyGather[d].logical)
      os << "// Device " << d
         << ", its gather program of the apply part (once per step, with the "
            "gradients summed over the micro-batches): apply.* outputs are "
            "what it keeps for its update program or gives every other "
            "device.\n"
         << ir::printModuleToString(part.applyGather[d].programs.programFor(0),
                                    print)
         << "\n";
    os << "// Device " << d
       << ", its update program of the apply part: the optimizer's step of "
          "the parameters it holds; apply.* inputs are what it kept or "
          "received.\n"
       << ir::printModuleToString(part.applyUpdate[d].programs.programFor(0),
                                  print)
       << "\n";
  }
  return emitText(os.str(), args, diag);
}

// The training step partitioned for a mesh: the sharded step or one
// device's program.
static int compileForMesh(const ir::Module &module, const MeshChoice &mesh,
                          const ParsedArgs &args, DiagnosticEngine &diag) {
  std::string emit = args.get("--emit", "ir");
  if (emit == "exe" || args.has("--passes")) {
    llvm::errs() << "mgc compile: error: "
                 << (emit == "exe" ? "--emit=exe" : "--passes")
                 << " does not apply with a mesh yet (use --emit=ir or "
                    "device-ir)\n";
    return kUsageError;
  }
  int64_t device = 0;
  if (args.has("--device") &&
      (llvm::StringRef(args.get("--device")).getAsInteger(10, device) ||
       device < 0 || device >= mesh.mesh->numDevices())) {
    llvm::errs() << "mgc compile: error: --device expects a device of the "
                 << "mesh " << mesh.mesh->str() << ", 0 to "
                 << mesh.mesh->numDevices() - 1 << ", got '"
                 << args.get("--device") << "'\n";
    return kUsageError;
  }
  SessionOptions options;
  options.zero = mesh.zero;
  options.bucketMiB = mesh.bucketMiB;
  options.accumulate = static_cast<int>(mesh.accumulate);
  options.schedule = mesh.schedule;
  options.virtualStages = mesh.virtualStages;
  options.stages = mesh.stages;
  options.cluster = mesh.cluster;
  auto config = session::meshConfig(*mesh.mesh, module, options, diag);
  if (config.failed())
    return kUserError;
  auto step = session::buildMeshStep(module, *config, diag);
  if (step.failed())
    return kUserError;
  if (failed(session::checkMeshStepRunsOnTarget(*step, diag)))
    return kUserError;
  for (const std::string &w : session::planWarnings(*step, module, *config))
    llvm::errs() << "mgc compile: warning: " << w << "\n";
  ir::PrintOptions print;
  print.locations = args.has("--locations");
  if (step->pipeline)
    return emitPipeline(*step, emit, device, print, args, diag);
  // With accumulation every output names its two parts: the micro-batch
  // part (run K times per step) and the apply part (once).
  bool accumulate = step->accumulate > 1;
  std::string k = std::to_string(step->accumulate);
  std::string microTitle =
      "// The micro-batch part: runs " + k +
      " times per step, its micro.sum.* outputs added up over the "
      "micro-batches. Its devices are micro-batch devices: dp coordinate "
      "c*" +
      k + "+i is micro-batch i of dp device c.\n";
  std::string applyTitle = "// The apply part: runs once per step, with "
                           "the sums of the micro-batches.\n";
  if (emit == "device-ir") {
    if (!accumulate)
      return emitModule(step->step.programs.programFor(device), args, diag);
    int64_t v =
        passes::microBatchDevice(step->mesh, step->accumulate, device, 0);
    return emitText(
        "// Device " + std::to_string(device) + " (micro-batch device " +
            std::to_string(v) + " of " + step->micro.programs.mesh.str() +
            " for its first micro-batch).\n" + microTitle +
            ir::printModuleToString(step->micro.programs.programFor(v), print) +
            "\n" + applyTitle +
            ir::printModuleToString(step->step.programs.programFor(device),
                                    print),
        args, diag);
  }
  if (emit == "ir") {
    if (!accumulate)
      return emitModule(*step->sharded, args, diag);
    return emitText(microTitle +
                        ir::printModuleToString(*step->micro.logical, print) +
                        "\n" + applyTitle +
                        ir::printModuleToString(*step->step.logical, print),
                    args, diag);
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  // The micro-batch part's devices are the run's devices times its
  // micro-batches: say so, or dp=2 with 2 micro-batches reads as dp=4.
  std::string microDevices =
      "micro-batch devices: " +
      std::to_string(step->step.programs.mesh.numDevices()) + " devices x " +
      k + " micro-batches";
  auto report = [&](const session::MeshPart &part, const std::string &title) {
    if (!title.empty())
      os << (emit == "dot" ? title : llvm::StringRef(title).drop_front(3));
    const ir::Module &logical = step->logicalOf(part);
    if (emit == "dot") {
      backend::printPlanDot(logical, part.programs, os);
      return;
    }
    std::vector<const backend::Executable *> executables;
    for (const auto &exe : part.executables)
      executables.push_back(exe.get());
    backend::PlanReport r =
        backend::buildPlanReport(logical, part.programs, executables);
    if (&part == &step->micro)
      r.devicesAre = microDevices;
    if (emit == "plan")
      backend::printPlan(r, os);
    else
      backend::printPlanJson(r, os);
  };
  if (!accumulate) {
    report(step->step, "");
  } else if (emit == "plan") {
    os << "Gradient accumulation: " << k << " micro-batches per step.\n\n";
    report(step->micro, microTitle);
    os << "\n";
    report(step->step, applyTitle);
  } else if (emit == "plan-json") {
    // One document: the two reports under "micro" and "apply".
    os << "{\"accumulate\": " << k << ", \"micro\": ";
    report(step->micro, "");
    os << ", \"apply\": ";
    report(step->step, "");
    os << "}\n";
  } else {
    // Two graphs in one file; Graphviz draws each.
    report(step->micro, microTitle);
    report(step->step, applyTitle);
  }
  return emitText(os.str(), args, diag);
}

int runCompile(llvm::ArrayRef<std::string> rawArgs) {
  int exitCode = kSuccess;
  auto args = parseCommandArgs(compileSpec(), rawArgs, exitCode);
  if (!args)
    return exitCode;

  frontend::CompileOptions options;
  if (std::string why =
          parseModelSizes(*args, options.defines, options.batchSize);
      !why.empty()) {
    llvm::errs() << "mgc compile: error: " << why << "\n";
    return kUsageError;
  }
  std::optional<MeshChoice> mesh = parseMeshChoice(*args, "compile", exitCode);
  if (!mesh)
    return exitCode;
  std::string emit = args->get("--emit", "ir");
  if (!mesh->mesh && (emit == "device-ir" || emit == "plan" ||
                      emit == "plan-json" || emit == "dot")) {
    llvm::errs() << "mgc compile: error: --emit=" << emit
                 << " needs a mesh (--mesh or --devices) or --accumulate\n";
    return kUsageError;
  }
  if (args->has("--device") && emit != "device-ir") {
    llvm::errs() << "mgc compile: error: --device applies to "
                    "--emit=device-ir\n";
    return kUsageError;
  }
  std::string overwrite = outputOverwritesInput(
      {{"-o", args->get("-o")}}, {{"the model file", args->positionals[0]}});
  if (!overwrite.empty()) {
    llvm::errs() << "mgc compile: error: " << overwrite << "\n";
    return kUsageError;
  }
  DiagnosticEngine diag;
  diag.setWarningsEnabled(!args->has("--no-warnings"));
  auto module = frontend::compileModelFile(args->positionals[0], options, diag);
  if (!module || diag.hasErrors())
    return kUserError;
  if (failed(session::applyPrecision(*module, args->get("--precision"), diag)))
    return kUserError;
  // The CPU's programs carry no target attribute (the default).
  std::string target = args->get("--backend", ir::kCpuTarget.name);
  if (target != ir::kCpuTarget.name)
    module->attrs().set(ir::kTargetAttr, target);
  if (mesh->mesh)
    return compileForMesh(*module, *mesh, *args, diag);
  std::string out = args->get("-o", "-");
  bool exe = args->has("--emit") ? args->get("--emit", "ir") == "exe"
                                 : llvm::StringRef(out).endswith(".mgx");
  std::unique_ptr<backend::Executable> executable;
  if (!args->has("--passes") && (exe || target != ir::kCpuTarget.name)) {
    // The programs a session runs, the training step (when the model has a
    // loss) and the forward program, built by the function the executor
    // library uses and checked as the target's backend checks them. Only
    // one is written (the step when there is one); with --emit=ir the
    // build is the target's check, and the model's IR is printed.
    auto built = session::cloneModule(*module, diag);
    if (!built)
      return kUserError;
    auto exes = session::buildModelExecutables(std::move(built), diag);
    if (exes.failed() ||
        (exes->step && failed(session::checkRunsOnTarget(*exes->step, diag))) ||
        failed(session::checkRunsOnTarget(*exes->forward, diag)))
      return kUserError;
    if (!exe)
      return emitModule(*module, *args, diag);
    executable = exes->step ? std::move(exes->step) : std::move(exes->forward);
  } else {
    // Without a pipeline, --precision bf16 or fp16 shows what the precision
    // does to the model (the pipelines that build a step run the pass
    // themselves).
    std::optional<passes::Precision> precision =
        passes::parsePrecision(args->get("--precision"));
    if (!args->has("--passes") && precision &&
        failed(passes::convertPrecision(*module, *precision, diag)))
      return kUserError;
    const std::string &path = args->positionals[0];
    if (int rc = runPassPipeline(*module, *args, diag,
                                 path == "-" ? "<stdin>" : path))
      return rc;
    if (!exe)
      return emitModule(*module, *args, diag);
    // The scheduled program with its memory plan for the CPU backend.
    executable =
        backend::buildExecutable(std::move(module), backend::cpu::scratchBytes);
  }
  if (args->has("--passes") &&
      failed(session::checkRunsOnTarget(*executable, diag)))
    return kUserError;
  if (out == "-") {
    llvm::outs() << backend::serializeExecutable(*executable);
    return kSuccess;
  }
  if (failed(backend::writeExecutableFile(*executable, out, diag)))
    return kUserError;
  // What the memory planner decided, in the spirit of a linker's summary.
  uint64_t argumentBytes = 0;
  for (const auto &arg : executable->module->graph().arguments())
    argumentBytes += static_cast<uint64_t>(arg->type().size()) *
                     ir::dtypeBytes(arg->type().dtype);
  llvm::outs() << llvm::format(
      "wrote %s: %zu ops, arena peak %.1f MiB, arguments %.1f MiB\n",
      out.c_str(), executable->order.size(), executable->plan.peak / 1048576.0,
      argumentBytes / 1048576.0);
  return kSuccess;
}

} // namespace mgc::cli
