// The CUDA executor: one device allocation (CudaDeviceLayout.h), operands
// resolved once to device pointers, and a step that copies the
// arguments in, enqueues every launch (or replays the captured graph), and
// copies the results and the error record out with one synchronisation.
//
// The arena and the op order are the launch plan's (backend/LaunchGroups.h):
// the executable's order with the optimizer's update ops brought together,
// and a placement in which a group's operands and results never share
// bytes. With a graph, inputs have two sets of buffers: a run reads one
// while the inputs of the next run are copied into the other on the copy
// stream (RunControl::next), and one graph is captured per set.
#include "backend/cuda/CudaExecutor.h"

#include "backend/DeviceMesh.h"
#include "backend/MemoryPlan.h"
#include "backend/cuda/CudaCheck.h"
#include "backend/cuda/CudaDevice.h"
#include "backend/cuda/CudaDeviceLayout.h"
#include "backend/cuda/CudaGroupLaunch.h"
#include "backend/cuda/CudaKernels.h"
#include "backend/cuda/Launch.h"

#include "llvm/ADT/DenseMap.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstring>

namespace mgc::backend::cuda {

namespace {} // namespace

struct CudaExecutor::State {
  const Executable &exe;
  CudaOptions options;
  LaunchPlan plan;
  Layout layout;
  std::string deviceName;
  std::byte *base = nullptr;
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  cudaGraphExec_t graphs[2] = {nullptr, nullptr}; // by input set

  // Inputs handed over early: copied from `staging` (pinned host memory)
  // on `copyStream` after `before` (the compute stream's work before the
  // step that runs meanwhile), `copied` recorded when done.
  cudaStream_t copyStream = nullptr;
  cudaEvent_t before = nullptr, copied = nullptr;
  std::byte *staging = nullptr;
  std::vector<uint64_t> stagingOffsets; // by graph argument (inputs only)
  int stagedSet = -1;                   // the set holding the next inputs
  int lastSet = 0;                      // the set the last run read

  // With a communicator: the communication stream, and per communication
  // op (by ticket, in program order) the event the compute stream records
  // as it is issued and the one the communication stream records when it
  // is done.
  cudaStream_t commStream = nullptr;
  std::vector<cudaEvent_t> issued, finished;
  // Timing events of the compute stream: the step's ends, and around each
  // wait for communication (at most one wait per communication op), for
  // lastStreamTimes(); `waits` of them used by the last step.
  cudaEvent_t stepBegin = nullptr, stepEnd = nullptr;
  std::vector<cudaEvent_t> waitBegin, waitEnd;
  size_t waits = 0;
  StreamTimes times;
  // Bytes copied between host and device since the last run began.
  TransferBytes transfers;
  // With CudaOptions::trace: timing events around each step's launch.
  std::vector<cudaEvent_t> opBegin, opEnd;
  std::vector<TraceEvent> trace;

  std::vector<const ir::Value *> arguments; // graph arguments in order
  llvm::DenseMap<const ir::Value *, int> argumentIndex;
  // With CudaOptions::stateOf: the holder's buffer of each persistent
  // argument.
  llvm::DenseMap<const ir::Value *, void *> sharedAt;
  llvm::DenseMap<const ir::Value *, uint64_t> offsetOf; // arena offsets
  struct Step {
    const ir::Op *op;  // the op, or the first op of a group
    uint32_t position; // of `op` in the executable's order (messages)
    CudaKernelFn kernel = nullptr;
    std::vector<DeviceTensor> operands[2]; // by input set
    DeviceTensor out;
    std::unique_ptr<MatmulPlan> matmul;
    std::unique_ptr<GroupLaunch> group;                    // a grouped launch
    FusedGroupTensor *descriptors[2] = {nullptr, nullptr}; // device, by set
    // A communication op: its ticket (index into issued/finished), else -1.
    int32_t ticket = -1;
    // Communication ops (by ticket order) that must be done before it runs.
    size_t needDone = 0;
    // With CudaOptions::trace: its name and detail on the timeline.
    std::string traceName, traceDetail;
  };
  std::vector<Step> steps;

