// What a mesh runner reports of its devices: the timeline and the
// communication per device, gathered from every rank when the devices are
// spread over several processes.
#include "runtime/session/HostExchange.h"
#include "runtime/session/MeshRunner.h"

#include <cstring>

namespace mgc::session {

FailureOr<std::vector<backend::TraceEvent>>
MeshRunner::gatherTrace(DiagnosticEngine &diag) {
  if (!processes_ || processes_->size() <= 1)
    return trace_;
  std::vector<backend::TraceEvent> out;
  if (failed(fromEveryRank(
          packEvents(trace_), "gathering the timeline",
          [&](int, const std::string &bytes) {
            return unpackEvents(bytes, out);
          },
          diag)))
    return failure();
  return out;
}

FailureOr<std::vector<DeviceCommunication>>
MeshRunner::communication(DiagnosticEngine &diag) {
  using backend::QueueTimes;
  // A pipeline's devices count the bytes of their optimizer steps only.
  if (pipeline_)
    for (size_t k = 0; k < local_.size(); ++k)
      times_[k] = {local_[k], 0, 0,
                   pipeline_->applyBytes()[static_cast<size_t>(local_[k])]};
  std::vector<QueueTimes> all = times_;
  if (processes_ && processes_->size() > 1) {
    // Plain structs of the same binary on every rank.
    std::string mine(reinterpret_cast<const char *>(times_.data()),
                     times_.size() * sizeof(QueueTimes));
    all.clear();
    if (failed(fromEveryRank(
            mine, "gathering the devices' times",
            [&](int, const std::string &bytes) {
              if (bytes.size() % sizeof(QueueTimes) != 0)
                return false;
              size_t n = bytes.size() / sizeof(QueueTimes);
              all.resize(all.size() + n);
              std::memcpy(all.data() + all.size() - n, bytes.data(),
                          bytes.size());
              return true;
            },
            diag)))
      return failure();
  }
  std::vector<DeviceCommunication> out(
      pipeline_ ? step_.pipeline->schedule.stages * perStage_
                : step_.mesh.numDevices());
  for (const QueueTimes &t : all) {
    if (t.device < 0 || t.device >= static_cast<int64_t>(out.size()))
      continue;
    if (t.stepSeconds > 0)
      out[t.device].exposed = t.waitSeconds / t.stepSeconds;
    if (steps_ > 0)
      out[t.device].bytesPerStep =
          static_cast<double>(t.bytesSent) / static_cast<double>(steps_);
  }
  return out;
}

} // namespace mgc::session
