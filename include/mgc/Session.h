// The mgc executor library: train or run a model from a C++ program.
//
//   #include <mgc/Session.h>
//   auto session = mgc::Session::create("mlp.mg", {});
//   if (!session) { std::cerr << session.status().message(); return 1; }
//   (*session)->feed("x", x);
//   (*session)->feed("y", y);
//   auto result = (*session)->step();   // one training step; result->loss
//
// This header and its neighbours use only the C++ standard library, so an
// embedding program needs nothing but find_package(mgc).
#pragma once

#include "mgc/Export.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace mgc {

enum class DType { F32, BF16, F16, F64, I32, I64 };
MGC_API const char *dtypeName(DType dtype); // "f32"
MGC_API size_t dtypeSize(DType dtype);

// A dense, row-major host tensor that owns its bytes (bf16/f16 as 16 bits).
class MGC_API Tensor {
public:
  Tensor() = default;
  static Tensor zeros(DType dtype, std::vector<int64_t> shape);
  static Tensor fromFloats(std::vector<int64_t> shape,
                           const std::vector<float> &values);
  static Tensor fromInts(std::vector<int64_t> shape,
                         const std::vector<int32_t> &values);

  DType dtype() const { return dtype_; }
  const std::vector<int64_t> &shape() const { return shape_; }
  int64_t numel() const;
  std::byte *data() { return bytes_.data(); }
  const std::byte *data() const { return bytes_.data(); }
  size_t nbytes() const { return bytes_.size(); }
  // Every element converted to float (integers exactly up to 2^24).
  std::vector<float> toFloats() const;

private:
  DType dtype_ = DType::F32;
  std::vector<int64_t> shape_;
  std::vector<std::byte> bytes_;
};

// Success, or a message in the compiler's format (file:line:col: error: ...,
// with the source line and a caret where there is one).
class Status {
public:
  static Status ok() { return Status(); }
  static Status error(std::string message) {
    Status s;
    s.message_ = std::move(message);
    s.failed_ = true;
    return s;
  }
  bool isOk() const { return !failed_; }
  explicit operator bool() const { return !failed_; }
  const std::string &message() const { return message_; }

private:
  bool failed_ = false;
  std::string message_;
};

// A value or the Status that says why there is none.
template <typename T> class Result {
public:
  Result(T value) : value_(std::move(value)) {}
  Result(Status status) : status_(std::move(status)) {}
  explicit operator bool() const { return value_.has_value(); }
  T &operator*() { return *value_; }
  const T &operator*() const { return *value_; }
  T *operator->() { return &*value_; }
  const T *operator->() const { return &*value_; }
  const Status &status() const { return status_; }

private:
  std::optional<T> value_;
  Status status_;
};

struct TensorInfo {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
};

