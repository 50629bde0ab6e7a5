// The in-process communicator. Each axis group has a rendezvous: a device
// publishes its call (kind, counts, dtype, buffer pointers) in its slot and
// waits at an entry barrier; once the whole group is there every device
// checks that the calls agree, does its share of the work reading and
// writing its peers' buffers directly, and waits at an exit barrier so that
// no buffer is released while a peer may still use it. Barriers count
// arrivals per generation, so consecutive collectives on one group never
// mix. Only the entry barrier can be aborted: past it, every device of the
// group is running and reaches the exit barrier without waiting on anyone.
#include "backend/cpu/InProcessCommunicator.h"

#include "backend/cpu/Reductions.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>

namespace mgc::backend::cpu {

namespace {

enum class CallKind : uint8_t {
  AllReduce,
  AllReduceMax,
  AllGather,
  ReduceScatter,
  AllToAll
};

// All-reduces: one count, every device gets the whole result.
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

// One device's side of a collective. The arrays and buffers belong to the
// caller, which is blocked inside the call while peers read them.
struct Call {
  CallKind kind = CallKind::AllReduce;
  ir::DType dtype = ir::DType::F32;
  int64_t count = 0;                  // allReduce, allReduceMax
  llvm::ArrayRef<int64_t> counts;     // allGather, reduceScatter; allToAll send
  llvm::ArrayRef<int64_t> recvCounts; // allToAll
  const std::byte *in = nullptr;
  std::byte *out = nullptr;
};

std::string listStr(llvm::ArrayRef<int64_t> xs) { return ir::shapeStr(xs); }

std::string describe(const Call &c) {
  std::string s =
      std::string(callName(c.kind)) + " of " + ir::dtypeName(c.dtype).str();
  switch (c.kind) {
  case CallKind::AllReduce:
  case CallKind::AllReduceMax:
    return s + ", " + std::to_string(c.count) + " elements";
  case CallKind::AllGather:
  case CallKind::ReduceScatter:
    return s + ", counts " + listStr(c.counts);
  case CallKind::AllToAll:
    break;
  }
  return s + ", send counts " + listStr(c.counts) + ", receive counts " +
         listStr(c.recvCounts);
}

int64_t offsetOf(llvm::ArrayRef<int64_t> xs, size_t j) {
  return std::accumulate(xs.begin(), xs.begin() + j, int64_t(0));
}

// The meeting point of one axis group.
struct Rendezvous {
  explicit Rendezvous(std::vector<int64_t> devices)
      : devices(std::move(devices)), slots(this->devices.size()) {}

  std::vector<int64_t> devices; // by coordinate
  std::mutex mutex;
  std::condition_variable cv;
  uint64_t generation = 0;
  size_t arrived = 0;
  std::vector<Call> slots; // by coordinate
};

// A point-to-point message waiting for its recv.
struct Message {
  ir::DType dtype;
  int64_t count;
  std::vector<std::byte> data;
};

} // namespace

struct InProcessMesh::Impl {
  class Endpoint;

  explicit Impl(ir::Mesh m);

  ir::Mesh mesh;
  std::vector<std::unique_ptr<Rendezvous>> rendezvous;
  // groups[device][axis]: the rendezvous of the device's group on the axis.
  std::vector<std::vector<Rendezvous *>> groups;
  std::vector<std::unique_ptr<Endpoint>> endpoints;
  std::vector<int64_t> all; // 0, 1, ... n-1

  // Mailboxes of send/recv by (sender, receiver), under one lock.
  std::mutex mailMutex;
  std::condition_variable mailCv;
  std::map<std::pair<int64_t, int64_t>, std::deque<Message>> mail;

  std::atomic<bool> aborted{false};
  std::mutex reasonMutex;
  std::string reason;

  std::string abortReason() {
    std::lock_guard<std::mutex> lock(reasonMutex);
    return reason;
  }

  // Waits until the whole group has arrived. With `abortable`, returns
  // false (having left the count) if the mesh is aborted first.
  bool barrier(Rendezvous &r, std::unique_lock<std::mutex> &lock,
               bool abortable) {
    if (abortable && aborted.load())
      return false;
    uint64_t gen = r.generation;
    if (++r.arrived == r.devices.size()) {
      r.arrived = 0;
      ++r.generation;
      r.cv.notify_all();
      return true;
    }
    r.cv.wait(lock, [&] {
      return r.generation != gen || (abortable && aborted.load());
    });
    if (r.generation != gen)
      return true;
    --r.arrived;
    return false;
  }

