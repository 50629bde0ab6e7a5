// Session::evaluate: the forward program's scalar outputs, on the session's
// mesh when it has one (the forward program placed and partitioned like
// the step, its own parameter parts loaded from the session's), else on
// one device.
#include "runtime/session/Guarded.h"
#include "runtime/session/MeshStep.h"
#include "runtime/session/SessionImpl.h"

namespace mgc {

namespace {

// The scalar outputs of `outputs`, as numbers.
template <typename Map, typename Get>
std::map<std::string, double> scalars(const Map &outputs, Get value) {
  std::map<std::string, double> out;
  for (const auto &[name, t] : outputs)
    if (t.numel() == 1 && t.shape().empty())
      out.emplace(name, value(t));
  return out;
}

} // namespace

Result<std::map<std::string, double>> Session::evaluate() {
  return session::guarded(
      "the evaluation", [&]() -> Result<std::map<std::string, double>> {
        Impl &impl = *impl_;
        if (!impl.meshRunner) {
          auto outs = forward();
          if (!outs)
            return outs.status();
          return scalars(*outs, [](const Tensor &t) {
            return static_cast<double>(t.toFloats()[0]);
          });
        }
        DiagnosticCollector c(impl_.get());
        DiagnosticEngine &diag = c.diag();
        if (!impl.meshForward) {
          auto step = session::buildMeshForward(*impl.model, impl.mesh, diag);
          if (step.failed())
            return c.status();
          bool onCuda = impl.backendName == "cuda";
          auto devices = session::meshDevices(impl.options, onCuda,
                                              impl.processes, diag);
          if (devices.failed())
            return c.status();
          impl.meshForward = session::MeshRunner::create(
              std::move(*step), *devices, impl.processes, diag);
          if (!impl.meshForward)
            return c.status();
          impl.meshForwardStale = true;
        }
        if (impl.meshForwardStale) {
          if (failed(session::syncHost(impl, diag)) ||
              failed(impl.meshForward->load(impl.persistent, diag)))
            return c.status();
          impl.meshForwardStale = false;
        }
        auto run = impl.meshForward->run(impl.fed, diag, "evaluation, ");
        if (run.failed())
          return c.status();
        return scalars(run->outputs, [](const runtime::Tensor &t) {
          return t.get(0);
        });
      });
}

} // namespace mgc