struct SessionOptions {
  // Overrides of the model file's constants (like mgc's -D NAME=VALUE).
  std::map<std::string, std::string> defines;
  // The batch size (like mgc's --batch-size N): sets the constant that the
  // model's first input writes its leading dimension with, as a define
  // would; the batch of a whole step, over every dp device and micro-batch.
  // 0: as the model file says.
  int64_t batchSize = 0;
  // Overrides of the model file's train section, e.g. {"lr", "3e-4"},
  // {"optimizer", "sgd"}; see docs/training.md for the keys.
  std::map<std::string, std::string> train;
  // Parameters are initialised from this seed.
  uint64_t seed = 0;
  // Worker threads of the CPU backend; 0 means one per core.
  int threads = 0;
  // Train on a mesh of simulated devices, e.g. "dp=4" or "dp=2,tp=2"
  // (weights of devices of different speed: "dp=2[3,1]"); empty: one
  // device. The step's results are those of one device (docs/parallel.md).
  std::string mesh;
  // ZeRO stage on the dp axis: 0 (none), 1 or 2.
  int zero = 0;
  // Gradient all-reduces fused into buckets of this many MiB (0: none).
  double bucketMiB = 25;
  // Gradient accumulation: each batch is split into this many micro-batches
  // per device, run one after another, and the summed gradients are
  // communicated and applied once per step (with or without a mesh); the
  // step equals the step on the whole batch. 1: none.
  int accumulate = 1;
  // With a pp axis in the mesh, a pipeline (docs/pipeline.md): each batch
  // is split into `accumulate` micro-batches (1: as many as the pipeline
  // has stages) that flow through the stages in the order of `schedule`:
  // "gpipe", "1f1b" (the default, when empty), "interleaved" (with
  // `virtualStages` model chunks per device) or "zb-h1". `stages` gives
  // the layers of each stage, "0-5,6-11"; empty: balanced by the cost
  // model.
  std::string schedule;
  int virtualStages = 1;
  std::string stages;
  // Without `stages`: a cluster description (JSON, docs/pipeline.md: one
  // device per device of the mesh) whose devices' speed, memory and links
  // the stage balancer balances for.
  std::string cluster;
  // Record a timeline of every device's queues (see writeTrace).
  bool trace = false;
  // With a mesh, in a job launched as several processes (mpirun, srun:
  // their variables say so, docs/processes.md): "auto" shares the mesh's
  // devices out among the processes, which talk over MPI (every rank then
  // calls step(), parameter(), setParameter() and the checkpoint calls
  // together); "one": this process runs every device itself.
  std::string processes = "auto";
  // Seconds a collective or send/recv between processes waits for its
  // peers before the step fails naming the ranks that never arrived.
  double commTimeout = 300;
  // With several processes: settings outside the session that every rank
  // must give alike, by the name a user knows them by (mgc run's "--steps",
  // "the data"). The session compares them with its own plan when it
  // starts, and refuses a difference, naming it and both values.
  std::map<std::string, std::string> sameOnEveryRank;
  // Where the step and forward programs run: "cpu"; "cuda", one CUDA device
  // (an error where there is none, or in a build without CUDA); "auto", CUDA
  // when a device is present, else the CPU. With "cuda" a mesh or
  // accumulation in one process runs with every device simulated on one
  // GPU (or on a GPU each, gpuPerDevice); over several processes each
  // device runs on a GPU of its own and they talk over NCCL. "auto" keeps
  // meshes on the CPU. Parameters and checkpoints are host tensors either
  // way.
  std::string backend = "cpu";
  // With "cuda" and a mesh in one process: run each device on a GPU of its
  // own, over NCCL, instead of simulating them all on one GPU.
  bool gpuPerDevice = false;
  // With the CUDA backend: capture the step as a CUDA Graph on the first
  // step and replay it after.
  bool cudaGraph = false;
  // Compute precision: "fp32", "bf16" (bf16 matmuls and activations;
  // parameters, optimizer state, norms and the loss stay f32) or "fp16"
  // (the same in f16, with dynamic loss scaling; see
  // docs/mixed-precision.md). Empty: the model file's train.precision,
  // else fp32.
  std::string precision;
  // A step whose loss or gradient norm is not finite leaves the parameters
  // and the optimizer state as they were before it (StepResult::skipped);
  // the step counter still advances, so that the learning-rate schedule and
  // the data stay in step (like torch's GradScaler skipping
  // optimizer.step()). It costs a copy of the state before every step.
  bool skipNonFiniteSteps = false;
  // After every op of a step, look for a NaN or an infinity in its result,
  // so that a step that is not finite says where its values first stopped
  // being finite (StepResult::nonFiniteOrigin), like torch's anomaly
  // detection. It scans every result: steps run slower. The CPU backend,
  // on one device or a mesh without a pp axis.
  bool findNonFinite = false;
  // The name map that reads Hugging Face checkpoints into this model's
  // parameters and writes them back (initFrom, exportHuggingFace;
  // docs/checkpoints.md). Empty: MODEL.hf.json beside a model file
  // MODEL.mg, where there is one.
  std::string hfMap;
};

// One device's communication on a mesh (Session::communication).
// A pipeline's schedule as it ran (a mesh with a pp axis), over the steps
// so far.
struct PipelineReport {
  int stages = 0;       // pipeline devices
  int microBatches = 0; // per step
  std::string schedule; // "1f1b", ...
  // The share of the devices' time spent not computing, 1 - (time the
  // devices computed) / (devices x the micro-batches' time): measured, and
  // predicted by the schedule's simulation on each stage's FLOPs.
  double bubble = 0, predictedBubble = 0;
  // Per pipeline device (the devices of its stage together): bytes it sent
  // per step, and the share of the micro-batches' time its devices waited
  // for messages, on average.
  std::vector<double> bytesPerStep, waiting;
};

// What Session::initFrom took from a checkpoint, by tensor name (sorted).
struct InitFromReport {
  std::vector<std::string> loaded;  // parameters given the checkpoint's value
  std::vector<std::string> fresh;   // parameters it lacks: initial values kept
  std::vector<std::string> unused;  // its tensors the model has no use for
  std::vector<std::string> skipped; // its optimizer state, not taken
  // A Hugging Face checkpoint: the name map read, and what it did beyond
  // renaming (a vocabulary padded, position rows cut, a part dropped).
  std::string hfMap;
  std::vector<std::string> notes;
};

