// SessionInternals' access to the training state and the optimizer's
// settings (SessionInternals.h). Feeding is in Session.cpp, beside
// Session::feed.
#include "runtime/session/SessionInternals.h"

#include "runtime/session/Guarded.h"
#include "runtime/session/SessionImpl.h"

#include <set>

namespace mgc {

Result<std::map<std::string, runtime::Tensor>>
SessionInternals::state(const Session &session) {
  Session::Impl &impl = *session.impl_;
  return session::guarded(
      "reading the state",
      [&]() -> Result<std::map<std::string, runtime::Tensor>> {
        DiagnosticCollector c(&impl);
        if (failed(session::syncHost(impl, c.diag())))
          return c.status();
        return impl.persistent;
      });
}

Status SessionInternals::setState(
    Session &session, const std::map<std::string, runtime::Tensor> &state) {
  Session::Impl &impl = *session.impl_;
  return session::guarded("setting the state", [&]() -> Status {
    DiagnosticCollector c(&impl);
    if (failed(session::syncHost(impl, c.diag())))
      return c.status();
    for (const auto &[name, tensor] : impl.persistent) {
      auto it = state.find(name);
      if (it == state.end())
        return Status::error("error: the state to set has no tensor '" + name +
                             "'");
      if (it->second.type().str() != tensor.type().str())
        return Status::error("error: the state to set has '" + name + "' as " +
                             it->second.type().str() + ", not " +
                             tensor.type().str());
    }
    for (auto &[name, tensor] : impl.persistent)
      tensor = state.at(name);
    session::hostChanged(impl);
    return Status::ok();
  });
}

Result<passes::OptimizerConfig>
SessionInternals::optimizer(const Session &session) {
  const Session::Impl &impl = *session.impl_;
  if (impl.optimizer.empty())
    return Status::error("error: the session has no training step");
  DiagnosticCollector c(&impl);
  auto config = passes::readOptimizerConfig(impl.main->attrs(), c.diag());
  if (config.failed())
    return c.status();
  return *config;
}

std::vector<std::string> SessionInternals::branchOps(const Session &session) {
  const Session::Impl &impl = *session.impl_;
  // The model as written: compiled programs hide ops inside fused ones.
  const ir::Module *model = impl.model        ? impl.model.get()
                            : impl.forwardExe ? impl.forwardExe->module.get()
                                              : nullptr;
  std::set<std::string> names;
  if (model)
    for (const auto &op : model->graph().ops())
      if (op->info().has(ir::kBranches))
        names.insert(ir::opName(op->kind()).str());
  return {names.begin(), names.end()};
}

} // namespace mgc
