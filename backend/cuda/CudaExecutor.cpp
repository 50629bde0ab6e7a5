// The CUDA executor: one device allocation laid out as
//   [error record | arena (the memory plan) | arguments | scratch | workspace]
// operands resolved once to device pointers, and a step that copies the
// arguments in, enqueues every op (or replays the captured graph), and
// copies the results and the error record out with one synchronisation.
#include "backend/cuda/CudaExecutor.h"

#include "backend/cuda/CudaCheck.h"
#include "backend/cuda/CudaDevice.h"
#include "backend/cuda/CudaKernels.h"

#include "llvm/ADT/DenseMap.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstring>

namespace mgc::backend::cuda {

namespace {

constexpr uint64_t kAlign = 256;
uint64_t alignUp(uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

std::string kindWord(const ir::Value &v) {
  switch (v.kind()) {
  case ir::ValueKind::Param:
    return "parameter";
  case ir::ValueKind::State:
    return "state";
  default:
    return "input";
  }
}

// Where the pieces of the device allocation start.
struct Layout {
  uint64_t error = 0, arena = 0, arguments = 0, scratch = 0, workspace = 0,
           total = 0;
  std::vector<uint64_t> argumentOffsets; // by graph argument
};

Layout layoutOf(const Executable &exe, const CudaOptions &options) {
  Layout l;
  l.error = 0;
  l.arena = alignUp(sizeof(DeviceError));
  uint64_t at = l.arena + alignUp(exe.plan.peak);
  l.arguments = at;
  for (const auto &arg : exe.module->graph().arguments()) {
    l.argumentOffsets.push_back(at);
    at += alignUp(typeBytes(arg->type()));
  }
  l.scratch = at;
  uint64_t scratch = 0;
  for (const auto &op : exe.module->graph().ops())
    scratch = std::max(scratch, cudaScratchBytes(*op));
  l.workspace = l.scratch + alignUp(scratch);
  l.total = l.workspace + alignUp(options.workspaceBytes);
  return l;
}

} // namespace

struct CudaExecutor::State {
  const Executable &exe;
  CudaOptions options;
  Layout layout;
  std::string deviceName;
  std::byte *base = nullptr;
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  cudaGraphExec_t graph = nullptr;

  std::vector<const ir::Value *> arguments; // graph arguments in order
  llvm::DenseMap<const ir::Value *, int> argumentIndex;
  llvm::DenseMap<const ir::Value *, uint64_t> offsetOf; // arena offsets
  struct Step {
    const ir::Op *op;
    CudaKernelFn kernel;
    std::vector<DeviceTensor> operands;
    DeviceTensor out;
    std::unique_ptr<MatmulPlan> matmul;
  };
  std::vector<Step> steps;

  explicit State(const Executable &exe) : exe(exe) {}
  ~State() {
    if (graph)
      cudaGraphExecDestroy(graph);
    if (lt)
      cublasLtDestroy(lt);
    if (stream)
      cudaStreamDestroy(stream);
    if (base)
      cudaFree(base);
  }

  DeviceTensor tensorOf(const ir::Value *v) {
    auto it = argumentIndex.find(v);
    if (it != argumentIndex.end())
      return {base + layout.argumentOffsets[it->second], &v->type()};
    return {base + layout.arena + offsetOf.lookup(v), &v->type()};
  }

  DeviceError *errorRecord() {
    return reinterpret_cast<DeviceError *>(base + layout.error);
  }

  // Enqueues every step on the stream.
  LogicalResult enqueueSteps(DiagnosticEngine &diag) {
    for (size_t i = 0; i < steps.size(); ++i) {
      Step &s = steps[i];
      CudaKernelArgs args{*s.op,
                          s.operands,
                          s.out,
                          base + layout.scratch,
                          {stream, errorRecord(), static_cast<int32_t>(i)},
                          s.matmul.get(),
                          base + layout.workspace,
                          diag};
      if (failed(s.kernel(args)))
        return failure();
    }
    return success();
  }