  explicit State(const Executable &exe) : exe(exe) {}
  ~State() {
    cudaSetDevice(options.gpu);
    for (cudaGraphExec_t g : graphs)
      if (g)
        cudaGraphExecDestroy(g);
    if (copyStream)
      cudaStreamSynchronize(copyStream);
    if (lt)
      cublasLtDestroy(lt);
    if (before)
      cudaEventDestroy(before);
    if (copied)
      cudaEventDestroy(copied);
    if (copyStream)
      cudaStreamDestroy(copyStream);
    if (commStream) {
      cudaStreamSynchronize(commStream);
      cudaStreamDestroy(commStream);
    }
    for (auto *events :
         {&issued, &finished, &waitBegin, &waitEnd, &opBegin, &opEnd})
      for (cudaEvent_t e : *events)
        cudaEventDestroy(e);
    for (cudaEvent_t e : {stepBegin, stepEnd})
      if (e)
        cudaEventDestroy(e);
    if (stream)
      cudaStreamDestroy(stream);
    if (staging)
      cudaFreeHost(staging);
    if (base)
      cudaFree(base);
  }

  // Points every persistent argument at `holder`'s buffer of the same
  // name (CudaOptions::stateOf).
  LogicalResult shareStateOf(const CudaExecutor &holder,
                             DiagnosticEngine &diag) {
    State &h = *holder.s_;
    if (h.options.gpu != options.gpu) {
      diag.error("an executor shares the state of one on another GPU (" +
                 std::to_string(h.options.gpu) + ", not " +
                 std::to_string(options.gpu) + ") (internal error)");
      return failure();
    }
    for (const ir::Value *arg : arguments) {
      if (!arg->isPersistent())
        continue;
      const ir::Value *held = h.exe.module->graph().findArgument(arg->name());
      if (!held || held->type() != arg->type()) {
        diag.error(
            "'" + arg->name() + "' (" + arg->type().str() +
            ") is not among the state of the executor it shares " +
            (held ? "(it holds " + held->type().str() + ")" : std::string()) +
            " (internal error)");
        return failure();
      }
      sharedAt[arg] = h.tensorOf(held).data;
    }
    return success();
  }

  // The executor whose argument buffers take the outputs left on the
  // device (CudaOptions::outputsInto, or the holder), or null.
  const CudaExecutor *outputTarget() const {
    return options.outputsInto ? options.outputsInto : options.stateOf;
  }
  // That executor's argument that output `o` goes into
  // (RunControl::heldOutputs), or null.
  const ir::Value *leftInHolder(const ir::Output &o) const {
    const CudaExecutor *into = outputTarget();
    if (!into)
      return nullptr;
    const ir::Value *arg = into->s_->exe.module->graph().findArgument(o.name);
    return arg && !arg->isPersistent() && arg->type() == o.value->type()
               ? arg
               : nullptr;
  }
  // Copies output `o` into its holder's argument buffer, or adds it to
  // what is there (`add`), on the stream, as runtime::sumTensors adds.
  LogicalResult leaveInHolder(const ir::Output &o, bool add, int set,
                              DiagnosticEngine &diag) {
    const ir::Value *arg = leftInHolder(o);
    if (!arg)
      return success();
    DeviceTensor to = outputTarget()->s_->tensorOf(arg);
    DeviceTensor from = tensorOf(o.value, set);
    int64_t n = o.value->type().size();
    if (!add)
      return MGC_CUDA_CHECK(cudaMemcpyAsync(to.data, from.data,
                                            typeBytes(o.value->type()),
                                            cudaMemcpyDeviceToDevice, stream),
                            diag, nullptr);
    ReduceParts parts;
    parts.src[parts.count++] = to.data;
    parts.src[parts.count++] = from.data;
    return MGC_CUDA_CHECK(
        launchSumParts(stream, toDt(o.value->type().dtype), parts, to.data, n),
        diag, nullptr);
  }

  DeviceTensor tensorOf(const ir::Value *v, int set = 0) {
    if (auto shared = sharedAt.find(v); shared != sharedAt.end())
      return {shared->second, &v->type()};
    auto it = argumentIndex.find(v);
    if (it != argumentIndex.end())
      return {base + layout.argumentOffsets[set][it->second], &v->type()};
    return {base + layout.arena + offsetOf.lookup(v), &v->type()};
  }

  DeviceError *errorRecord() {
    return reinterpret_cast<DeviceError *>(base + layout.error);
  }