  // Runs `call` of `device` with its group on `axis`; `elementsSent` is
  // what the MPI communicator would send for it.
  LogicalResult collective(int64_t device, llvm::StringRef axis,
                           const Call &call, std::string &error,
                           int64_t &elementsSent);
  LogicalResult send(int64_t from, int64_t to, const void *in, int64_t count,
                     ir::DType dtype, std::string &error);
  LogicalResult recv(int64_t to, int64_t from, void *out, int64_t count,
                     ir::DType dtype, std::string &error);
  // Why `peer` cannot be the other end of a send or recv of `device`, or
  // "" when it can.
  std::string badPeer(int64_t device, int64_t peer) const {
    if (peer < 0 || peer >= mesh.numDevices())
      return "device " + std::to_string(peer) + " is not in the mesh " +
             mesh.str();
    if (peer == device)
      return "a device cannot send to itself";
    return "";
  }
};

namespace {

// Why the calls of a group cannot run together, or nullopt. Every device
// computes this from the same slots, so they all agree.
std::optional<std::string> checkCalls(llvm::ArrayRef<Call> slots,
                                      llvm::ArrayRef<int64_t> devices,
                                      llvm::StringRef axis) {
  size_t n = slots.size();
  auto dev = [&](size_t j) { return "device " + std::to_string(devices[j]); };
  const Call &first = slots[0];
  for (size_t j = 1; j < n; ++j) {
    const Call &c = slots[j];
    bool same = c.kind == first.kind && c.dtype == first.dtype;
    if (same && isAllReduce(c.kind))
      same = c.count == first.count;
    if (same &&
        (c.kind == CallKind::AllGather || c.kind == CallKind::ReduceScatter))
      same = c.counts == first.counts;
    if (!same)
      return "devices of axis '" + axis.str() +
             "' disagree on a collective: " + dev(0) + " calls " +
             describe(first) + ", " + dev(j) + " calls " + describe(c);
  }
  for (size_t j = 0; j < n; ++j) {
    const Call &c = slots[j];
    std::string where = dev(j) + " calls " + describe(c) + " on axis '" +
                        axis.str() + "' of " + std::to_string(n) + " devices: ";
    if (isAllReduce(c.kind)) {
      if (c.count < 0)
        return where + "a negative count";
      continue;
    }
    if (c.counts.size() != n ||
        (c.kind == CallKind::AllToAll && c.recvCounts.size() != n))
      return where + "expected one count per device";
    if (llvm::any_of(c.counts, [](int64_t x) { return x < 0; }) ||
        llvm::any_of(c.recvCounts, [](int64_t x) { return x < 0; }))
      return where + "a negative count";
    if (c.kind == CallKind::AllToAll)
      for (size_t k = 0; k < n; ++k)
        if (c.counts[k] != slots[k].recvCounts[j])
          return where + "it sends " + std::to_string(c.counts[k]) +
                 " elements to " + dev(k) + ", which expects " +
                 std::to_string(slots[k].recvCounts[j]);
  }
  return std::nullopt;
}

// What the MPI communicator sends for `c` from coordinate `me` of a group
// of `n`, in elements.
int64_t elementsSentBy(const Call &c, size_t n, size_t me) {
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

// This device's share of the work; `me` is its coordinate.
void runCall(llvm::ArrayRef<Call> slots, size_t me) {
  const Call &mine = slots[me];
  size_t n = slots.size();
  size_t bytes = ir::dtypeBytes(mine.dtype);
  switch (mine.kind) {
  case CallKind::AllReduce:
  case CallKind::AllReduceMax: {
    // Device `me` reduces elements [lo, hi) (sum or maximum) and writes
    // them to every device's result: each element is read and written by
    // one device only, so the result may be the operand itself, and every
    // copy is the same.
    int64_t count = mine.count;
    int64_t lo = count * static_cast<int64_t>(me) / static_cast<int64_t>(n);
    int64_t hi = count * static_cast<int64_t>(me + 1) / static_cast<int64_t>(n);
    if (hi <= lo)
      return;
    llvm::SmallVector<const std::byte *, 8> srcs;
    for (const Call &c : slots)
      srcs.push_back(c.in + lo * bytes);
    std::byte *first = slots[0].out + lo * bytes;
    if (mine.kind == CallKind::AllReduce)
      sumParts(mine.dtype, srcs, first, hi - lo);
    else
      maxParts(mine.dtype, srcs, first, hi - lo);
    for (size_t k = 1; k < n; ++k)
      std::memcpy(slots[k].out + lo * bytes, first, (hi - lo) * bytes);
    return;
  }
  case CallKind::AllGather: {
    // Each device writes its own part into every result.
    int64_t count = mine.counts[me];
    int64_t at = offsetOf(mine.counts, me);
    for (const Call &c : slots)
      if (count > 0)
        std::memmove(c.out + at * bytes, mine.in, count * bytes);
    return;
  }
  case CallKind::ReduceScatter: {
    int64_t count = mine.counts[me];
    if (count == 0)
      return;
    int64_t at = offsetOf(mine.counts, me);
    llvm::SmallVector<const std::byte *, 8> srcs;
    for (const Call &c : slots)
      srcs.push_back(c.in + at * bytes);
    sumParts(mine.dtype, srcs, mine.out, count);
    return;
  }
  case CallKind::AllToAll: {
    int64_t at = 0;
    for (size_t j = 0; j < n; ++j) {
      int64_t count = mine.recvCounts[j];
      if (count > 0)
        std::memcpy(mine.out + at * bytes,
                    slots[j].in + offsetOf(slots[j].counts, me) * bytes,
                    count * bytes);
      at += count;
    }
    return;
  }
  }
}

} // namespace

class InProcessMesh::Impl::Endpoint final : public Communicator {
public:
  Endpoint(Impl &impl, int64_t device) : impl_(impl), device_(device) {}

