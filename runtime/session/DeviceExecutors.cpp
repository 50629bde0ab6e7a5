#include "runtime/session/DeviceExecutors.h"

#if MGC_HAVE_CUDA
#include "backend/cuda/CudaDevice.h"
#include "backend/cuda/CudaExecutor.h"
#endif

namespace mgc::session {

namespace {

DeviceExecutorFactory &testFactory() {
  static DeviceExecutorFactory factory;
  return factory;
}

} // namespace

void setDeviceExecutorFactoryForTests(DeviceExecutorFactory factory) {
  testFactory() = std::move(factory);
}

std::optional<std::string> deviceUnavailableReason() {
  if (testFactory())
    return std::nullopt;
#if MGC_HAVE_CUDA
  if (std::optional<std::string> why = backend::cuda::cudaUnavailableReason())
    return "no CUDA device: " + *why;
  return std::nullopt;
#else
  return std::string("this build of mgc has no CUDA backend (configure with "
                     "-DMGC_CUDA=ON where nvcc is installed)");
#endif
}

std::unique_ptr<backend::DeviceExecutor>
makeDeviceExecutor(const backend::Executable &exe, bool graph,
                   DiagnosticEngine &diag) {
  if (testFactory())
    return testFactory()(exe, graph, diag);
#if MGC_HAVE_CUDA
  backend::cuda::CudaOptions options;
  options.graph = graph;
  return backend::cuda::CudaExecutor::create(exe, options, diag);
#else
  (void)exe;
  (void)graph;
  diag.error(*deviceUnavailableReason());
  return nullptr;
#endif
}

} // namespace mgc::session
