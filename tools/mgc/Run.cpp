// mgc run: train a model on the CPU with the executor library.
#include "tools/mgc/Commands.h"
#include "tools/mgc/MeshOptions.h"
#include "tools/mgc/RunCheck.h"
#include "tools/mgc/RunData.h"
#include "tools/mgc/RunValidation.h"
#include "tools/mgc/RunProgress.h"
#include "tools/mgc/RunSpec.h"
#include "tools/mgc/RunStart.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

#include "backend/Launch.h"
#include "backend/PlanReport.h"
#include "runtime/session/SessionInternals.h"
#include "support/AtomicFile.h"

#include <mgc/Session.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <unistd.h>

namespace mgc::cli {

namespace {

volatile std::sig_atomic_t gInterrupted = 0;

// The job this process is part of, from the launcher's variables: with
// several processes, errors name the rank, and a rank that fails ends the
// whole job (its peers would wait for it).
backend::LaunchInfo gJob;

// Ctrl-C (SIGINT) and SIGTERM (what schedulers such as Slurm, and mpirun
// on Ctrl-C, send before they kill a job) stop the run after the current
// step; `gInterrupted` holds the signal.
extern "C" void onInterrupt(int signal) {
  gInterrupted = signal;
  // A second signal is not caught: it ends the program at once.
  std::signal(signal, SIG_DFL);
}

// "the loss is nan", "the loss is 2.31 but the gradient norm is inf".
std::string nonFiniteText(const StepResult &r) {
  auto number = [](double v) -> std::string {
    if (std::isnan(v))
      return "nan";
    if (std::isinf(v))
      return v > 0 ? "inf" : "-inf";
    return llvm::formatv("{0}", llvm::format("%g", v)).str();
  };
  auto norm = r.metrics.find("grad_norm");
  bool badNorm = norm != r.metrics.end() && !std::isfinite(norm->second);
  std::string text = "the loss is " + number(r.loss);
  if (badNorm)
    text += (std::isfinite(r.loss) ? " but" : " and") +
            std::string(" the gradient norm is ") + number(norm->second);
  return text;
}

// Prints `text` on stderr, each line starting "[rank R] " in a job of
// several processes.
void printError(const std::string &text) {
  std::string out;
  llvm::StringRef rest(text);
  while (!rest.empty()) {
    auto [line, tail] = rest.split('\n');
    if (gJob.size > 1)
      out += "[rank " + std::to_string(gJob.rank) + "] ";
    out += line.str() + "\n";
    rest = tail;
  }
  llvm::errs() << out;
  llvm::errs().flush();
}

int errorExit(const std::string &message, int code = kUserError) {
  // Session messages in the compiler's format already say "error:".
  if (llvm::StringRef(message).startswith("error:"))
    printError("mgc run: " + message);
  else if (llvm::StringRef(message).contains("error:"))
    printError(message);
  else
    printError("mgc run: error: " + message);
  if (gJob.size > 1) {
    llvm::outs().flush();
    Session::abortJob(code);
  }
  return code;
}

int usageError(const std::string &message) {
  printError("mgc run: error: " + message);
  return kUsageError;
}

// Warns when the run goes on past the end of its decaying learning-rate
// schedule (its horizon: train.decay_steps, or a compiled executable's
// train.steps): the steps after it train at the final rate.
void warnPastSchedule(const Session &s, bool compiled, int64_t steps) {
  auto config = SessionInternals::optimizer(s);
  if (!config || config->schedule == passes::LRScheduleKind::Constant)
    return;
  int64_t horizon = config->horizon();
  if (horizon <= 0 || steps <= horizon)
    return;
  const char *key = config->decaySteps > 0 ? "train.decay_steps"
                    : compiled ? "train.steps, fixed in the compiled model"
                               : "train.steps";
  llvm::errs() << "mgc run: warning: the "
               << passes::scheduleName(config->schedule)
               << " learning-rate schedule ends at step " << horizon << " ("
               << key << "): steps " << horizon + 1 << " to " << steps
               << " train at its final rate (train.min_lr)\n";
}

} // namespace

int runRun(llvm::ArrayRef<std::string> rawArgs) {
  int exitCode = kSuccess;
  std::string launchError;
  if (auto job = backend::detectLaunch(launchError))
    gJob = *job;
  if (!launchError.empty())
    return usageError(launchError);
  auto args = parseCommandArgs(runSpec(), rawArgs, exitCode);
  if (!args)
    return exitCode;
  const std::string modelPath = args->positionals[0];

  SessionOptions options;
  options.hfMap = args->get("--hf-map");
  if (std::string why =
          parseModelSizes(*args, options.defines, options.batchSize);
      !why.empty())
    return usageError(why);
  for (const TrainFlag &f : trainFlags())
    if (args->has(f.flag))
      options.train[f.key] = args->get(f.flag);
  for (const char *flag :
       {"--lr", "--momentum", "--weight-decay", "--beta1", "--beta2", "--eps",
        "--min-lr", "--clip-grad-norm"}) {
    double v;
    if (args->has(flag) && !parseNumber(args->get(flag), v))
      return usageError(std::string(flag) + " expects a number, got '" +
                        args->get(flag) + "'");
  }
  for (auto [flag, lowest] : {std::pair<const char *, int64_t>{"--warmup", 0},
                              {"--decay-steps", 1},
                              {"--wsd-decay-steps", 1}}) {
    int64_t n = 0;
    if (args->has(flag) && !parseInt(args->get(flag), lowest, n))
      return usageError(std::string(flag) +
                        " expects an integer >= " + std::to_string(lowest) +
                        ", got '" + args->get(flag) + "'");
  }

  int64_t steps = 0, saveEvery = 0, logEvery = 10, seed = 0;
  if (args->has("--steps") && !parseInt(args->get("--steps"), 0, steps))
    return usageError("--steps expects an integer >= 0, got '" +
                      args->get("--steps") + "'");
  if (args->has("--save-every") &&
      !parseInt(args->get("--save-every"), 1, saveEvery))
    return usageError("--save-every expects an integer >= 1, got '" +
                      args->get("--save-every") + "'");
  if (args->has("--resume") && args->has("--init-from"))
    return usageError("--resume and --init-from are alternatives: --resume "
                      "continues a run (its optimizer state and step), "
                      "--init-from starts a new one from its parameters");
  if (saveEvery && !args->has("--save"))
    return usageError("--save-every needs --save CKPT");
  if (args->has("--log-every") &&
      !parseInt(args->get("--log-every"), 1, logEvery))
    return usageError("--log-every expects an integer >= 1, got '" +
                      args->get("--log-every") + "'");
  if (std::string why = parseThreads(*args, options.threads); !why.empty())
    return usageError(why);
  bool skipNonFinite = args->get("--on-nonfinite", "stop") == "skip";
  options.skipNonFiniteSteps = skipNonFinite;
  options.findNonFinite = args->has("--find-nonfinite");
  options.backend = args->get("--backend", "cpu");
  options.cudaGraph = args->has("--cuda-graph");
  options.gpuPerDevice = args->has("--gpu-per-device");
  options.precision = args->get("--precision");
  if (args->has("--seed") && !parseInt(args->get("--seed"), 0, seed))
    return usageError("--seed expects an integer >= 0, got '" +
                      args->get("--seed") + "'");

  std::optional<MeshChoice> mesh = parseMeshChoice(*args, "run", exitCode);
  if (!mesh)
    return exitCode;
  if (mesh->mesh) {
    options.mesh = mesh->mesh->str();
    options.zero = mesh->zero;
    options.bucketMiB = mesh->bucketMiB;
    options.accumulate = mesh->accumulate;
    options.schedule = mesh->schedule;
    options.virtualStages = mesh->virtualStages;
    options.stages = mesh->stages;
    options.cluster = mesh->cluster;
    options.trace = args->has("--trace");
  } else {
    for (const char *flag : {"--trace", "--check-single"})
      if (args->has(flag))
        return usageError(std::string(flag) +
                          " needs a mesh (--mesh or --devices) or "
                          "--accumulate");
  }
  if (gJob.size > 1 && args->has("--check-single"))
    return usageError("--check-single runs in one process (this is rank " +
                      std::to_string(gJob.rank) + " of " +
                      std::to_string(gJob.size) +
                      "): check the mesh in one process, where it is "
                      "simulated exactly as its processes run it");
  if (args->has("--comm-timeout")) {
    if (!parseNumber(args->get("--comm-timeout"), options.commTimeout) ||
        !(options.commTimeout > 0))
      return usageError("--comm-timeout expects a number of seconds > 0, "
                        "got '" +
                        args->get("--comm-timeout") + "'");
  }
  double tolerance = -1;
  if (args->has("--check-tolerance") &&
      (!parseNumber(args->get("--check-tolerance"), tolerance) ||
       tolerance < 0))
    return usageError("--check-tolerance expects a number >= 0, got '" +
                      args->get("--check-tolerance") + "'");

  DataChoice data;
  if (std::string why = parseDataChoice(*args, data); !why.empty())
    return usageError(why);
  std::optional<Validation> validation;
  if (std::string why = Validation::parse(*args, data, validation);
      !why.empty())
    return usageError(why);
  // Found now, not at the first evaluation after hours of training.
  if (validation && mesh->mesh && mesh->mesh->findAxis(ir::kPipelineAxis))
    return usageError("--eval-every on a mesh with a pp axis is not built: "
                      "save a checkpoint and evaluate it with 'mgc eval' on "
                      "the same mesh without pp");

  // No output may overwrite an input, and the log or trace not the
  // checkpoint (--save may replace the checkpoint it resumed from: it is
  // written atomically, after the state was read).
  std::vector<NamedPath> inputs{
      {"the model file", modelPath},
      {"the --init-from checkpoint", args->get("--init-from")}};
  for (const auto &a : data.arrays)
    inputs.push_back({"the data of --data " + a.input, a.path});
  inputs.push_back(
      {args->has("--text") ? "the --text file" : "the --tokens file",
       data.tokenFile});
  if (validation)
    for (const NamedPath &file : validation->files())
      inputs.push_back(file);
  NamedPath saveOut{"--save", args->get("--save")},
      logOut{"--log-json", args->get("--log-json")},
      traceOut{"--trace", args->get("--trace")};
  for (std::string why :
       {outputOverwritesInput({saveOut, logOut, traceOut}, inputs),
        outputOverwritesInput(
            {logOut, traceOut},
            {{"the --resume checkpoint", args->get("--resume")},
             {"the --save checkpoint", saveOut.path}}),
        outputOverwritesInput({traceOut},
                              {{"the --log-json log", logOut.path}})})
    if (!why.empty())
      return usageError(why);
  // Outputs written at the end are checked now, not after the training.
  for (const NamedPath &output : {saveOut, traceOut})
    if (!output.path.empty())
      if (llvm::Error err = checkWritable(output.path))
        return errorExit(output.what + ": " + llvm::toString(std::move(err)) +
                         " (checked before the first step)");

  ModelFacts facts =
      inspectModel(modelPath, options.defines, options.batchSize);
  // What a model without a loss or parameters lacks, in the words of the
  // model file rather than the library's.
  if (facts.read && !facts.hasLoss)
    return errorExit("'" + modelPath +
                     "' has no loss: mgc run trains a model by minimising its "
                     "scalar `loss = ...` output (without one, 'mgc compile' "
                     "shows and checks the model)");
  if (facts.read && !facts.hasParams)
    return errorExit("'" + modelPath +
                     "' has a loss but no parameters: there is nothing to "
                     "train (declare the `param` tensors the loss depends "
                     "on)");
  if (!args->has("--seed") && facts.trainSeed)
    seed = static_cast<int64_t>(*facts.trainSeed);
  options.seed = static_cast<uint64_t>(seed);
  data.seed = options.seed;
  if (!args->has("--steps")) {
    if (!facts.trainSteps)
      return usageError("give --steps N (the model's train section sets no "
                        "steps)");
    steps = *facts.trainSteps;
  }
  // A decaying learning-rate schedule ends where the run does (train.steps
  // is the run's length), unless train.decay_steps says otherwise; a
  // compiled executable's schedule is fixed.
  if (args->has("--steps") && steps >= 1 && !facts.compiled)
    options.train["steps"] = std::to_string(steps);
  // Ranks that would train on other steps or data are refused at start.
  if (gJob.size > 1) {
    options.sameOnEveryRank["--steps"] = std::to_string(steps);
    options.sameOnEveryRank["the data"] = dataIdentity(data);
  }

  auto session = Session::create(modelPath, options);
  if (!session)
    return errorExit(session.status().message());
  Session &s = **session;
  // Rank 0 speaks for the job: progress, the summary and the JSON log.
  bool speaker = s.rank() == 0;
  if (speaker) {
    warnPastSchedule(s, facts.compiled, steps);
    for (const std::string &w : s.warnings())
      llvm::errs() << "mgc run: warning: " << w << "\n";
  }
  llvm::raw_ostream &out = speaker ? llvm::outs() : llvm::nulls();
  if (Status st = loadStartingPoint(s, args->get("--resume"),
                                    args->get("--init-from"), &out);
      !st)
    return errorExit(st.message());
  std::unique_ptr<SingleDeviceCheck> check;
  if (args->has("--check-single")) {
    std::string precision =
        options.precision.empty() ? facts.trainPrecision : options.precision;
    bool lowPrecision = precision == "bf16" || precision == "fp16";
    auto made = SingleDeviceCheck::create(
        modelPath, options, lowPrecision,
        tolerance >= 0 ? std::optional<double>(tolerance) : std::nullopt);
    if (!made)
      return errorExit(made.status().message());
    check = std::move(*made);
    if (Status st = loadStartingPoint(check->reference(), args->get("--resume"),
                                      args->get("--init-from"), nullptr);
        !st)
      return errorExit(st.message());
    if (std::string why = check->start(s); !why.empty())
      return errorExit(why);
  }
  int64_t firstStep = s.stepCount();
  if (args->has("--resume")) {
    // The run continues with the checkpoint's seed (the session adopts it),
    // so its data follows the same shuffle as the run that saved it.
    if (args->has("--seed") && s.seed() != data.seed)
      llvm::errs() << "mgc run: warning: --seed " << data.seed << " ignored: '"
                   << args->get("--resume") << "' continues a run with seed "
                   << s.seed() << "\n";
    data.seed = s.seed();
  }

  auto setup = makeDataSource(s.inputs(), facts, data);
  if (!setup)
    return errorExit(llvm::toString(setup.takeError()));
  // With several processes each rank reads only the rows its devices use.
  if (s.processCount() > 1)
    for (const TensorInfo &input : s.inputs()) {
      auto [first, last] = s.inputRows(input.name);
      setup->source->restrictRows(input.name, {first, last});
    }
  if (validation)
    if (auto err = validation->open(s.inputs(), facts))
      return errorExit("--eval-data: " + llvm::toString(std::move(err)));
  // A resumed run sees the batches an uninterrupted one would have.
  if (auto err = setup->source->seek(firstStep))
    return errorExit(llvm::toString(std::move(err)));

  const std::string savePath = args->get("--save");
  // The step of the last checkpoint this run wrote (or resumed from, when
  // --save names it), for the message of a run that stops on a loss that
  // is not finite.
  std::optional<int64_t> lastSaved;
  if (args->has("--resume") && args->get("--resume") == savePath)
    lastSaved = s.stepCount();
  // A save that fails (a full disk) leaves the file as it was: say what it
  // holds, so that the user knows what a --resume would start from.
  auto save = [&]() -> int {
    Status st = s.saveCheckpoint(savePath);
    if (st)
      return kSuccess;
    std::string left = lastSaved ? "'" + savePath + "' still holds step " +
                                       std::to_string(*lastSaved)
                       : llvm::sys::fs::exists(savePath)
                           ? "'" + savePath + "' was left as it was"
                           : "no checkpoint was written";
    return errorExit(st.message() + "; " + left);
  };

  // Under a launcher each rank's stdout is a pseudo-terminal that mpirun
  // forwards, whatever mpirun's own stdout is: print plain lines.
  bool terminal =
      llvm::sys::Process::StandardOutIsDisplayed() && s.processCount() <= 1;
  std::string units = setup->tokensPerStep ? "tok" : "samples";
  int64_t perStep =
      setup->tokensPerStep ? setup->tokensPerStep : setup->samplesPerStep;
  ProgressReporter progress(out, terminal, logEvery, firstStep, steps, units,
                            perStep);
  if (args->has("--log-json") && speaker) {
    std::string err = progress.openJsonLog(args->get("--log-json"));
    if (!err.empty())
      return errorExit(err);
  }
  if (firstStep >= steps) {
    // `--steps 0 --save` writes the initial state (and a resumed run past
    // its end a copy of the checkpoint's).
    std::string where = "already at step " + std::to_string(firstStep) +
                        " of " + std::to_string(steps);
    if (savePath.empty()) {
      out << where << "; nothing to do\n";
      return kSuccess;
    }
    if (int rc = save())
      return rc;
    out << where << "; saved step " << firstStep << " to " << savePath << "\n";
    return kSuccess;
  }
  out << "training " << modelPath << " from step " << firstStep << " to "
      << steps << " on " << setup->description;
  // Which backend "auto" chose, and any that is not the default.
  if (options.backend != "cpu")
    out << ", backend " << s.backendName();
  if (mesh->mesh)
    out << ", mesh " << s.meshText() << " (" << mesh->mesh->numDevices()
        << (s.processCount() > 1
                ? " devices on " + std::to_string(s.processCount()) +
                      " processes"
                : std::string(" simulated devices"))
        << (mesh->zero ? ", ZeRO " + std::to_string(mesh->zero) : "") << ")";
  out << "\n";
  out.flush();

  gInterrupted = 0;
  struct sigaction action = {}, previousInt = {}, previousTerm = {};
  action.sa_handler = onInterrupt;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &previousInt);
  sigaction(SIGTERM, &action, &previousTerm);
  struct RestoreSignals {
    struct sigaction savedInt, savedTerm;
    ~RestoreSignals() {
      sigaction(SIGINT, &savedInt, nullptr);
      sigaction(SIGTERM, &savedTerm, nullptr);
    }
  } restore{previousInt, previousTerm};
  // Whether to stop before the next step. With several processes the ranks
  // agree (a signal may reach them at different steps), so that all stop
  // after the same step and save together.
  // Whether any rank was asked to stop; nullopt with `why` set when the
  // ranks could not say (one stopped answering).
  std::string why;
  auto stopNow = [&]() -> std::optional<bool> {
    bool mine = gInterrupted != 0;
    if (s.processCount() <= 1)
      return mine;
    auto any = s.anyRank(mine);
    if (!any) {
      llvm::StringRef text = llvm::StringRef(any.status().message()).trim();
      text.consume_front("error: ");
      why = text.str();
      return std::nullopt;
    }
    if (*any && !gInterrupted)
      gInterrupted = SIGTERM; // a peer was stopped
    return *any;
  };