  const ir::Mesh &mesh() const override { return impl_.mesh; }
  int64_t device() const override { return device_; }

  LogicalResult allReduce(llvm::StringRef axis, const void *in, void *out,
                          int64_t count, ir::DType dtype,
                          std::string &error) override {
    Call c;
    c.kind = CallKind::AllReduce;
    c.count = count;
    return run(axis, c, in, out, dtype, error);
  }
  LogicalResult allReduceMax(llvm::StringRef axis, const void *in, void *out,
                             int64_t count, ir::DType dtype,
                             std::string &error) override {
    Call c;
    c.kind = CallKind::AllReduceMax;
    c.count = count;
    return run(axis, c, in, out, dtype, error);
  }
  LogicalResult allGather(llvm::StringRef axis, const void *in, void *out,
                          llvm::ArrayRef<int64_t> counts, ir::DType dtype,
                          std::string &error) override {
    Call c;
    c.kind = CallKind::AllGather;
    c.counts = counts;
    return run(axis, c, in, out, dtype, error);
  }
  LogicalResult reduceScatter(llvm::StringRef axis, const void *in, void *out,
                              llvm::ArrayRef<int64_t> counts, ir::DType dtype,
                              std::string &error) override {
    Call c;
    c.kind = CallKind::ReduceScatter;
    c.counts = counts;
    return run(axis, c, in, out, dtype, error);
  }
  LogicalResult allToAll(llvm::StringRef axis, const void *in,
                         llvm::ArrayRef<int64_t> sendCounts, void *out,
                         llvm::ArrayRef<int64_t> recvCounts, ir::DType dtype,
                         std::string &error) override {
    Call c;
    c.kind = CallKind::AllToAll;
    c.counts = sendCounts;
    c.recvCounts = recvCounts;
    return run(axis, c, in, out, dtype, error);
  }
  LogicalResult send(int64_t peer, const void *in, int64_t count,
                     ir::DType dtype, std::string &error) override {
    if (failed(impl_.send(device_, peer, in, count, dtype, error)))
      return failure();
    countSent(static_cast<uint64_t>(count) * ir::dtypeBytes(dtype));
    return success();
  }
  LogicalResult recv(int64_t peer, void *out, int64_t count, ir::DType dtype,
                     std::string &error) override {
    return impl_.recv(device_, peer, out, count, dtype, error);
  }

private:
  LogicalResult run(llvm::StringRef axis, Call &c, const void *in, void *out,
                    ir::DType dtype, std::string &error) {
    c.dtype = dtype;
    c.in = static_cast<const std::byte *>(in);
    c.out = static_cast<std::byte *>(out);
    int64_t elements = 0;
    if (failed(impl_.collective(device_, axis, c, error, elements)))
      return failure();
    countSent(static_cast<uint64_t>(elements) * ir::dtypeBytes(dtype));
    return success();
  }

