// What the ranks of a job send each other outside the device programs, as
// bytes: the parts of tensors by device (to join a tensor whole, or the
// outputs of a step) and trace events. Both ends run the same binary; a
// malformed message is refused all the same.
#pragma once

#include "backend/cpu/CpuExecutor.h"
#include "backend/cpu/MeshExecutor.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace mgc::session {

// The parts in `parts` (by device, by name) for which needed(device, name)
// is true, as bytes; and back, added to `into` (false on malformed bytes).
std::string
packParts(const std::map<int64_t, backend::cpu::NamedTensors> &parts,
          const std::function<bool(int64_t, const std::string &)> &needed);
bool unpackParts(const std::string &bytes,
                 std::map<int64_t, backend::cpu::NamedTensors> &into);

// Trace events as bytes, and back, appended to `into` (false on malformed
// bytes).
std::string packEvents(const std::vector<backend::TraceEvent> &events);
bool unpackEvents(const std::string &bytes,
                  std::vector<backend::TraceEvent> &into);

} // namespace mgc::session
