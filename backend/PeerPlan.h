// A collective of one device as point-to-point messages to and from the
// other devices of its group, for the communicators whose transport moves
// messages (MPI between processes, NCCL between GPUs). The sums are taken
// exactly as the local exchanges take them (backend/LocalExchange.h): a
// reduction is a reduce-scatter, in which the device that owns a chunk
// adds every device's part of it in coordinate order, then an all-gather
// of the reduced chunks. It moves as many bytes as a ring all-reduce, and
// a mesh over processes or GPUs is bit-identical to the same mesh
// simulated in one process. The plan is data, so both transports run the
// same one (runPeerPlan) and a test can read it.
#pragma once

#include "backend/GroupCall.h"
#include "support/Result.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mgc::backend {

// Bytes [offset, offset + bytes) of one of the call's buffers.
struct PeerSpan {
  enum Buffer : uint8_t { In, Out, Scratch };
  Buffer buffer = In;
  int64_t offset = 0;
  int64_t bytes = 0;
};

// A message to or from the device of coordinate `peer` in the group.
struct PeerMessage {
  size_t peer = 0;
  PeerSpan span;
};

// Messages posted together, then the local work that needs them.
struct PeerPhase {
  // Every pair of devices exchanges one message each way per phase (even
  // an empty one, so that every receive has its match and a transport can
  // check sizes); sends and receives are by peer coordinate.
  std::vector<PeerMessage> sends, recvs;
  // After the messages: copies (to, from) of this device's own part ...
  std::vector<std::pair<PeerSpan, PeerSpan>> copies;
  // ... and, when `elements` > 0, the reduction (sum, or maximum for
  // allReduceMax) of `parts` in coordinate order into `reduced`.
  std::vector<PeerSpan> parts;
  PeerSpan reduced;
  int64_t elements = 0;
};

struct PeerPlan {
  std::vector<PeerPhase> phases;
  // Bytes of scratch the receives of the parts need.
  int64_t scratchBytes = 0;
};

// The plan of `call` (which badCall accepts) for coordinate `me` of a
// group of `n`.
PeerPlan planPeerCall(const GroupCall &call, size_t n, size_t me);

// A device's call on a mesh axis, placed in its group and planned.
struct DeviceCall {
  // "allReduce on axis 'dp' (4 KiB)", for messages.
  std::string what;
  size_t n = 0, me = 0; // group size, this device's coordinate
  PeerPlan plan;
};
// Plans `call` of `device` on `axis`; fails with a message in `error`
// (naming the call) for an axis the mesh lacks or a call the device cannot
// make (badCall; an all-to-all whose part for itself differs from what it
// expects from itself).
FailureOr<DeviceCall> planDeviceCall(const ir::Mesh &mesh, int64_t device,
                                     llvm::StringRef axis,
                                     const GroupCall &call, std::string &error);

// Moves one phase's messages. The peers are coordinates of the group.
class PeerTransport {
public:
  virtual ~PeerTransport() = default;
  virtual void send(size_t peer, const std::byte *data, int64_t bytes) = 0;
  virtual void recv(size_t peer, std::byte *data, int64_t bytes) = 0;
  // Completes the phase's messages: waits for them (MPI) or issues them
  // as one group on the stream (NCCL). Fails with a message in `error`.
  virtual LogicalResult finish(std::string &error) = 0;
};

// Runs `plan` for `call` with `scratch` (at least plan.scratchBytes),
// the local work by `mover`.
LogicalResult runPeerPlan(const PeerPlan &plan, const GroupCall &call,
                          std::byte *scratch, PeerTransport &transport,
                          DataMover &mover, std::string &error);

} // namespace mgc::backend
