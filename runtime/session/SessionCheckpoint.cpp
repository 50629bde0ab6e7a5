// Session checkpoints: parameters, optimizer state and the training
// metadata in a safetensors file (runtime/Checkpoint.h). Loading checks the
// whole file against the model before anything changes, so a refused
// checkpoint leaves the session as it was.
#include "runtime/session/SessionImpl.h"

#include "runtime/Checkpoint.h"

namespace mgc {

Status Session::saveCheckpoint(const std::string &path) const {
  DiagnosticCollector sync(impl_.get());
  if (failed(session::syncHost(*impl_, sync.diag())))
    return sync.status();
  // Every rank joined the whole tensors; one writes them.
  if (impl_->processes && impl_->processes->rank() != 0)
    return Status::ok();
  runtime::Checkpoint c;
  c.info.step = session::stepCount(*impl_);
  c.info.optimizer = impl_->optimizer;
  c.info.seed = impl_->seed;
  c.info.sourceHash = impl_->modelHash;
  for (const auto &[name, t] : impl_->persistent)
    c.tensors.emplace(name, t);
  if (llvm::Error err = runtime::saveCheckpoint(path, c))
    return Status::error("error: " + llvm::toString(std::move(err)));
  return Status::ok();
}

Status Session::loadCheckpoint(const std::string &path) {
  auto loaded = runtime::loadCheckpoint(path);
  if (!loaded)
    return Status::error("error: " + llvm::toString(loaded.takeError()));
  const runtime::Checkpoint &c = *loaded;
  auto refuse = [&](const std::string &why) {
    return Status::error("error: cannot load checkpoint '" + path +
                         "': " + why);
  };
  // A file without mgc metadata (weights from another tool) has no hash and
  // is matched by its tensors alone.
  if (!c.info.sourceHash.empty() && c.info.sourceHash != impl_->modelHash)
    return refuse("it was saved from another model (model hash " +
                  c.info.sourceHash.substr(0, 12) + "..., this model " +
                  impl_->modelHash.substr(0, 12) + "...)");
  if (!c.info.optimizer.empty() && !impl_->optimizer.empty() &&
      c.info.optimizer != impl_->optimizer)
    return refuse("it was saved with optimizer " + c.info.optimizer +
                  ", this session uses " + impl_->optimizer);
  for (const auto &[name, t] : c.tensors) {
    const ir::Value *v = impl_->main->graph().findArgument(name);
    if (!v || !v->isPersistent())
      return refuse("it has a tensor '" + name +
                    "' that is not a parameter or state of the model");
    if (t.type() != v->type())
      return refuse("tensor '" + name + "' is " + t.type().str() +
                    " in the checkpoint but " + v->type().str() +
                    " in the model");
  }
  for (const auto &arg : impl_->main->graph().arguments())
    if (arg->kind() == ir::ValueKind::Param && !c.tensors.count(arg->name()))
      return refuse("it has no tensor for parameter '" + arg->name() + "'");
  // Optimizer state missing from the file (weights only) keeps its value.
  DiagnosticCollector sync(impl_.get());
  if (failed(session::syncHost(*impl_, sync.diag())))
    return sync.status();
  for (const auto &[name, t] : c.tensors)
    impl_->persistent.insert_or_assign(name, t);
  session::hostChanged(*impl_);
  // The run's seed travels with its checkpoints.
  if (!c.info.sourceHash.empty())
    impl_->seed = c.info.seed;
  return Status::ok();
}

} // namespace mgc