  // Enqueues every step, reading the inputs of `set`, on the stream (and
  // the communication ops on the communication stream, joined back into
  // the stream by the end).
  LogicalResult enqueueSteps(int set, DiagnosticEngine &diag) {
    size_t waited = 0; // communication ops the stream has waited for
    waits = 0;
    auto waitFor = [&](size_t done) {
      if (done <= waited)
        return success();
      waited = done;
      bool timed = stepBegin != nullptr;
      size_t k = waits++;
      if ((timed && failed(MGC_CUDA_CHECK(cudaEventRecord(waitBegin[k], stream),
                                          diag, nullptr))) ||
          failed(
              MGC_CUDA_CHECK(cudaStreamWaitEvent(stream, finished[done - 1], 0),
                             diag, nullptr)) ||
          (timed && failed(MGC_CUDA_CHECK(cudaEventRecord(waitEnd[k], stream),
                                          diag, nullptr))))
        return failure();
      return success();
    };
    if (stepBegin && failed(MGC_CUDA_CHECK(cudaEventRecord(stepBegin, stream),
                                           diag, nullptr)))
      return failure();
    for (size_t i = 0; i < steps.size(); ++i) {
      Step &s = steps[i];
      if (failed(waitFor(s.needDone)))
        return failure();
      if (s.ticket >= 0) {
        if (failed(enqueueCommunication(s, i, set, diag)))
          return failure();
        continue;
      }
      Launch launch{stream, errorRecord(), static_cast<int32_t>(i)};
      if (failed(mark(opBegin, i, stream, diag)) ||
          failed(launchStep(s, launch, set, diag)) ||
          failed(mark(opEnd, i, stream, diag)))
        return failure();
    }
    if (failed(waitFor(issued.size())))
      return failure();
    return stepEnd
               ? MGC_CUDA_CHECK(cudaEventRecord(stepEnd, stream), diag, nullptr)
               : success();
  }

  // Records events[i] on stream `on` when tracing (events not empty).
  LogicalResult mark(std::vector<cudaEvent_t> &events, size_t i,
                     cudaStream_t on, DiagnosticEngine &diag) {
    if (events.empty())
      return success();
    return MGC_CUDA_CHECK(cudaEventRecord(events[i], on), diag, nullptr);
  }

  // Enqueues the kernels of compute step `s` (a grouped launch or one op).
  LogicalResult launchStep(Step &s, const Launch &launch, int set,
                           DiagnosticEngine &diag) {
    if (s.group) {
      const GroupLaunch &g = *s.group;
      return MGC_CUDA_CHECK(
          launchFusedGroup(launch, g.program, g.scalarMask, g.dt,
                           s.descriptors[set],
                           static_cast<int32_t>(g.tensors.size()), g.chunks),
          diag, s.op);
    }
    CudaKernelArgs args{*s.op,
                        s.operands[set],
                        s.out,
                        base + layout.scratch,
                        launch,
                        s.matmul.get(),
                        base + layout.workspace,
                        diag,
                        options.comm};
    return s.kernel(args);
  }

  // Reads the last step's timing events (after the stream has finished).
  void readTimes() {
    times = {};
    if (!stepBegin)
      return;
    auto seconds = [](cudaEvent_t a, cudaEvent_t b) {
      float ms = 0;
      return cudaEventElapsedTime(&ms, a, b) == cudaSuccess ? ms / 1e3 : 0.0;
    };
    times.stepSeconds = seconds(stepBegin, stepEnd);
    for (size_t k = 0; k < waits; ++k)
      times.waitSeconds += seconds(waitBegin[k], waitEnd[k]);
    trace.clear();
    for (size_t i = 0; i < opBegin.size(); ++i) {
      const Step &st = steps[i];
      TraceEvent e;
      e.device = options.comm->device();
      e.queue = st.ticket >= 0 ? TraceEvent::Queue::Communication
                               : TraceEvent::Queue::Compute;
      e.name = st.traceName;
      e.detail = st.traceDetail;
      e.startUs = 1e6 * seconds(stepBegin, opBegin[i]);
      e.endUs = 1e6 * seconds(stepBegin, opEnd[i]);
      trace.push_back(std::move(e));
    }
  }

  // Enqueues communication op `s` (step i) on the communication stream,
  // after the compute stream's work so far.
  LogicalResult enqueueCommunication(Step &s, size_t i, int set,
                                     DiagnosticEngine &diag) {
    if (failed(MGC_CUDA_CHECK(cudaEventRecord(issued[s.ticket], stream), diag,
                              s.op)) ||
        failed(MGC_CUDA_CHECK(
            cudaStreamWaitEvent(commStream, issued[s.ticket], 0), diag, s.op)))
      return failure();
    Launch launch{commStream, errorRecord(), static_cast<int32_t>(i)};
    if (failed(mark(opBegin, i, commStream, diag)))
      return failure();
    CudaKernelArgs args{
        *s.op,       s.operands[set], s.out,   base + layout.commScratch,
        launch,      nullptr,         nullptr, diag,
        options.comm};
    if (failed(s.kernel(args)) || failed(mark(opEnd, i, commStream, diag)))
      return failure();
    return MGC_CUDA_CHECK(cudaEventRecord(finished[s.ticket], commStream), diag,
                          s.op);
  }

