#include "backend/GroupCall.h"

#include "llvm/ADT/STLExtras.h"

#include <numeric>

namespace mgc::backend {

bool isAllReduce(CallKind kind) {
  return kind == CallKind::AllReduce || kind == CallKind::AllReduceMax;
}

const char *callName(CallKind kind) {
  switch (kind) {
  case CallKind::AllReduce:
    return "allReduce";
  case CallKind::AllReduceMax:
    return "allReduceMax";
  case CallKind::AllGather:
    return "allGather";
  case CallKind::ReduceScatter:
    return "reduceScatter";
  case CallKind::AllToAll:
    break;
  }
  return "allToAll";
}

std::string describe(const GroupCall &c) {
  std::string s =
      std::string(callName(c.kind)) + " of " + ir::dtypeName(c.dtype).str();
  if (isAllReduce(c.kind))
    return s + ", " + std::to_string(c.count) + " elements";
  if (c.kind != CallKind::AllToAll)
    return s + ", counts " + ir::shapeStr(c.counts);
  return s + ", send counts " + ir::shapeStr(c.counts) + ", receive counts " +
         ir::shapeStr(c.recvCounts);
}

std::string badPointToPoint(const ir::Mesh &mesh, int64_t device, int64_t peer,
                            int64_t count) {
  if (count < 0)
    return "a negative count";
  if (peer == device)
    return "a device cannot send to itself";
  if (peer < 0 || peer >= mesh.numDevices())
    return "device " + std::to_string(peer) + " is not in the mesh " +
           mesh.str();
  return "";
}

int64_t callElements(const GroupCall &c) {
  if (isAllReduce(c.kind))
    return c.count;
  return std::accumulate(c.counts.begin(), c.counts.end(), int64_t(0));
}

int64_t partOffset(llvm::ArrayRef<int64_t> counts, size_t j) {
  return std::accumulate(counts.begin(), counts.begin() + j, int64_t(0));
}

std::string badCall(const GroupCall &c, size_t n) {
  if (isAllReduce(c.kind))
    return c.count < 0 ? "a negative count" : "";
  if (c.counts.size() != n ||
      (c.kind == CallKind::AllToAll && c.recvCounts.size() != n))
    return "expected one count per device";
  if (llvm::any_of(c.counts, [](int64_t x) { return x < 0; }) ||
      llvm::any_of(c.recvCounts, [](int64_t x) { return x < 0; }))
    return "a negative count";
  return "";
}

int64_t callElementsSent(const GroupCall &c, size_t n, size_t me) {
  switch (c.kind) {
  case CallKind::AllReduce:
  case CallKind::AllReduceMax:
    return reductionElementsSent(c.count, n, me);
  case CallKind::AllGather:
    return allGatherElementsSent(c.counts, me);
  case CallKind::ReduceScatter:
  case CallKind::AllToAll:
    break;
  }
  return partsElementsSent(c.counts, me);
}

namespace {

GroupCall makeCall(CallKind kind, const void *in, void *out, ir::DType dtype) {
  GroupCall c;
  c.kind = kind;
  c.dtype = dtype;
  c.in = static_cast<const std::byte *>(in);
  c.out = static_cast<std::byte *>(out);
  return c;
}

} // namespace

LogicalResult GroupCallEndpoint::allReduce(llvm::StringRef axis, const void *in,
                                           void *out, int64_t count,
                                           ir::DType dtype,
                                           std::string &error) {
  GroupCall c = makeCall(CallKind::AllReduce, in, out, dtype);
  c.count = count;
  return call(axis, c, error);
}

LogicalResult GroupCallEndpoint::allReduceMax(llvm::StringRef axis,
                                              const void *in, void *out,
                                              int64_t count, ir::DType dtype,
                                              std::string &error) {
  GroupCall c = makeCall(CallKind::AllReduceMax, in, out, dtype);
  c.count = count;
  return call(axis, c, error);
}

LogicalResult GroupCallEndpoint::allGather(llvm::StringRef axis, const void *in,
                                           void *out,
                                           llvm::ArrayRef<int64_t> counts,
                                           ir::DType dtype,
                                           std::string &error) {
  GroupCall c = makeCall(CallKind::AllGather, in, out, dtype);
  c.counts = counts;
  return call(axis, c, error);
}

LogicalResult GroupCallEndpoint::reduceScatter(llvm::StringRef axis,
                                               const void *in, void *out,
                                               llvm::ArrayRef<int64_t> counts,
                                               ir::DType dtype,
                                               std::string &error) {
  GroupCall c = makeCall(CallKind::ReduceScatter, in, out, dtype);
  c.counts = counts;
  return call(axis, c, error);
}

LogicalResult GroupCallEndpoint::allToAll(llvm::StringRef axis, const void *in,
                                          llvm::ArrayRef<int64_t> sendCounts,
                                          void *out,
                                          llvm::ArrayRef<int64_t> recvCounts,
                                          ir::DType dtype, std::string &error) {
  GroupCall c = makeCall(CallKind::AllToAll, in, out, dtype);
  c.counts = sendCounts;
  c.recvCounts = recvCounts;
  return call(axis, c, error);
}

} // namespace mgc::backend
