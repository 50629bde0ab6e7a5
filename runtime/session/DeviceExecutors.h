// Where a one-device session on a device gets its executors: the CUDA
// backend's, or, while a test has set a factory, the test's own
// (backend/DeviceExecutor.h), so that everything a session does with a
// device is checked where there is none.
#pragma once

#include "backend/DeviceExecutor.h"
#include "backend/Executable.h"
#include "support/Diagnostics.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace mgc::session {

// Makes the executor of `exe` (`graph`: SessionOptions::cudaGraph, for the
// step); reports and returns null when it cannot.
using DeviceExecutorFactory =
    std::function<std::unique_ptr<backend::DeviceExecutor>(
        const backend::Executable &exe, bool graph, DiagnosticEngine &diag)>;

// For tests: sessions made while `factory` is set run their one-device
// programs on --backend cuda on its executors, with no device needed; an
// empty factory restores the CUDA backend's. Process-wide.
void setDeviceExecutorFactoryForTests(DeviceExecutorFactory factory);

// Why no device can run a session's programs ("no CUDA device: ...", "this
// build of mgc has no CUDA backend ..."), or nullopt when one can.
std::optional<std::string> deviceUnavailableReason();

// The executor of `exe` on the device, from the test factory when one is
// set, else CUDA's.
std::unique_ptr<backend::DeviceExecutor>
makeDeviceExecutor(const backend::Executable &exe, bool graph,
                   DiagnosticEngine &diag);

} // namespace mgc::session
