// A device's endpoint for the collectives of its mesh. Every device of an
// axis group calls the same collectives on that axis in the same order (the
// partitioner guarantees it: every device program has the same sequence of
// communication ops); a call returns once this device's result is complete.
// Buffers are contiguous elements of one dtype. Reductions add the parts in
// coordinate order (0 + 1 + 2 ...), computed the same way on every device,
// so replicas stay bit-identical and runs are deterministic. bf16 and f16
// are summed in f32 and rounded once.
#pragma once

#include "ir/Sharding.h"
#include "ir/Types.h"
#include "support/Result.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace mgc::backend {

class Communicator {
public:
  virtual ~Communicator() = default;

  virtual const ir::Mesh &mesh() const = 0;
  // This endpoint's device index in the mesh.
  virtual int64_t device() const = 0;
  // This device's coordinate on `axis` (0 for an axis not in the mesh).
  int64_t coord(llvm::StringRef axis) const {
    int i = mesh().axisIndex(axis);
    return i < 0 ? 0 : mesh().coords(device())[i];
  }

  // out[i] = sum over the group of in[i]; `in` and `out` may be the same.
  virtual LogicalResult allReduce(llvm::StringRef axis, const void *in,
                                  void *out, int64_t count, ir::DType dtype,
                                  std::string &error) = 0;
  // out[i] = the maximum over the group of in[i] (NaN if any is NaN); `in`
  // and `out` may be the same. The maximum is one of the values, so every
  // device gets the same bits whatever the order.
  virtual LogicalResult allReduceMax(llvm::StringRef axis, const void *in,
                                     void *out, int64_t count, ir::DType dtype,
                                     std::string &error) = 0;
  // This device contributes counts[coord] elements; `out` receives every
  // device's part in coordinate order (the sum of counts).
  virtual LogicalResult allGather(llvm::StringRef axis, const void *in,
                                  void *out, llvm::ArrayRef<int64_t> counts,
                                  ir::DType dtype, std::string &error) = 0;
  // `in` holds the sum of counts elements, part j (counts[j] elements) for
  // device j, in order; `out` receives this device's part summed over the
  // group.
  virtual LogicalResult reduceScatter(llvm::StringRef axis, const void *in,
                                      void *out, llvm::ArrayRef<int64_t> counts,
                                      ir::DType dtype, std::string &error) = 0;
  // `in` holds sendCounts[j] elements for each device j, in order; `out`
  // receives from each device j the part it sent here (recvCounts[j]
  // elements), in order.
  virtual LogicalResult allToAll(llvm::StringRef axis, const void *in,
                                 llvm::ArrayRef<int64_t> sendCounts, void *out,
                                 llvm::ArrayRef<int64_t> recvCounts,
                                 ir::DType dtype, std::string &error) = 0;

  // Point-to-point, between the stages of a pipeline: `count` elements to
  // or from device `peer`. The k-th send from a device to a peer meets
  // the peer's k-th recv from that device; their counts and dtypes must
  // agree (a mismatch fails the recv, naming both). send may return before
  // the peer receives (the message is buffered).
  virtual LogicalResult send(int64_t peer, const void *in, int64_t count,
                             ir::DType dtype, std::string &error) = 0;
  virtual LogicalResult recv(int64_t peer, void *out, int64_t count,
                             ir::DType dtype, std::string &error) = 0;

  // One group of point-to-point messages that completes together, as
  // batched isend/irecv (NCCL's group, Megatron-LM's batch_isend_irecv):
  // what a pipeline stage posts between two computations. Two stages that
  // each send to the other and then receive meet even where a send waits
  // for its receive. The default sends, then receives: right where sends
  // are buffered.
  struct PointToPoint {
    int64_t peer = 0;
    void *data = nullptr; // read by a send, written by a recv
    int64_t count = 0;
    ir::DType dtype = ir::DType::F32;
  };
  virtual LogicalResult sendRecv(llvm::ArrayRef<PointToPoint> sends,
                                 llvm::ArrayRef<PointToPoint> recvs,
                                 std::string &error) {
    for (const PointToPoint &m : sends)
      if (failed(send(m.peer, m.data, m.count, m.dtype, error)))
        return failure();
    for (const PointToPoint &m : recvs)
      if (failed(recv(m.peer, m.data, m.count, m.dtype, error)))
        return failure();
    return success();
  }

  // Where a call does its work. A host communicator (in-process, MPI) has
  // done it, in host memory, when the call returns. A stream communicator
  // (simulated devices on one GPU, NCCL) takes device memory and enqueues
  // the work on the CUDA stream last given to setStream, after the work
  // already there, and returns: the result is complete when that stream
  // reaches the point of the call (the asynchronous form; an event
  // recorded after it carries the completion to other streams). Errors it
  // finds while enqueuing (an abort, calls that disagree) fail the call.
  virtual bool onStream() const { return false; }
  // The stream (a cudaStream_t) of the calls that follow.
  virtual void setStream(void *stream) { (void)stream; }

  // Bytes this endpoint has sent to other devices so far, as the MPI
  // communicator moves them; the in-process communicator, which moves
  // nothing, counts the same (the functions below), so a simulated mesh
  // shows the traffic its processes would have.
  uint64_t bytesSent() const { return sent_; }

protected:
  void countSent(uint64_t bytes) { sent_ += bytes; }

private:
  uint64_t sent_ = 0; // only the endpoint's own thread changes it
};

// What one device (coordinate `me` of a group of `n`) sends in a call, in
// elements: a reduction of `count` elements is a reduce-scatter (every
// other coordinate's chunk of count * j / n) then an all-gather of its own
// chunk; a gather or scatter sends each part straight to its device.
int64_t reductionElementsSent(int64_t count, size_t n, size_t me);
int64_t allGatherElementsSent(llvm::ArrayRef<int64_t> counts, size_t me);
// reduceScatter and allToAll: every part but its own.
int64_t partsElementsSent(llvm::ArrayRef<int64_t> counts, size_t me);

// The endpoints of the devices that one process runs, made together for
// one mesh: every device for the in-process communicator, this rank's
// devices for MPI. Each endpoint is used by one thread at a time (its
// device's communication queue).
class CommunicatorSet {
public:
  virtual ~CommunicatorSet() = default;

  virtual const ir::Mesh &mesh() const = 0;
  // The devices of the mesh this process runs, in increasing order.
  virtual llvm::ArrayRef<int64_t> localDevices() const = 0;
  // The endpoint of `device`, one of localDevices().
  virtual Communicator &endpoint(int64_t device) = 0;

  // Makes every call that is waiting, and every later one, fail with
  // `reason` (a device failed: its peers must not wait for it forever).
  virtual void abort(const std::string &reason) = 0;
  // Clears an abort, for the next step. Only when no call is running.
  virtual void reset() = 0;
};

// Makes the communicators of a mesh; reports why it cannot in `error`.
using CommunicatorFactory = std::function<std::unique_ptr<CommunicatorSet>(
    const ir::Mesh &mesh, std::string &error)>;

} // namespace mgc::backend