  // With a CUDA Graph the next batch is handed over before each step
  // (Session::feedNext), so that its copy to the device overlaps the step.
  bool handOver = options.cudaGraph;
  runtime::Batch batch, nextBatch;
  bool haveNext = false;
  int64_t skippedSteps = 0, overflowedSteps = 0;
  std::optional<StepResult> lastTransfers; // the last step with them measured
  // A failure between steps (reading the data, an evaluation) first saves
  // the state the steps reached, when a checkpoint was asked for, then
  // stops. In one process only: another rank may not have failed, and a
  // save is collective.
  auto stopAfterSaving = [&](const std::string &why) -> int {
    bool unsaved = !lastSaved || *lastSaved != s.stepCount();
    if (!savePath.empty() && s.processCount() <= 1 &&
        s.stepCount() > firstStep && unsaved) {
      progress.finish("stopped");
      if (int rc = save())
        return rc;
      out << "saved step " << s.stepCount() << " to " << savePath
          << " before stopping\n";
    }
    return errorExit(why);
  };
  // A failed --check-single stops the training at once, but the outputs
  // asked for (--trace, --save, the log) are written all the same; the
  // exit status carries the verdict.
  int checkFailed = kSuccess;
  while (s.stepCount() < steps) {
    std::optional<bool> stop = stopNow();
    if (!stop)
      return errorExit("the ranks could not agree whether to stop: " + why);
    if (*stop)
      break;
    auto start = std::chrono::steady_clock::now();
    if (haveNext) {
      batch = std::move(nextBatch); // fed already, by feedNext
      haveNext = false;
    } else {
      if (auto err = setup->source->next(batch))
        return stopAfterSaving(llvm::toString(std::move(err)));
      // The batch is read again only by --check-single's reference run:
      // otherwise its tensors move into the session, uncopied.
      for (auto &[name, tensor] : batch) {
        Status st = SessionInternals::feed(
            s, name, check ? runtime::Tensor(tensor) : std::move(tensor));
        if (!st)
          return stopAfterSaving(st.message());
      }
    }
    if (handOver && s.stepCount() + 1 < steps) {
      if (auto err = setup->source->next(nextBatch))
        return stopAfterSaving(llvm::toString(std::move(err)));
      for (auto &[name, tensor] : nextBatch) {
        Status st = SessionInternals::feed(s, name, tensor, true);
        if (!st)
          return stopAfterSaving(st.message());
      }
      haveNext = true;
    }
    auto result = s.step();
    if (!result)
      return errorExit(result.status().message());
    if (!result->finite()) {
      StepRecord record{result->step, result->loss, result->metrics,
                        std::chrono::duration<double>(
                            std::chrono::steady_clock::now() - start)
                            .count(),
                        result->skipped};
      progress.record(record);
      std::string what = nonFiniteText(*result);
      // Where it began, when looked for: a note after the message.
      auto noteOrigin = [&] {
        if (!result->nonFiniteOrigin.empty())
          llvm::errs() << "mgc run: note: step " << result->step << ": "
                       << result->nonFiniteOrigin << "\n";
      };
      if (result->skipped) {
        ++skippedSteps;
        llvm::errs() << "mgc run: warning: step " << result->step << ": "
                     << what << ": its update is undone (--on-nonfinite "
                     << "skip)\n";
        noteOrigin();
        continue;
      }
      progress.finish("stopped");
      if (!options.findNonFinite)
        what += " (--find-nonfinite names the op where it began)";
      int rc =
          errorExit("step " + std::to_string(result->step) + ": " + what +
                    ": training stops (--on-nonfinite stop; skip goes on)" +
                    (savePath.empty()
                         ? std::string()
                         : "; the parameters are not finite, so '" + savePath +
                               "' is not written" +
                               (lastSaved ? " (it holds step " +
                                                std::to_string(*lastSaved) + ")"
                                          : std::string())));
      noteOrigin();
      return rc;
    }
    StepRecord record;
    overflowedSteps += result->overflowed;
    record.step = result->step;
    record.loss = result->loss;
    record.metrics = result->metrics;
    record.stepSeconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    record.transfersMeasured = result->transfersMeasured;
    record.hostToDeviceBytes = result->hostToDeviceBytes;
    record.deviceToHostBytes = result->deviceToHostBytes;
    if (result->transfersMeasured)
      lastTransfers = *result;
    progress.record(record);
    if (check) {
      std::string diff = check->compareStep(s, *result, batch);
      if (!diff.empty()) {
        checkFailed = errorExit(diff);
        break;
      }
    }
    if (validation && validation->due(result->step, steps)) {
      auto evalStart = std::chrono::steady_clock::now();
      auto eval = validation->run(s);
      if (!eval)
        return stopAfterSaving("--eval-data: " +
                               llvm::toString(eval.takeError()));
      progress.recordEval(result->step, *eval, validation->description(),
                          std::chrono::duration<double>(
                              std::chrono::steady_clock::now() - evalStart)
                              .count());
      // The evaluation fed its own batches: the next step's, handed over
      // already, are fed again.
      if (haveNext)
        for (auto &[name, tensor] : nextBatch)
          if (Status st = SessionInternals::feed(s, name, tensor); !st)
            return stopAfterSaving(st.message());
    }
    if (saveEvery && result->step % saveEvery == 0 && result->step != steps) {
      if (int rc = save())
        return rc;
      lastSaved = result->step;
    }
  }
  progress.finish(checkFailed    ? "stopped"
                  : gInterrupted ? "interrupted"
                                 : "done");
  // What the last step moved between host and device, where measured on a
  // device that is not the host.
  if (lastTransfers && s.backendName() != "cpu")
    out << "host to device per step: "
        << backend::formatBytes(lastTransfers->hostToDeviceBytes) << " in, "
        << backend::formatBytes(lastTransfers->deviceToHostBytes)
        << " out (the last step)\n";
  if (overflowedSteps)
    out << "the loss scale skipped " << overflowedSteps << " of the steps "
        << "(their fp16 gradients overflowed; each halved the scale)\n";
  if (skippedSteps)
    out << "skipped " << skippedSteps << " of the steps (their loss or "
        << "gradient norm was not finite; --on-nonfinite skip)\n";
  if (mesh->mesh && mesh->mesh->findAxis(ir::kPipelineAxis)) {
    auto report = s.pipelineReport();
    if (!report)
      return errorExit(report.status().message());
    out << "pipeline: " << report->stages << " stages, " << report->schedule
        << ", " << report->microBatches << " micro-batches per step: bubble "
        << llvm::format("%.1f%%", 100 * report->bubble) << " measured, "
        << llvm::format("%.1f%%", 100 * report->predictedBubble)
        << " predicted; sent per step:";
    for (size_t d = 0; d < report->bytesPerStep.size(); ++d)
      out << (d ? "," : "") << " device " << d << " "
          << backend::formatBytes(
                 static_cast<uint64_t>(report->bytesPerStep[d]))
          << " (" << llvm::format("%.1f%%", 100 * report->waiting[d])
          << " waiting)";
    out << "\n";
  }
  // A pipeline's stage mesh (dp x tp) communicates in its apply part.
  const ir::MeshAxis *pp =
      mesh->mesh ? mesh->mesh->findAxis(ir::kPipelineAxis) : nullptr;
  if (mesh->mesh && mesh->mesh->numDevices() / (pp ? pp->size : 1) > 1) {
    auto devices = s.communication();
    if (!devices)
      return errorExit(devices.status().message());
    out << (pp ? "communication of the optimizer step per device (pp "
                 "outermost; sent per step):"
               : "communication per device (sent per step; share of the "
                 "step waiting on it):");
    for (size_t d = 0; d < devices->size(); ++d) {
      out << (d ? "," : "") << " device " << d << " "
          << backend::formatBytes(
                 static_cast<uint64_t>((*devices)[d].bytesPerStep));
      if (!pp)
        out << ", " << llvm::format("%.1f%%", 100 * (*devices)[d].exposed)
            << " exposed";
    }
    out << "\n";
  }
  // Timings of devices simulated in this process are not a verdict on the
  // mesh: say so where they are printed.
  if (mesh->mesh && s.processCount() <= 1 && s.backendName() == "cpu")
    out << "note: the " << mesh->mesh->numDevices()
        << " simulated devices share this machine's cores: the steps/s, "
           "exposed and waiting shares and the measured bubble show the "
           "plan's order and overlap, not the speed of the mesh on devices "
           "of its own (the bytes sent are exact)\n";
  if (check)
    check->summarize(checkFailed, out);
  if (args->has("--trace")) {
    Status st = s.writeTrace(args->get("--trace"));
    if (!st)
      return errorExit(st.message());
    out << "wrote the timeline to " << args->get("--trace") << "\n";
  }
  if (!savePath.empty()) {
    if (int rc = save())
      return rc;
    out << "saved step " << s.stepCount() << " to " << savePath << "\n";
  }
  if (gInterrupted)
    return 128 + gInterrupted;
  // A log that could not be written is an error, after the checkpoint.
  if (!progress.logError().empty()) {
    llvm::errs() << "mgc run: error: " << progress.logError()
                 << ": the log is incomplete\n";
    return kUserError;
  }
  return checkFailed;
}

} // namespace mgc::cli