  // Captures the steps as a graph (once) and launches it.
  LogicalResult launchGraph(DiagnosticEngine &diag) {
    if (!graph) {
      if (failed(MGC_CUDA_CHECK(
              cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
              diag, nullptr)))
        return failure();
      LogicalResult enqueued = enqueueSteps(diag);
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
};

CudaExecutor::CudaExecutor(std::unique_ptr<State> state)
    : s_(std::move(state)) {}
CudaExecutor::~CudaExecutor() = default;

const Executable &CudaExecutor::executable() const { return s_->exe; }
uint64_t CudaExecutor::deviceBytes() const { return s_->layout.total; }
const std::string &CudaExecutor::deviceName() const { return s_->deviceName; }

uint64_t CudaExecutor::requiredBytes(const Executable &exe,
                                     const CudaOptions &options) {
  return layoutOf(exe, options).total;
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
  if (auto why = cudaUnavailableReason()) {
    diag.error("no CUDA device: " + *why);
    return nullptr;
  }

  auto state = std::make_unique<State>(exe);
  State &s = *state;
  s.options = options;
  s.layout = layoutOf(exe, options);
  auto info = cudaDeviceInfo(diag);
  if (!info)
    return nullptr;
  s.deviceName = info->name;
  if (failed(checkDeviceMemory(exe.module->name(), s.layout.total,
                               info->freeBytes, info->name, diag)))
    return nullptr;
  if (failed(MGC_CUDA_CHECK(cudaSetDevice(0), diag, nullptr)) ||
      failed(MGC_CUDA_CHECK(
          cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), diag,
          nullptr)) ||
      failed(MGC_CUBLAS_CHECK(cublasLtCreate(&s.lt), diag, nullptr)) ||
      failed(MGC_CUDA_CHECK(
          cudaMalloc(reinterpret_cast<void **>(&s.base), s.layout.total), diag,
          nullptr)))
    return nullptr;

  for (const auto &arg : graph.arguments()) {
    s.argumentIndex[arg.get()] = static_cast<int>(s.arguments.size());
    s.arguments.push_back(arg.get());
  }
  for (size_t i = 0; i < ops.size(); ++i)
    s.offsetOf[ops[i]->result()] = exe.plan.slots[i].offset;
  for (uint32_t i : exe.order) {
    const ir::Op *op = ops[i];
    State::Step step{
        op, cudaKernelFor(op->kind()), {}, s.tensorOf(op->result()), nullptr};
    for (const ir::Value *v : op->operands())
      step.operands.push_back(s.tensorOf(v));
    if (op->kind() == ir::OpKind::Matmul) {
      step.matmul = MatmulPlan::create(*op, s.lt, options.workspaceBytes, diag);
      if (!step.matmul)
        return nullptr;
    }
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
  if (t.nbytes() &&
      (failed(MGC_CUDA_CHECK(cudaMemcpyAsync(t.data(), s.tensorOf(v).data,
                                             t.nbytes(), cudaMemcpyDeviceToHost,
                                             s.stream),
                             diag, nullptr)) ||
       failed(MGC_CUDA_CHECK(cudaStreamSynchronize(s.stream), diag, nullptr))))
    return failure();
  return t;
}

FailureOr<RunResult> CudaExecutor::run(const NamedTensors &arguments,
                                       DiagnosticEngine &diag,
                                       const RunControl &control) {
  State &s = *s_;
  // Check and bind the arguments (the CPU executor's messages).
  unsigned before = diag.errorCount();
  std::vector<const runtime::Tensor *> bound(s.arguments.size(), nullptr);
  for (size_t i = 0; i < s.arguments.size(); ++i) {
    const ir::Value &arg = *s.arguments[i];
    auto it = arguments.find(arg.name());
    if (it == arguments.end()) {
      diag.error("missing tensor for " + kindWord(arg) + " '" + arg.name() +
                 "'");
      continue;
    }
    if (it->second.type() != arg.type()) {
      diag.error("tensor '" + arg.name() + "' has type " +
                 it->second.type().str() + " but the model expects " +
                 arg.type().str());
      continue;
    }
    bound[i] = &it->second;
  }
  for (const auto &[name, tensor] : arguments)
    if (!s.exe.module->graph().findArgument(name))
      diag.error("tensor '" + name +
                 "' is not an input, parameter or state of the model");
  if (diag.errorCount() != before)
    return failure();

  for (size_t i = 0; i < bound.size(); ++i)
    if (bound[i]->nbytes() &&
        !(control.resident &&
          control.resident->count(s.arguments[i]->name())) &&
        failed(
            MGC_CUDA_CHECK(cudaMemcpyAsync(s.base + s.layout.argumentOffsets[i],
                                           bound[i]->data(), bound[i]->nbytes(),
                                           cudaMemcpyHostToDevice, s.stream),
                           diag, nullptr)))
      return failure();
  // No error yet: owner 0, element all ones.
  if (failed(MGC_CUDA_CHECK(
          cudaMemsetAsync(s.errorRecord(), 0, sizeof(DeviceError), s.stream),
          diag, nullptr)) ||
      failed(MGC_CUDA_CHECK(cudaMemsetAsync(&s.errorRecord()->element, 0xff,
                                            sizeof(uint64_t), s.stream),
                            diag, nullptr)))
    return failure();
  if (failed(s.options.graph ? s.launchGraph(diag) : s.enqueueSteps(diag)))
    return failure();

  RunResult result;
  auto copyOut = [&](const ir::Value *v, NamedTensors &into,
                     const std::string &name) {
    runtime::Tensor t(v->type());
    if (t.nbytes() &&
        failed(MGC_CUDA_CHECK(cudaMemcpyAsync(t.data(), s.tensorOf(v).data,
                                              t.nbytes(),
                                              cudaMemcpyDeviceToHost, s.stream),
                              diag, nullptr)))
      return false;
    into.insert_or_assign(name, std::move(t));
    return true;
  };
  const ir::Graph &graph = s.exe.module->graph();
  for (const ir::Output &o : graph.outputs())
    if (!copyOut(o.value, result.outputs, o.name))
      return failure();
  for (const ir::Update &u : graph.updates()) {
    if (!control.updatesStayOnDevice) {
      if (!copyOut(u.value, result.updates, u.target->name()))
        return failure();
      continue;
    }
    // Every update reads values from before the step: the copies come after
    // every kernel.
    uint64_t bytes = typeBytes(u.value->type());
    if (bytes &&
        failed(MGC_CUDA_CHECK(
            cudaMemcpyAsync(s.tensorOf(u.target).data, s.tensorOf(u.value).data,
                            bytes, cudaMemcpyDeviceToDevice, s.stream),
            diag, nullptr)))
      return failure();
  }
  DeviceError error{};
  if (failed(
          MGC_CUDA_CHECK(cudaMemcpyAsync(&error, s.errorRecord(), sizeof(error),
                                         cudaMemcpyDeviceToHost, s.stream),
                         diag, nullptr)) ||
      failed(MGC_CUDA_CHECK(cudaStreamSynchronize(s.stream), diag, nullptr)))
    return failure();
  if (error.owner != 0) {
    size_t step = (error.owner >> 8) - 1;
    uint32_t code = static_cast<uint32_t>(error.owner & 0xff);
    if (step < s.steps.size()) {
      const ir::Op &op = *s.steps[step].op;
      diag.error(
          op.loc(),
          "op %" + std::to_string(step) + " (" + op.name().str() + "): " +
              describeDeviceError(op, code, static_cast<int64_t>(error.element),
                                  error.intValue, error.realValue));
    } else {
      diag.error("a kernel reported an error of an unknown op");
    }
    return failure();
  }
  return result;
}

} // namespace mgc::backend::cuda