  // Captures the steps reading `set` as a graph (once) and launches it.
  LogicalResult launchGraph(int set, DiagnosticEngine &diag) {
    cudaGraphExec_t &graph = graphs[set];
    if (!graph) {
      if (failed(MGC_CUDA_CHECK(
              cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
              diag, nullptr)))
        return failure();
      LogicalResult enqueued = enqueueSteps(set, diag);
      cudaGraph_t captured = nullptr;
      cudaError_t ended = cudaStreamEndCapture(stream, &captured);
      if (failed(enqueued)) {
        if (captured)
          cudaGraphDestroy(captured);
        return failure();
      }
      if (failed(MGC_CUDA_CHECK(ended, diag, nullptr)))
        return failure();
      cudaError_t made = cudaGraphInstantiate(&graph, captured, 0);
      cudaGraphDestroy(captured);
      if (failed(MGC_CUDA_CHECK(made, diag, nullptr))) {
        graph = nullptr;
        return failure();
      }
    }
    return MGC_CUDA_CHECK(cudaGraphLaunch(graph, stream), diag, nullptr);
  }

  // Checks `next` (every input, of its type, nothing else) and starts its
  // copy into the input buffers of `set` on the copy stream.
  LogicalResult stageInputs(const NamedTensors &next, int set,
                            DiagnosticEngine &diag) {
    unsigned errors = diag.errorCount();
    std::vector<const runtime::Tensor *> inputs(arguments.size(), nullptr);
    for (size_t i = 0; i < arguments.size(); ++i) {
      const ir::Value &arg = *arguments[i];
      if (arg.kind() != ir::ValueKind::Input)
        continue;
      auto it = next.find(arg.name());
      if (it == next.end())
        diag.error("missing tensor for input '" + arg.name() +
                   "' among the next run's inputs");
      else if (it->second.type() != arg.type())
        diag.error("the next run's tensor '" + arg.name() + "' has type " +
                   it->second.type().str() + " but the model expects " +
                   arg.type().str());
      else
        inputs[i] = &it->second;
    }
    for (const auto &[name, tensor] : next) {
      const ir::Value *v = exe.module->graph().findArgument(name);
      if (!v || v->kind() != ir::ValueKind::Input)
        diag.error("tensor '" + name +
                   "' among the next run's inputs is not an input of the "
                   "model");
    }
    if (diag.errorCount() != errors)
      return failure();
    // The staging buffer may still be read by the previous copy.
    if (failed(MGC_CUDA_CHECK(cudaEventSynchronize(copied), diag, nullptr)) ||
        failed(MGC_CUDA_CHECK(cudaStreamWaitEvent(copyStream, before, 0), diag,
                              nullptr)))
      return failure();
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i] || !inputs[i]->nbytes())
        continue;
      std::byte *host = staging + stagingOffsets[i];
      std::memcpy(host, inputs[i]->data(), inputs[i]->nbytes());
      transfers.hostToDevice += inputs[i]->nbytes();
      if (failed(MGC_CUDA_CHECK(
              cudaMemcpyAsync(base + layout.argumentOffsets[set][i], host,
                              inputs[i]->nbytes(), cudaMemcpyHostToDevice,
                              copyStream),
              diag, nullptr)))
        return failure();
    }
    if (failed(
            MGC_CUDA_CHECK(cudaEventRecord(copied, copyStream), diag, nullptr)))
      return failure();
    stagedSet = set;
    return success();
  }
};

CudaExecutor::CudaExecutor(std::unique_ptr<State> state)
    : s_(std::move(state)) {}
CudaExecutor::~CudaExecutor() = default;

bool CudaExecutor::acceptsNextInputs() const { return s_->layout.twoInputSets; }

const Executable &CudaExecutor::executable() const { return s_->exe; }
const LaunchPlan &CudaExecutor::launchPlan() const { return s_->plan; }
uint64_t CudaExecutor::deviceBytes() const { return s_->layout.total; }
const std::string &CudaExecutor::deviceName() const { return s_->deviceName; }
StreamTimes CudaExecutor::lastStreamTimes() const { return s_->times; }
TransferBytes CudaExecutor::lastTransfers() const { return s_->transfers; }
std::vector<TraceEvent> CudaExecutor::lastTrace() const { return s_->trace; }

uint64_t CudaExecutor::requiredBytes(const Executable &exe,
                                     const CudaOptions &options) {
  return layoutOf(exe, options, planLaunches(exe, launchOptionsOf(options)))
      .total;
}

