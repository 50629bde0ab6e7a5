// The options, usage and help text of `mgc run`.
#include "tools/mgc/RunSpec.h"
#include "tools/mgc/Commands.h"
#include "tools/mgc/MeshOptions.h"
#include "tools/mgc/RunData.h"
#include "tools/mgc/RunStart.h"
#include "tools/mgc/RunValidation.h"

#include <vector>

namespace mgc::cli {

namespace {

const TrainFlag kTrainFlags[] = {
    {"--lr", "lr", "X", "peak learning rate (train.lr)"},
    {"--optimizer", "optimizer", "NAME", "sgd or adamw (train.optimizer)"},
    {"--momentum", "momentum", "X", "SGD momentum (train.momentum)"},
    {"--weight-decay", "weight_decay", "X",
     "weight decay (train.weight_decay)"},
    {"--beta1", "beta1", "X", "AdamW beta1 (train.beta1)"},
    {"--beta2", "beta2", "X", "AdamW beta2 (train.beta2)"},
    {"--eps", "eps", "X", "AdamW epsilon (train.eps)"},
    {"--schedule", "schedule", "NAME",
     "constant, cosine, linear or wsd (train.schedule)"},
    {"--warmup", "warmup_steps", "N",
     "linear warm-up steps (train.warmup_steps)"},
    {"--decay-steps", "decay_steps", "N",
     "the step where a decaying schedule reaches --min-lr and stays "
     "(train.decay_steps; default: the run's steps)"},
    {"--wsd-decay-steps", "wsd_decay_steps", "N",
     "wsd: the length of the final linear decay, which ends at "
     "--decay-steps (train.wsd_decay_steps)"},
    {"--min-lr", "min_lr", "X",
     "final learning rate of a decaying schedule (train.min_lr)"},
    {"--clip-grad-norm", "clip_grad_norm", "X",
     "clip gradients to this global norm; 0 is off (train.clip_grad_norm)"},
};

} // namespace

llvm::ArrayRef<TrainFlag> trainFlags() { return kTrainFlags; }

const CommandSpec &runSpec() {
  static const CommandSpec spec = [] {
    CommandSpec s;
    s.name = "run";
    s.usage =
        "mgc run MODEL.mg|MODEL.mgx [-D NAME=VALUE]... [--batch-size N] "
        "[--steps N] [--seed S]\n"
        "       [--data NAME=FILE.npy]... [--text FILE | --tokens FILE "
        "--token-dtype u16|i32]\n"
        "       [--lr X] [--optimizer sgd|adamw] [--save CKPT] "
        "[--save-every K]\n"
        "       [--resume CKPT | --init-from CKPT] [--log-json FILE]\n"
        "       [--eval-every K --eval-data FILE|NAME=FILE.npy... "
        "[--eval-batches N]]\n"
        "       [--on-nonfinite stop|skip] [--find-nonfinite]\n"
        "       [--threads N] [--precision fp32|bf16|fp16]\n"
        "       [--mesh AXES | --devices N] [--zero STAGE] "
        "[--dp-weights W,...] [--bucket-mib MIB]\n"
        "       [--accumulate K | --microbatches M] [--pipeline-schedule NAME] "
        "[--virtual-stages V]\n"
        "       [--stages RANGES] [--cluster FILE.json]\n"
        "       [--trace FILE] [--check-single] "
        "[--comm-timeout S]\n"
        "       [--backend cpu|cuda|auto] [--cuda-graph] "
        "[--gpu-per-device]";
    s.summary = "Train a model on the CPU and report the loss.";
    s.positionalName = "a model file (MODEL.mg or MODEL.mgx)";
    s.minPositionals = s.maxPositionals = 1;
    s.options = {
        {"--steps", "N",
         "train until step N, counted from the start of training (a "
         "resumed run continues to N; 0 with --save writes the initial "
         "state); default: the train section's steps"},
        {"--seed", "S",
         "seed of the parameters and the data (default: train.seed, else 0)"},
        {"--int-range", "NAME=N",
         "synthetic data: integer input NAME holds values in [0, N)", true},
        {"--no-shuffle", "", "read .npy rows and token windows in order"},
    };
    // The model's sizes come first.
    std::vector<OptionSpec> sizes = modelSizeOptions();
    s.options.insert(s.options.begin(), sizes.begin(), sizes.end());
    // The data flags sit where they always have, before --int-range.
    auto intRange = s.options.end() - 2;
    std::vector<OptionSpec> data = dataOptions();
    s.options.insert(intRange, data.begin(), data.end());
    for (const TrainFlag &f : trainFlags())
      s.options.push_back({f.flag, f.metavar, f.help});
    for (OptionSpec o : std::vector<OptionSpec>{
             {"--save", "CKPT",
              "write a checkpoint at the end (and on Ctrl-C or SIGTERM), "
              "atomically"},
             {"--save-every", "K", "also write --save every K steps"},
             {"--resume", "CKPT", "continue from a checkpoint"},
             {"--init-from", "CKPT",
              "start from the parameters of a checkpoint, matched by name, "
              "in a model that may have changed (fine-tuning, a new head): "
              "reports what was loaded, what is new and what was unused; "
              "optimizer state and the step are not taken. A Hugging Face "
              "checkpoint (a folder with config.json, or a file torch wrote) "
              "is read through the model's name map"},
             hfMapOption(),
             {"--log-json", "FILE",
              "write one JSON object per step to FILE (null for a loss that "
              "is not finite)"},
             {"--log-every", "K",
              "when stdout is not a terminal, print a line every K steps "
              "(default 10; the first and last step always)"},
         })
      s.options.push_back(o);
    for (OptionSpec o : Validation::options())
      s.options.push_back(o);
    for (OptionSpec o : std::vector<OptionSpec>{
             {"--on-nonfinite",
              "WHAT",
              "when a step's loss or gradient norm is not finite: stop "
              "(default; exit 1 without writing --save, whose parameters "
              "would not be finite) or skip (undo the step's update and go "
              "on; costs a copy of the state per step)",
              false,
              {"stop", "skip"}},
             {"--find-nonfinite", "",
              "look for a NaN or an infinity after every op, so that a step "
              "that is not finite names the op and source line where it "
              "began (slower steps; CPU backend, no pp axis)"},
             {"--threads", "N",
              "CPU worker threads (default: one per core); a mesh in one "
              "process shares them among its simulated devices, at least one "
              "each"},
             {"--backend",
              "NAME",
              "cpu (default), cuda (CUDA devices: in one process a "
              "mesh's devices simulated on one GPU, over several "
              "processes a GPU per device, over NCCL) or auto (CUDA when "
              "a device is present, else the CPU; meshes on the CPU)",
              false,
              {"cpu", "cuda", "auto"}},
             {"--cuda-graph", "",
              "with the CUDA backend: capture the step as a CUDA Graph and "
              "replay it, each next batch copied in on a side stream while "
              "a step runs"},
             {"--gpu-per-device", "",
              "with the CUDA backend and a mesh in one process: run each "
              "device on a GPU of its own, over NCCL, instead of "
              "simulating them all on one GPU"},
             {"--precision",
              "P",
              "fp32, bf16 or fp16: bf16 (or f16) matmuls and activations, "
              "f32 weights, optimizer, norms and loss; fp16 with dynamic "
              "loss scaling (default: train.precision, else fp32; "
              "docs/mixed-precision.md)",
              false,
              {"fp32", "bf16", "fp16"}},
         })
      s.options.push_back(o);
    for (OptionSpec o : meshOptions())
      s.options.push_back(o);
    for (OptionSpec o : std::vector<OptionSpec>{
             {"--trace", "FILE",
              "with a mesh: write a timeline of every device's compute and "
              "communication queues (Chrome trace-event JSON; open it in "
              "Perfetto or chrome://tracing)"},
             {"--comm-timeout", "S",
              "with a mesh on several processes (mpirun, srun): seconds a "
              "collective waits for its peers before the job stops, naming "
              "the ranks that never arrived (default 300)"},
             {"--check-single", "",
              "with a mesh or --accumulate: train the same model on one "
              "device alongside, each step from the mesh's state; compare "
              "the loss, each parameter's gradient and the mesh's updates "
              "at every step; exit 1 on a difference"},
             {"--check-tolerance", "X",
              "relative tolerance of --check-single for the loss and the "
              "gradients (default: 1e-5 for the loss, 1e-3 for gradients, "
              "0.1 for a model that branches on values (relu, max); in "
              "bf16 1e-2 for the loss, and gradients may also differ by 4 "
              "times bf16's own error)"},
         })
      s.options.push_back(o);
    s.details =
        "Data: synthetic by default (seeded normal floats; integer inputs "
        "uniform in\n[0, N) where N comes from their use: the rows of the "
        "embedding table they\nindex or the class count of the cross_entropy "
        "they are targets of; otherwise\n2, or --int-range). --data binds "
        ".npy files by input name; --text/--tokens\nfeed a language model's "
        "tokens, targets and positions inputs.\n\n"
        "Output: on a terminal one progress line redrawn in place; otherwise "
        "a line\nevery --log-every steps. Then a summary line. Ctrl-C or "
        "SIGTERM stops after\nthe current step (and saves with --save); with "
        "several processes every rank\nstops after the same step.\n\n"
        "Several processes: under mpirun or srun the mesh's devices are "
        "shared out among\nthe processes (their count equal to the mesh's "
        "or dividing it), which talk over\nMPI; rank 0 prints and saves, "
        "errors start with [rank R] (docs/processes.md).\n\n"
        "Exit status: 0 success, 1 bad model, data or checkpoint, a step "
        "whose loss or\ngradient norm is not finite (--on-nonfinite stop), "
        "or an output that could\nnot be written (the log, standard output: "
        "after saving), 2 usage error (an output\nnaming an input among "
        "them), 130 interrupted by Ctrl-C, 143 by SIGTERM.\n";
    return s;
  }();
  return spec;
}

} // namespace mgc::cli
