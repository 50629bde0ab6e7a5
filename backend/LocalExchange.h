// The meeting points of devices that one process runs side by side (the
// simulated devices of the CPU, or several simulated devices on one GPU):
// a rendezvous per axis group for the collectives, a mailbox per pair of
// devices for send/recv, and one abort for all of them. A collective
// publishes each device's call (kind, counts, dtype, buffers) in its slot;
// once the whole group has arrived every device checks that the calls
// agree and does its share of the work (moveShare) reading and writing its
// peers' buffers directly, then waits until every peer has done its share,
// so that no buffer is released while a peer may still use it. Where the
// work runs (the calling thread, a CUDA stream) is the caller's choice of
// DataMover; the meeting and the checks are the same for every backend.
#pragma once

#include "backend/Communicator.h"
#include "backend/GroupCall.h"
#include "ir/Sharding.h"
#include "ir/Types.h"
#include "support/Result.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace mgc::backend {

// Device `me`'s share of the group's calls (`slots`, by coordinate): of an
// all-reduce, the elements [count*me/n, count*(me+1)/n) reduced and written
// to every device's result; of an all-gather, its part written into every
// result; of a reduce-scatter and an all-to-all, its own result. Each
// element of a result is written by one device only.
void moveShare(llvm::ArrayRef<GroupCall> slots, size_t me, DataMover &mover);

class LocalExchange {
public:
  explicit LocalExchange(ir::Mesh mesh);
  ~LocalExchange();

  const ir::Mesh &mesh() const;
  // The devices of `device`'s group on mesh axis `axis` (an index), by
  // coordinate.
  llvm::ArrayRef<int64_t> group(int64_t device, int axis) const;

  using Share = llvm::function_ref<void(llvm::ArrayRef<GroupCall>, size_t)>;
  using Settle = llvm::function_ref<void(llvm::ArrayRef<int64_t>, size_t)>;
  // Runs `call` of `device` with its group on `axis`: waits for the whole
  // group, checks that the calls agree, calls share(slots, me) and waits
  // until every device of the group has returned from its share; then, if
  // given, calls settle(group, me) and waits again. (A stream communicator
  // enqueues its share in `share` and, in `settle`, its stream's wait for
  // its peers' shares: every peer has enqueued its share by then.) Every
  // device of an exchange passes a settle or none. Sets `elementsSent` to
  // what the MPI communicator would send for the call. Fails with a
  // message in `error` on a bad axis, calls that disagree, or an abort
  // while waiting for the group.
  LogicalResult collective(int64_t device, llvm::StringRef axis,
                           const GroupCall &call, Share share,
                           std::string &error, int64_t &elementsSent,
                           Settle settle = nullptr);

  // Point-to-point with host buffers: the message is copied into the
  // mailbox of (from, to); the k-th recv of `to` from `from` takes the k-th
  // send and fails, naming both, if its count or dtype differ.
  LogicalResult send(int64_t from, int64_t to, const void *in, int64_t count,
                     ir::DType dtype, std::string &error);
  LogicalResult recv(int64_t to, int64_t from, void *out, int64_t count,
                     ir::DType dtype, std::string &error);

  // Makes every waiting call, and every later one, fail with `reason`.
  void abort(const std::string &reason);
  // Clears an abort and the undelivered messages, for the next step.
  void reset();

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace mgc::backend