std::unique_ptr<CudaExecutor> CudaExecutor::create(const Executable &exe,
                                                   const CudaOptions &options,
                                                   DiagnosticEngine &diag) {
  if (!exe.module) {
    diag.error("the executable has no module");
    return nullptr;
  }
  if (failed(checkExecutable(exe, exe.module->name(), diag)))
    return nullptr;
  const ir::Graph &graph = exe.module->graph();
  std::vector<const ir::Op *> ops;
  for (const auto &op : graph.ops())
    ops.push_back(op.get());
  unsigned before = diag.errorCount();
  for (uint32_t i : exe.order) {
    std::string why = cudaUnsupported(*ops[i]);
    if (!why.empty())
      diag.error(ops[i]->loc(), why);
  }
  if (diag.errorCount() != before)
    return nullptr;
  if (options.comm && options.graph) {
    diag.error("a CUDA Graph of a mesh step is not supported yet (run the "
               "mesh without --cuda-graph)");
    return nullptr;
  }
  if (options.comm && !options.comm->onStream()) {
    diag.error("the CUDA backend needs a communicator that works on CUDA "
               "streams");
    return nullptr;
  }
  if (!options.comm)
    for (uint32_t p = 0; p < exe.order.size(); ++p)
      if (ops[exe.order[p]]->info().has(ir::kCollective)) {
        const ir::Op &op = *ops[exe.order[p]];
        diag.error(op.loc(), "op %" + std::to_string(p) + " (" +
                                 op.name().str() +
                                 ") needs a communicator (a multi-device run)");
        return nullptr;
      }
  if (auto why = cudaUnavailableReason()) {
    diag.error("no CUDA device: " + *why);
    return nullptr;
  }

  auto state = std::make_unique<State>(exe);
  State &s = *state;
  s.options = options;
  s.plan = planLaunches(exe, launchOptionsOf(options));
  s.layout = layoutOf(exe, options, s.plan);
  auto info = cudaDeviceInfo(diag, options.gpu);
  if (!info)
    return nullptr;
  s.deviceName = info->name;
  if (failed(checkDeviceMemory(exe.module->name(), s.layout.total,
                               info->freeBytes, info->name, diag)))
    return nullptr;
  if (failed(MGC_CUDA_CHECK(
          cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), diag,
          nullptr)) ||
      failed(MGC_CUBLAS_CHECK(cublasLtCreate(&s.lt), diag, nullptr)) ||
      failed(MGC_CUDA_CHECK(
          cudaMalloc(reinterpret_cast<void **>(&s.base), s.layout.total), diag,
          nullptr)))
    return nullptr;
  if (options.comm &&
      failed(MGC_CUDA_CHECK(
          cudaStreamCreateWithFlags(&s.commStream, cudaStreamNonBlocking), diag,
          nullptr)))
    return nullptr;
  if (s.layout.twoInputSets) {
    if (failed(MGC_CUDA_CHECK(
            cudaStreamCreateWithFlags(&s.copyStream, cudaStreamNonBlocking),
            diag, nullptr)) ||
        failed(MGC_CUDA_CHECK(
            cudaEventCreateWithFlags(&s.before, cudaEventDisableTiming), diag,
            nullptr)) ||
        failed(MGC_CUDA_CHECK(
            cudaEventCreateWithFlags(&s.copied, cudaEventDisableTiming), diag,
            nullptr)) ||
        (s.layout.inputBytes &&
         failed(MGC_CUDA_CHECK(
             cudaMallocHost(reinterpret_cast<void **>(&s.staging),
                            s.layout.inputBytes),
             diag, nullptr))))
      return nullptr;
  }

  uint64_t staged = 0;
  for (const auto &arg : graph.arguments()) {
    s.argumentIndex[arg.get()] = static_cast<int>(s.arguments.size());
    s.arguments.push_back(arg.get());
    s.stagingOffsets.push_back(staged);
    if (arg->kind() == ir::ValueKind::Input)
      staged += alignUp(typeBytes(arg->type()));
  }
  if (options.stateOf && failed(s.shareStateOf(*options.stateOf, diag)))
    return nullptr;
  if (options.outputsInto &&
      options.outputsInto->s_->options.gpu != options.gpu) {
    diag.error("an executor leaves its outputs in one on another GPU (" +
               std::to_string(options.outputsInto->s_->options.gpu) + ", not " +
               std::to_string(options.gpu) + ") (internal error)");
    return nullptr;
  }
  for (size_t i = 0; i < ops.size(); ++i)
    s.offsetOf[ops[i]->result()] = s.plan.offsets[i];
  std::vector<uint32_t> positionInExe(ops.size(), 0);
  for (size_t p = 0; p < exe.order.size(); ++p)
    positionInExe[exe.order[p]] = static_cast<uint32_t>(p);

  // Per position of the plan's order: the communication ops (by ticket)
  // that must be done before the op there runs.
  std::vector<uint32_t> waits = waitSteps(graph, s.plan.order);
  std::vector<size_t> needAt(s.plan.order.size() + 1, 0);
  size_t tickets = 0;
  for (uint32_t p = 0; p < s.plan.order.size(); ++p)
    if (ops[s.plan.order[p]]->info().has(ir::kCollective)) {
      size_t &need = needAt[waits[s.plan.order[p]]];
      need = std::max(need, ++tickets);
    }
  for (size_t t = 0; t < tickets; ++t) {
    s.issued.push_back(nullptr);
    s.finished.push_back(nullptr);
    if (failed(MGC_CUDA_CHECK(
            cudaEventCreateWithFlags(&s.issued.back(), cudaEventDisableTiming),
            diag, nullptr)) ||
        failed(MGC_CUDA_CHECK(cudaEventCreateWithFlags(&s.finished.back(),
                                                       cudaEventDisableTiming),
                              diag, nullptr)))
      return nullptr;
  }
  if (options.trace && !options.comm) {
    diag.error("a trace of the CUDA backend needs a mesh (a communicator)");
    return nullptr;
  }
  if (options.comm) {
    s.waitBegin.assign(tickets, nullptr);
    s.waitEnd.assign(tickets, nullptr);
    for (cudaEvent_t *e : {&s.stepBegin, &s.stepEnd})
      if (failed(MGC_CUDA_CHECK(cudaEventCreate(e), diag, nullptr)))
        return nullptr;
    for (size_t t = 0; t < tickets; ++t)
      if (failed(MGC_CUDA_CHECK(cudaEventCreate(&s.waitBegin[t]), diag,
                                nullptr)) ||
          failed(MGC_CUDA_CHECK(cudaEventCreate(&s.waitEnd[t]), diag, nullptr)))
        return nullptr;
  }

  if (options.trace) {
    s.opBegin.assign(s.plan.runs.size(), nullptr);
    s.opEnd.assign(s.plan.runs.size(), nullptr);
    for (size_t i = 0; i < s.plan.runs.size(); ++i)
      if (failed(
              MGC_CUDA_CHECK(cudaEventCreate(&s.opBegin[i]), diag, nullptr)) ||
          failed(MGC_CUDA_CHECK(cudaEventCreate(&s.opEnd[i]), diag, nullptr)))
        return nullptr;
  }

  int sets = s.layout.twoInputSets ? 2 : 1;
  size_t descriptorsUsed = 0;
  int32_t nextTicket = 0;
  auto nameForTrace = [&](State::Step &step) {
    if (!options.trace)
      return;
    step.traceName = step.op->name().str();
    if (step.group)
      step.traceName += " (" + std::to_string(step.group->tensors.size()) +
                        " tensors in one launch)";
    step.traceDetail = traceDetail(*step.op, options.comm->mesh());
  };
  for (const LaunchPlan::Run &run : s.plan.runs) {
    const ir::Op *op = ops[s.plan.order[run.begin]];
    State::Step step;
    step.op = op;
    step.position = positionInExe[s.plan.order[run.begin]];
    for (uint32_t p = run.begin; p < run.end; ++p)
      step.needDone = std::max(step.needDone, needAt[p]);
    if (op->info().has(ir::kCollective))
      step.ticket = nextTicket++; // never grouped: no launch key
    if (run.size() > 1) {
      // One launch for the group; its descriptors written once, per set.
      std::vector<const ir::Op *> members;
      for (uint32_t p = run.begin; p < run.end; ++p)
        members.push_back(ops[s.plan.order[p]]);
      for (int set = 0; set < sets; ++set) {
        auto group = makeGroupLaunch(
            members,
            [&](const ir::Value *v) { return s.tensorOf(v, set).data; }, diag);
        if (!group)
          return nullptr;
        auto *at = reinterpret_cast<FusedGroupTensor *>(
            s.base + s.layout.descriptors +
            (set * s.layout.descriptorsPerSet + descriptorsUsed) *
                sizeof(FusedGroupTensor));
        if (!group->tensors.empty() &&
            failed(MGC_CUDA_CHECK(
                cudaMemcpy(at, group->tensors.data(),
                           group->tensors.size() * sizeof(FusedGroupTensor),
                           cudaMemcpyHostToDevice),
                diag, op)))
          return nullptr;
        step.descriptors[set] = at;
        step.group = std::move(group);
      }
      descriptorsUsed += run.size();
      nameForTrace(step);
      s.steps.push_back(std::move(step));
      continue;
    }
    step.kernel = cudaKernelFor(op->kind());
    step.out = s.tensorOf(op->result());
    for (int set = 0; set < 2; ++set)
      for (const ir::Value *v : op->operands())
        step.operands[set].push_back(s.tensorOf(v, set < sets ? set : 0));
    if (usesMatmulPlan(op->kind())) {
      step.matmul = MatmulPlan::create(*op, s.lt, options.workspaceBytes, diag);
      if (!step.matmul)
        return nullptr;
    }
    nameForTrace(step);
    s.steps.push_back(std::move(step));
  }
  return std::unique_ptr<CudaExecutor>(new CudaExecutor(std::move(state)));
}