// How Session::exportHuggingFace writes a checkpoint.
struct HuggingFaceExport {
  // The vocabulary to write (a model padded to a multiple of 64 writes the
  // tokenizer's): 0, the model's.
  int64_t vocabulary = 0;
  DType dtype = DType::F32; // the tensors' type: F32, BF16 or F16
};

struct DeviceCommunication {
  // The share of its steps' time that its compute queue waited on
  // communication: the exposed communication, what overlap did not hide.
  double exposed = 0;
  // Bytes it sent to other devices per step: the MPI communicator's
  // messages, or in one process what they would be.
  double bytesPerStep = 0;
};

struct StepResult {
  int64_t step = 0; // the step just completed, counted from 1
  double loss = 0;
  // Other scalar outputs of the step, e.g. "lr" and "grad_norm".
  std::map<std::string, double> metrics;
  // The loss and "grad_norm" (when the step has one) are finite numbers;
  // or the step overflowed (below), which is not a failure.
  bool finite() const;
  // fp16's dynamic loss scaling (docs/mixed-precision.md): the scaled
  // gradients were not all finite, so the step left the parameters and the
  // optimizer state as they were and halved the loss scale (metrics
  // "loss_scale" holds the scale the step used).
  bool overflowed = false;
  // With SessionOptions::skipNonFiniteSteps: the step was not finite and
  // its update was undone.
  bool skipped = false;
  // With SessionOptions::findNonFinite, when the step was not finite: the
  // first op whose result held a NaN or an infinity, with its source line
  // and (on a mesh) its device, and whether its operands were finite.
  std::string nonFiniteOrigin;
  // Bytes the step copied from the host to the devices and back (this
  // process's devices), where the session measures them: 0 and 0 on the
  // CPU (the host is the device); on CUDA, the batch in and the scalars and
  // step counter out once the parameters and state are on the device (on a
  // mesh with accumulation, the parameters and gradient sums too). False
  // transfersMeasured where a device mesh does not measure them.
  bool transfersMeasured = false;
  uint64_t hostToDeviceBytes = 0, deviceToHostBytes = 0;
};

// Incremental decoding of a language model (Session::startDecoding,
// docs/generate.md): the inputs and output that make it one.
struct DecodeOptions {
  // The integer input holding the tokens; its last axis is the sequence.
  std::string tokensInput = "tokens";
  // An integer input [T] holding the positions 0..T-1, if the model has one.
  std::string positionsInput;
  // The output holding the logits [..., T, V].
  std::string logitsOutput = "logits";
};

class MGC_API Session {
public:
  // From a model file (.mg) or a compiled executable (.mgx, see
  // docs/executable.md).
  static Result<std::unique_ptr<Session>> create(const std::string &path,
                                                 const SessionOptions &options);
  ~Session();
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;

  // The model's data inputs and its trained parameters.
  std::vector<TensorInfo> inputs() const;
  std::vector<TensorInfo> parameters() const;

  // Binds a batch to a data input (checked against its type). Inputs stay
  // bound until fed again.
  Status feed(const std::string &input, Tensor value);
  // Binds a batch to a data input for the step after the next one (checked
  // as feed): the next step() runs on the inputs fed now, then these become
  // the fed ones. With the CUDA backend and cudaGraph, when every input has
  // a next batch, it is copied to the device on a side stream while the
  // next step runs (docs/cuda-backend.md); elsewhere it is only bound
  // later. A feed() after it replaces the value for that step as usual.
  Status feedNext(const std::string &input, Tensor value);

  // One training step (forward, backward, optimizer update) on the fed
  // inputs. Fails if the model has no loss.
  Result<StepResult> step();
  // Forward only, for inference: the model's outputs on the fed inputs;
  // parameters are not changed.
  Result<std::map<std::string, Tensor>> forward();
  // The scalar outputs of the forward program on the fed inputs (the loss
  // and, for a classifier, its accuracy): for evaluation (mgc eval). On a
  // session with a mesh it runs on the mesh's devices, each its part of the
  // batch and of the parameters (no pp axis); otherwise as forward().
  Result<std::map<std::string, double>> evaluate();

  // Decoding a language model one position at a time with a key/value
  // cache (mgc generate): startDecoding builds the program that computes
  // one position's logits from its token and the cached keys and values of
  // every causal attention (passes/Decode.h), and empties the cache; each
  // decodeNext feeds every sequence's token at the next position (the
  // tokens input's type with a last axis of 1) and returns the logits
  // there ([..., 1, V]). Needs a session made from a model file, on the
  // CPU, without a mesh; the parameters are the session's current ones.
  Status startDecoding(const DecodeOptions &options);
  Result<Tensor> decodeNext(const Tensor &tokens);
  // The positions the cache holds (the model's context, T) and how many of
  // them decodeNext has filled since startDecoding.
  int64_t decodeContext() const;
  int64_t decodePosition() const;