  Impl &impl_;
  int64_t device_;
};

InProcessMesh::Impl::Impl(ir::Mesh m) : mesh(std::move(m)) {
  int64_t devices = mesh.numDevices();
  size_t axes = mesh.axes().size();
  groups.assign(devices, std::vector<Rendezvous *>(axes, nullptr));
  for (size_t a = 0; a < axes; ++a) {
    llvm::StringRef name = mesh.axes()[a].name;
    for (int64_t d = 0; d < devices; ++d) {
      if (groups[d][a])
        continue;
      rendezvous.push_back(std::make_unique<Rendezvous>(mesh.group(d, name)));
      for (int64_t member : rendezvous.back()->devices)
        groups[member][a] = rendezvous.back().get();
    }
  }
  for (int64_t d = 0; d < devices; ++d) {
    endpoints.push_back(std::make_unique<Endpoint>(*this, d));
    all.push_back(d);
  }
}

LogicalResult InProcessMesh::Impl::send(int64_t from, int64_t to,
                                        const void *in, int64_t count,
                                        ir::DType dtype, std::string &error) {
  std::string bad = badPeer(from, to);
  if (bad.empty() && count < 0)
    bad = "a negative count";
  if (!bad.empty()) {
    error = "send to device " + std::to_string(to) + ": " + bad;
    return failure();
  }
  Message m{dtype, count, {}};
  const auto *bytes = static_cast<const std::byte *>(in);
  m.data.assign(bytes, bytes + count * ir::dtypeBytes(dtype));
  {
    std::lock_guard<std::mutex> lock(mailMutex);
    if (aborted.load()) {
      error = "send to device " + std::to_string(to) +
              " was aborted: " + abortReason();
      return failure();
    }
    mail[{from, to}].push_back(std::move(m));
  }
  mailCv.notify_all();
  return success();
}

LogicalResult InProcessMesh::Impl::recv(int64_t to, int64_t from, void *out,
                                        int64_t count, ir::DType dtype,
                                        std::string &error) {
  std::string what = "recv from device " + std::to_string(from);
  std::string bad = badPeer(to, from);
  if (!bad.empty()) {
    error = what + ": " + bad;
    return failure();
  }
  std::unique_lock<std::mutex> lock(mailMutex);
  std::deque<Message> &box = mail[{from, to}];
  mailCv.wait(lock, [&] { return !box.empty() || aborted.load(); });
  if (box.empty()) {
    error = what + " was aborted: " + abortReason();
    return failure();
  }
  Message m = std::move(box.front());
  box.pop_front();
  lock.unlock();
  if (m.dtype != dtype || m.count != count) {
    error = what + ": device " + std::to_string(from) + " sent " +
            std::to_string(m.count) + " elements of " +
            ir::dtypeName(m.dtype).str() + " where " + std::to_string(count) +
            " of " + ir::dtypeName(dtype).str() + " were expected";
    return failure();
  }
  if (!m.data.empty())
    std::memcpy(out, m.data.data(), m.data.size());
  return success();
}

LogicalResult InProcessMesh::Impl::collective(int64_t device,
                                              llvm::StringRef axis,
                                              const Call &call,
                                              std::string &error,
                                              int64_t &elementsSent) {
  std::string what =
      std::string(callName(call.kind)) + " on axis '" + axis.str() + "'";
  int a = mesh.axisIndex(axis);
  if (a < 0) {
    error = what + ": the mesh " + mesh.str() + " has no such axis";
    return failure();
  }
  Rendezvous &r = *groups[device][a];
  size_t me = static_cast<size_t>(mesh.coords(device)[a]);
  std::unique_lock<std::mutex> lock(r.mutex);
  r.slots[me] = call;
  if (!barrier(r, lock, /*abortable=*/true)) {
    error = what + " was aborted: " + abortReason();
    return failure();
  }
  // Past the entry barrier the slots are stable until the exit barrier:
  // read them without the lock, as every peer does.
  lock.unlock();
  std::optional<std::string> bad = checkCalls(r.slots, r.devices, axis);
  if (!bad)
    runCall(r.slots, me);
  lock.lock();
  barrier(r, lock, /*abortable=*/false);
  if (bad) {
    error = *bad;
    return failure();
  }
  elementsSent = elementsSentBy(call, r.devices.size(), me);
  return success();
}

InProcessMesh::InProcessMesh(ir::Mesh mesh)
    : impl_(std::make_unique<Impl>(std::move(mesh))) {}

InProcessMesh::~InProcessMesh() = default;

const ir::Mesh &InProcessMesh::mesh() const { return impl_->mesh; }

llvm::ArrayRef<int64_t> InProcessMesh::localDevices() const {
  return impl_->all;
}

Communicator &InProcessMesh::endpoint(int64_t device) {
  return *impl_->endpoints[device];
}

void InProcessMesh::abort(const std::string &reason) {
  {
    std::lock_guard<std::mutex> lock(impl_->reasonMutex);
    if (!impl_->aborted.load())
      impl_->reason = reason;
    impl_->aborted.store(true);
  }
  // Taking each group's lock before notifying means a device about to wait
  // either sees the flag or is already waiting and gets the notification.
  for (auto &r : impl_->rendezvous) {
    std::lock_guard<std::mutex> lock(r->mutex);
    r->cv.notify_all();
  }
  std::lock_guard<std::mutex> lock(impl_->mailMutex);
  impl_->mailCv.notify_all();
}

void InProcessMesh::reset() {
  {
    std::lock_guard<std::mutex> lock(impl_->reasonMutex);
    impl_->aborted.store(false);
    impl_->reason.clear();
  }
  // Messages of the aborted step are not for the next one.
  std::lock_guard<std::mutex> lock(impl_->mailMutex);
  impl_->mail.clear();
}

} // namespace mgc::backend::cpu