FailureOr<runtime::Tensor> CudaExecutor::readArgument(const std::string &name,
                                                      DiagnosticEngine &diag) {
  State &s = *s_;
  const ir::Value *v = s.exe.module->graph().findArgument(name);
  if (!v) {
    diag.error("'" + name +
               "' is not an input, parameter or state of the model");
    return failure();
  }
  runtime::Tensor t(v->type());
  if (failed(MGC_CUDA_CHECK(cudaSetDevice(s.options.gpu), diag, nullptr)))
    return failure();
  s.transfers.deviceToHost += t.nbytes();
  if (t.nbytes() &&
      (failed(MGC_CUDA_CHECK(
           cudaMemcpyAsync(t.data(), s.tensorOf(v, s.lastSet).data, t.nbytes(),
                           cudaMemcpyDeviceToHost, s.stream),
           diag, nullptr)) ||
       failed(MGC_CUDA_CHECK(cudaStreamSynchronize(s.stream), diag, nullptr))))
    return failure();
  return t;
}

FailureOr<RunResult> CudaExecutor::run(const NamedTensors &arguments,
                                       DiagnosticEngine &diag,
                                       const RunControl &control) {
  TensorRefs refs;
  for (const auto &[name, tensor] : arguments)
    refs.emplace(name, &tensor);
  return run(refs, diag, control);
}