  Result<Tensor> parameter(const std::string &name) const;
  Status setParameter(const std::string &name, const Tensor &value);
  // Steps completed so far (restored by loadCheckpoint).
  int64_t stepCount() const;
  // The run's seed: SessionOptions::seed, or the seed of the run that saved
  // the checkpoint loadCheckpoint loaded (data shuffles follow it).
  uint64_t seed() const;
  // "cpu" or "cuda": the backend the session runs on (what "auto" chose).
  const std::string &backendName() const;

  // On a mesh: per device (by index), its communication over the steps run
  // so far. With several processes every rank calls it and gets every
  // device's. With a pp axis: per device of the whole mesh (pp outermost),
  // the bytes of its optimizer steps (the stages' messages are in
  // pipelineReport()), `exposed` not measured (0).
  Result<std::vector<DeviceCommunication>> communication() const;
  // On a mesh with a pp axis: how its pipeline ran (with several
  // processes every rank calls it); an error otherwise.
  Result<PipelineReport> pipelineReport() const;

  // Writes the timeline of the steps run so far on a mesh (options.trace) as
  // a Chrome trace-event JSON file (opens in Perfetto, chrome://tracing).
  // With several processes every rank calls it and rank 0 writes every
  // device's timeline (each rank's times from its own first step).
  Status writeTrace(const std::string &path) const;

  // safetensors checkpoints with parameters, optimizer state and metadata;
  // written atomically (docs/checkpoints.md). With several processes every
  // rank calls both: each rank writes the parts its devices hold to a file
  // of its own, rank 0 an index last (`path` itself); loading takes either
  // form, on any mesh or process count.
  Status saveCheckpoint(const std::string &path) const;
  Status loadCheckpoint(const std::string &path);
  // Starts from another run's weights in a model that may have changed
  // (fine-tuning, a new head), like torch's load_state_dict(strict=False):
  // every parameter the checkpoint has by name takes its value, the others
  // keep their values. The checkpoint's optimizer state, step counter and
  // seed are not taken: a new session trains from step 0 with fresh
  // optimizer state and its own seed. A parameter of another
  // type, or a checkpoint sharing no parameter with the model, is an error
  // and changes nothing. A Hugging Face checkpoint (a folder with
  // model.safetensors and config.json, or a file torch's writer marked) is
  // read through the session's name map (SessionOptions::hfMap): its
  // config.json must fit the model's constants.
  Result<InitFromReport> initFrom(const std::string &path);
  // Writes the parameters as a Hugging Face checkpoint: `folder`/
  // model.safetensors and config.json, through the session's name map
  // (SessionOptions::hfMap), so that transformers' from_pretrained loads
  // them. Needs a session made from a model file.
  Status exportHuggingFace(const std::string &folder,
                           const HuggingFaceExport &options = {}) const;

  // With a mesh shared among several processes: this process's rank and
  // the number of processes (0 and 1 otherwise).
  int rank() const;
  int processCount() const;
  // The mesh the step runs on, as "dp=8[15,15,15,15,1,1,1,1],tp=2": the
  // options' mesh with the dp shares a cluster gave; "" without one.
  std::string meshText() const;
  // What building the session's plan found that a user would not expect,
  // one line each without a prefix: tensor parallelism that does not fit
  // the model (a tp that does not divide attention's heads or a hinted
  // dimension, so the plan moves values between splits; or a model without
  // tp hints, computed whole on every tp device). Empty for a plan that
  // fits.
  std::vector<std::string> warnings() const;
  // The rows [first, second) of input `name`'s first dimension that this
  // process's devices read each step: with several processes a rank's
  // share of a batched input (feed() still takes the whole batch, and the
  // other rows may be left zero); otherwise every row.
  std::pair<int64_t, int64_t> inputRows(const std::string &name) const;
  // Whether `flag` is true on any rank (every rank calls it; with one
  // process, `flag`): for decisions the ranks must take together, such as
  // stopping after a signal.
  Result<bool> anyRank(bool flag) const;

  // Ends this process with `exitCode` and, when it is one of a job of
  // several processes whose sessions talk over MPI, every other process of
  // the job too (their steps would otherwise wait for this one until the
  // timeout). For a rank that meets an error its peers cannot see.
  [[noreturn]] static void abortJob(int exitCode);

  struct Impl;

private:
  // The mgc tool's access to the implementation (feeding its batches
  // without the public Tensor's copies: runtime/session/SessionInternals.h).
  friend struct SessionInternals;
  explicit Session(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

} // namespace mgc
