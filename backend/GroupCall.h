// One device's side of a collective as data (GroupCall), the movement of
// its elements on the memory its buffers live in (DataMover), and the
// endpoint base that turns Communicator's five collectives into
// GroupCalls. Every communicator builds on these: the local exchanges
// (simulated devices on the CPU or on one GPU) meet their group with them,
// and the point-to-point transports (MPI, NCCL) plan their messages from
// them (backend/PeerPlan.h).
#pragma once

#include "backend/Communicator.h"
#include "ir/Sharding.h"
#include "ir/Types.h"
#include "support/Result.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace mgc::backend {

enum class CallKind : uint8_t {
  AllReduce,
  AllReduceMax,
  AllGather,
  ReduceScatter,
  AllToAll
};

// All-reduces: one count, every device gets the whole result.
bool isAllReduce(CallKind kind);
// The Communicator method's name: "allReduce", "allGather", ...
const char *callName(CallKind kind);

// One device's side of a collective. The arrays and buffers belong to the
// caller, which is inside the call while peers or transports use them.
struct GroupCall {
  CallKind kind = CallKind::AllReduce;
  ir::DType dtype = ir::DType::F32;
  int64_t count = 0;                  // allReduce, allReduceMax
  llvm::ArrayRef<int64_t> counts;     // allGather, reduceScatter; allToAll send
  llvm::ArrayRef<int64_t> recvCounts; // allToAll
  const std::byte *in = nullptr;
  std::byte *out = nullptr;
};

// "allGather of f32, counts [2, 3]": the call, for messages that compare
// two devices' calls.
std::string describe(const GroupCall &call);
// Why device `device` cannot send `count` elements to `peer` or receive
// them from it, or "".
std::string badPointToPoint(const ir::Mesh &mesh, int64_t device, int64_t peer,
                            int64_t count);
// The elements the call moves on this device (the count of a reduction,
// the sum of the counts otherwise).
int64_t callElements(const GroupCall &call);
// Where part j of parts of `counts` elements starts: the sum of the counts
// before it.
int64_t partOffset(llvm::ArrayRef<int64_t> counts, size_t j);
// Why the call cannot be made by a device of a group of `n`, or "": one
// count per device, none negative.
std::string badCall(const GroupCall &call, size_t n);
// What the point-to-point transports send for `call` from coordinate `me`
// of a group of `n`, in elements (Communicator.h's functions of each
// kind); the local exchanges count the same.
int64_t callElementsSent(const GroupCall &call, size_t n, size_t me);

// The element movement of a collective, on the memory its buffers live in.
// Sums and maxima are those of backend/cpu/Reductions.h (coordinate order;
// bf16 and f16 summed in f32 and rounded once).
class DataMover {
public:
  virtual ~DataMover() = default;
  virtual void sum(ir::DType dtype, llvm::ArrayRef<const std::byte *> srcs,
                   std::byte *dst, int64_t n) = 0;
  virtual void max(ir::DType dtype, llvm::ArrayRef<const std::byte *> srcs,
                   std::byte *dst, int64_t n) = 0;
  // `dst` and `src` are the same or do not overlap.
  virtual void copy(std::byte *dst, const std::byte *src, size_t bytes) = 0;
};

// An endpoint whose collectives are GroupCalls, each handed to call()
// (which moves the elements as its communicator does).
class GroupCallEndpoint : public Communicator {
public:
  LogicalResult allReduce(llvm::StringRef axis, const void *in, void *out,
                          int64_t count, ir::DType dtype,
                          std::string &error) override;
  LogicalResult allReduceMax(llvm::StringRef axis, const void *in, void *out,
                             int64_t count, ir::DType dtype,
                             std::string &error) override;
  LogicalResult allGather(llvm::StringRef axis, const void *in, void *out,
                          llvm::ArrayRef<int64_t> counts, ir::DType dtype,
                          std::string &error) override;
  LogicalResult reduceScatter(llvm::StringRef axis, const void *in, void *out,
                              llvm::ArrayRef<int64_t> counts, ir::DType dtype,
                              std::string &error) override;
  LogicalResult allToAll(llvm::StringRef axis, const void *in,
                         llvm::ArrayRef<int64_t> sendCounts, void *out,
                         llvm::ArrayRef<int64_t> recvCounts, ir::DType dtype,
                         std::string &error) override;

protected:
  // Runs `call` (its buffers and dtype set) with the group on `axis`.
  virtual LogicalResult call(llvm::StringRef axis, const GroupCall &call,
                             std::string &error) = 0;
};

} // namespace mgc::backend