FailureOr<RunResult> CudaExecutor::run(const TensorRefs &arguments,
                                       DiagnosticEngine &diag,
                                       const RunControl &control) {
  State &s = *s_;
  if (failed(MGC_CUDA_CHECK(cudaSetDevice(s.options.gpu), diag, nullptr)))
    return failure();
  // Check and bind the arguments (the CPU executor's messages).
  unsigned before = diag.errorCount();
  std::vector<const runtime::Tensor *> bound(s.arguments.size(), nullptr);
  for (size_t i = 0; i < s.arguments.size(); ++i) {
    const ir::Value &arg = *s.arguments[i];
    auto it = arguments.find(arg.name());
    if (it == arguments.end() && control.resident &&
        control.resident->count(arg.name()))
      continue; // on the device already, not given
    if (it == arguments.end()) {
      diag.error("missing tensor for " + ir::valueKindWord(arg.kind()).str() +
                 " '" + arg.name() + "'");
      continue;
    }
    if (it->second->type() != arg.type()) {
      diag.error("tensor '" + arg.name() + "' has type " +
                 it->second->type().str() + " but the model expects " +
                 arg.type().str());
      continue;
    }
    bound[i] = it->second;
  }
  for (const auto &[name, tensor] : arguments)
    if (!s.exe.module->graph().findArgument(name))
      diag.error("tensor '" + name +
                 "' is not an input, parameter or state of the model");
  if (control.heldOutputs != RunControl::HeldOutputs::Return &&
      !s.outputTarget())
    diag.error("outputs left in another executor's buffers need an executor "
               "made to share its state or to leave its outputs in another's "
               "(CudaOptions::stateOf, outputsInto)");
  if ((control.next || control.staged) && !s.layout.twoInputSets)
    diag.error("inputs handed over early need a CUDA Graph "
               "(CudaOptions::graph)");
  else if (control.staged && s.stagedSet < 0)
    diag.error("no inputs were handed over early for this run (give them as "
               "the previous run's RunControl::next)");
  if (diag.errorCount() != before)
    return failure();

  // The set of input buffers this run reads: the staged one, or set 0
  // after any copy still in flight (its inputs are not used) has ended.
  int set = 0;
  if (control.staged)
    set = s.stagedSet;
  else if (s.stagedSet >= 0 &&
           failed(MGC_CUDA_CHECK(cudaStreamSynchronize(s.copyStream), diag,
                                 nullptr)))
    return failure();
  s.stagedSet = -1;
  s.lastSet = set;
  s.transfers = {};
  for (size_t i = 0; i < bound.size(); ++i) {
    bool input = s.arguments[i]->kind() == ir::ValueKind::Input;
    if (!bound[i] || !bound[i]->nbytes() || (input && control.staged) ||
        (control.resident && control.resident->count(s.arguments[i]->name())))
      continue;
    s.transfers.hostToDevice += bound[i]->nbytes();
    if (failed(
            MGC_CUDA_CHECK(cudaMemcpyAsync(s.tensorOf(s.arguments[i], set).data,
                                           bound[i]->data(), bound[i]->nbytes(),
                                           cudaMemcpyHostToDevice, s.stream),
                           diag, nullptr)))
      return failure();
  }
  // No error yet: owner 0, element all ones.
  if (failed(MGC_CUDA_CHECK(
          cudaMemsetAsync(s.errorRecord(), 0, sizeof(DeviceError), s.stream),
          diag, nullptr)) ||
      failed(MGC_CUDA_CHECK(cudaMemsetAsync(&s.errorRecord()->element, 0xff,
                                            sizeof(uint64_t), s.stream),
                            diag, nullptr)))
    return failure();
  if (control.staged &&
      failed(MGC_CUDA_CHECK(cudaStreamWaitEvent(s.stream, s.copied, 0), diag,
                            nullptr)))
    return failure();
  // Everything before this step: the next inputs' copy waits for it (older
  // steps read the other set), not for this step.
  if (control.next && failed(MGC_CUDA_CHECK(cudaEventRecord(s.before, s.stream),
                                            diag, nullptr)))
    return failure();
  if (failed(s.options.graph ? s.launchGraph(set, diag)
                             : s.enqueueSteps(set, diag)))
    return failure();
  if (control.next && failed(s.stageInputs(*control.next, 1 - set, diag)))
    return failure();

  RunResult result;
  auto copyOut = [&](const ir::Value *v, NamedTensors &into,
                     const std::string &name) {
    runtime::Tensor t(v->type());
    s.transfers.deviceToHost += t.nbytes();
    if (t.nbytes() &&
        failed(MGC_CUDA_CHECK(cudaMemcpyAsync(t.data(), s.tensorOf(v, set).data,
                                              t.nbytes(),
                                              cudaMemcpyDeviceToHost, s.stream),
                              diag, nullptr)))
      return false;
    into.insert_or_assign(name, std::move(t));
    return true;
  };
  const ir::Graph &graph = s.exe.module->graph();
  for (const ir::Output &o : graph.outputs()) {
    if (control.heldOutputs != RunControl::HeldOutputs::Return &&
        !(control.returnedOutputs && control.returnedOutputs->count(o.name))) {
      LogicalResult held = s.leaveInHolder(
          o, control.heldOutputs == RunControl::HeldOutputs::Add, set, diag);
      if (failed(held))
        return failure();
      if (s.leftInHolder(o))
        continue;
    }
    if ((!control.scalarOutputsOnly || o.value->type().size() == 1) &&
        !copyOut(o.value, result.outputs, o.name))
      return failure();
  }
  for (const ir::Update &u : graph.updates()) {
    if (!control.updatesStayOnDevice) {
      if (!copyOut(u.value, result.updates, u.target->name()))
        return failure();
      continue;
    }
    // Every update reads values from before the step: the copies come after
    // every kernel.
    uint64_t bytes = typeBytes(u.value->type());
    if (bytes && failed(MGC_CUDA_CHECK(
                     cudaMemcpyAsync(s.tensorOf(u.target).data,
                                     s.tensorOf(u.value, set).data, bytes,
                                     cudaMemcpyDeviceToDevice, s.stream),
                     diag, nullptr)))
      return failure();
  }
  DeviceError error{};
  s.transfers.deviceToHost += sizeof(error);
  if (failed(
          MGC_CUDA_CHECK(cudaMemcpyAsync(&error, s.errorRecord(), sizeof(error),
                                         cudaMemcpyDeviceToHost, s.stream),
                         diag, nullptr)) ||
      failed(waitForStream(s.stream, s.options.stepTimeoutSeconds, diag)))
    return failure();
  s.readTimes();
  if (error.owner != 0) {
    size_t step = (error.owner >> 8) - 1;
    uint32_t code = static_cast<uint32_t>(error.owner & 0xff);
    if (step < s.steps.size()) {
      const State::Step &st = s.steps[step];
      const ir::Op &op = *st.op;
      diag.error(op.loc(),
                 "op %" + std::to_string(st.position) + " (" + op.name().str() +
                     "): " +
                     describeDeviceError(op, code,
                                         static_cast<int64_t>(error.element),
                                         error.intValue, error.realValue));
    } else {
      diag.error("a kernel reported an error of an unknown op");
    }
    return failure();
  }
  return result;
}

} // namespace mgc::backend::cuda
