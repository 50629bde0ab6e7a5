// Session's incremental decoding (startDecoding, decodeNext): the decoding
// program made from the session's model (passes/Decode.h), run on the CPU
// with the session's parameters and a key/value cache kept between calls.
#include "runtime/session/Guarded.h"
#include "runtime/session/Pipeline.h"
#include "runtime/session/SessionImpl.h"

#include "backend/cpu/Kernels.h"
#include "passes/Decode.h"

#include <cstring>
#include <limits>

namespace mgc {

namespace session {
struct Decoding {
  std::unique_ptr<backend::Executable> exe;
  std::unique_ptr<backend::cpu::CpuExecutor> runner;
  DecodeOptions options;
  ir::TensorType tokensType; // the tokens input with a last axis of 1
  std::vector<passes::DecodeCache> caches;
  backend::cpu::NamedTensors cache; // by the caches' input names
  runtime::Tensor position, mask;
  int64_t context = 0, filled = 0;
};
} // namespace session

Session::Impl::Impl() = default;
Session::Impl::~Impl() = default;

namespace {

// What decoding starts from: the session's model after the inference
// passes before fusion (fusion runs on the decoding program).
constexpr const char *kBeforeDecoding =
    "eval-mode,mixed-precision,canonicalize,cse,dce";
constexpr const char *kAfterDecoding = "canonicalize,cse,dce,fuse";

// Writes the rows [..., 1, Dh] of `fresh` into `cache` [..., T, Dh] at
// position `p` of its second-to-last axis.
void writeAt(runtime::Tensor &cache, const runtime::Tensor &fresh, int64_t p) {
  const int64_t T = cache.shape()[cache.shape().size() - 2];
  const int64_t rows = fresh.numel() / fresh.shape().back();
  const size_t row = fresh.nbytes() / static_cast<size_t>(rows);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(cache.data() + (r * T + p) * row, fresh.data() + r * row, row);
}

} // namespace

Status Session::startDecoding(const DecodeOptions &options) {
  return session::guarded("decoding", [&]() -> Status {
    Impl &impl = *impl_;
    impl.decoding.reset();
    if (!impl.model)
      return Status::error(
          "error: decoding needs a session made from a model file (.mg) "
          "without a mesh: it builds its program from the model");
    if (impl.backendName != "cpu")
      return Status::error("error: decoding runs on the CPU backend; the "
                           "session runs on " +
                           impl.backendName);
    DiagnosticCollector c(impl_.get());
    DiagnosticEngine &diag = c.diag();
    auto module = session::cloneModule(*impl.model, diag);
    if (!module || failed(session::runPipeline(*module, kBeforeDecoding, diag)))
      return c.status();
    passes::DecodeSpec spec;
    spec.tokens = options.tokensInput;
    spec.positions = options.positionsInput;
    spec.logits = options.logitsOutput;
    auto program = passes::buildDecodeProgram(*module, spec, diag);
    if (program.failed() ||
        failed(session::runPipeline(*program->module, kAfterDecoding, diag)))
      return c.status();
    auto d = std::make_unique<session::Decoding>();
    d->options = options;
    d->context = program->context;
    d->caches = program->caches;
    const ir::Graph &g = program->module->graph();
    d->tokensType = g.findArgument(spec.tokens)->type();
    d->position = runtime::Tensor(ir::TensorType(ir::DType::I32, {1}));
    if (const ir::Value *mask = g.findArgument(passes::kDecodeMask))
      d->mask = runtime::Tensor(mask->type());
    for (const passes::DecodeCache &cache : d->caches) {
      d->cache.emplace(cache.keys, runtime::Tensor(cache.type));
      d->cache.emplace(cache.values, runtime::Tensor(cache.type));
    }
    d->exe = backend::buildExecutable(std::move(program->module),
                                      backend::cpu::scratchBytes);
    d->runner = backend::cpu::CpuExecutor::create(*d->exe, impl.cpu, diag);
    if (!d->runner)
      return c.status();
    impl.decoding = std::move(d);
    return Status::ok();
  });
}

Result<Tensor> Session::decodeNext(const Tensor &tokens) {
  return session::guarded("decoding", [&]() -> Result<Tensor> {
    Impl &impl = *impl_;
    session::Decoding *d = impl.decoding.get();
    if (!d)
      return Status::error("error: decodeNext needs startDecoding first");
    if (d->filled == d->context)
      return Status::error("error: the model's context of " +
                           std::to_string(d->context) +
                           " positions is full");
    runtime::Tensor fed = toRuntime(tokens);
    if (fed.type() != d->tokensType)
      return Status::error("error: decodeNext takes the tokens as " +
                           d->tokensType.str() + " (one per sequence), got " +
                           fed.type().str());
    DiagnosticCollector c(impl_.get());
    if (failed(session::syncHost(impl, c.diag())))
      return c.status();
    const int64_t p = d->filled;
    d->position.set(0, static_cast<double>(p));
    // Keys: the cache's positions, then the new one. The cache's slots
    // from p on are empty (or stale): masked out.
    const double inf = std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < d->mask.numel(); ++j)
      d->mask.set(j, j < p || j == d->context ? 0.0 : -inf);
    backend::cpu::CpuExecutor::TensorRefs args;
    for (const auto &arg : d->exe->module->graph().arguments()) {
      const std::string &name = arg->name();
      if (name == d->options.tokensInput)
        args[name] = &fed;
      else if (name == passes::kDecodePosition)
        args[name] = &d->position;
      else if (name == passes::kDecodeMask)
        args[name] = &d->mask;
      else if (auto it = d->cache.find(name); it != d->cache.end())
        args[name] = &it->second;
      else if (auto it = impl.persistent.find(name);
               it != impl.persistent.end())
        args[name] = &it->second;
    }
    auto run = d->runner->run(args, c.diag());
    if (run.failed())
      return c.status();
    for (const passes::DecodeCache &cache : d->caches) {
      writeAt(d->cache.at(cache.keys), run->outputs.at(cache.newKeys), p);
      writeAt(d->cache.at(cache.values), run->outputs.at(cache.newValues), p);
    }
    ++d->filled;
    return fromRuntime(run->outputs.at(d->options.logitsOutput));
  });
}

int64_t Session::decodeContext() const {
  return impl_->decoding ? impl_->decoding->context : 0;
}

int64_t Session::decodePosition() const {
  return impl_->decoding ? impl_->decoding->filled : 0;
}

} // namespace mgc
