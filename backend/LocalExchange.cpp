// The local exchange: a rendezvous per axis group, mailboxes per pair of
// devices, one abort. Barriers count arrivals per generation, so
// consecutive collectives on one group never mix. Only the entry barrier
// can be aborted: past it, every device of the group is running its share
// and reaches the exit barrier without waiting on anyone.
#include "backend/LocalExchange.h"

#include "backend/Communicator.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>

namespace mgc::backend {

namespace {

// The meeting point of one axis group.
struct Rendezvous {
  explicit Rendezvous(std::vector<int64_t> devices)
      : devices(std::move(devices)), slots(this->devices.size()) {}

  std::vector<int64_t> devices; // by coordinate
  std::mutex mutex;
  std::condition_variable cv;
  uint64_t generation = 0;
  size_t arrived = 0;
  std::vector<GroupCall> slots; // by coordinate
};

// A point-to-point message waiting for its recv.
struct Message {
  ir::DType dtype;
  int64_t count;
  std::vector<std::byte> data;
};

} // namespace

struct LocalExchange::Impl {
  explicit Impl(ir::Mesh m);

  ir::Mesh mesh;
  std::vector<std::unique_ptr<Rendezvous>> rendezvous;
  // groups[device][axis]: the rendezvous of the device's group on the axis.
  std::vector<std::vector<Rendezvous *>> groups;

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
  // false (having left the count) if the exchange is aborted first.
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
};

LocalExchange::Impl::Impl(ir::Mesh m) : mesh(std::move(m)) {
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
}

namespace {

// Why the calls of a group cannot run together, or nullopt. Every device
// computes this from the same slots, so they all agree.
std::optional<std::string> checkCalls(llvm::ArrayRef<GroupCall> slots,
                                      llvm::ArrayRef<int64_t> devices,
                                      llvm::StringRef axis) {
  size_t n = slots.size();
  auto dev = [&](size_t j) { return "device " + std::to_string(devices[j]); };
  const GroupCall &first = slots[0];
  for (size_t j = 1; j < n; ++j) {
    const GroupCall &c = slots[j];
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
    const GroupCall &c = slots[j];
    std::string where = dev(j) + " calls " + describe(c) + " on axis '" +
                        axis.str() + "' of " + std::to_string(n) + " devices: ";
    std::string bad = badCall(c, n);
    if (!bad.empty())
      return where + bad;
    if (c.kind == CallKind::AllToAll)
      for (size_t k = 0; k < n; ++k)
        if (c.counts[k] != slots[k].recvCounts[j])
          return where + "it sends " + std::to_string(c.counts[k]) +
                 " elements to " + dev(k) + ", which expects " +
                 std::to_string(slots[k].recvCounts[j]);
  }
  return std::nullopt;
}

} // namespace

void moveShare(llvm::ArrayRef<GroupCall> slots, size_t me, DataMover &mover) {
  const GroupCall &mine = slots[me];
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
    for (const GroupCall &c : slots)
      srcs.push_back(c.in + lo * bytes);
    std::byte *first = slots[0].out + lo * bytes;
    if (mine.kind == CallKind::AllReduce)
      mover.sum(mine.dtype, srcs, first, hi - lo);
    else
      mover.max(mine.dtype, srcs, first, hi - lo);
    for (size_t k = 1; k < n; ++k)
      mover.copy(slots[k].out + lo * bytes, first, (hi - lo) * bytes);
    return;
  }
  case CallKind::AllGather: {
    // Each device writes its own part into every result.
    int64_t count = mine.counts[me];
    int64_t at = partOffset(mine.counts, me);
    for (const GroupCall &c : slots)
      if (count > 0)
        mover.copy(c.out + at * bytes, mine.in, count * bytes);
    return;
  }
  case CallKind::ReduceScatter: {
    int64_t count = mine.counts[me];
    if (count == 0)
      return;
    int64_t at = partOffset(mine.counts, me);
    llvm::SmallVector<const std::byte *, 8> srcs;
    for (const GroupCall &c : slots)
      srcs.push_back(c.in + at * bytes);
    mover.sum(mine.dtype, srcs, mine.out, count);
    return;
  }
  case CallKind::AllToAll: {
    int64_t at = 0;
    for (size_t j = 0; j < n; ++j) {
      int64_t count = mine.recvCounts[j];
      if (count > 0)
        mover.copy(mine.out + at * bytes,
                   slots[j].in + partOffset(slots[j].counts, me) * bytes,
                   count * bytes);
      at += count;
    }
    return;
  }
  }
}

LogicalResult LocalExchange::collective(int64_t device, llvm::StringRef axis,
                                        const GroupCall &call, Share share,
                                        std::string &error,
                                        int64_t &elementsSent, Settle settle) {
  Impl &im = *impl_;
  std::string what =
      std::string(callName(call.kind)) + " on axis '" + axis.str() + "'";
  int a = im.mesh.axisIndex(axis);
  if (a < 0) {
    error = what + ": the mesh " + im.mesh.str() + " has no such axis";
    return failure();
  }
  Rendezvous &r = *im.groups[device][a];
  size_t me = static_cast<size_t>(im.mesh.coords(device)[a]);
  std::unique_lock<std::mutex> lock(r.mutex);
  r.slots[me] = call;
  if (!im.barrier(r, lock, /*abortable=*/true)) {
    error = what + " was aborted: " + im.abortReason();
    return failure();
  }
  // Past the entry barrier the slots are stable until the exit barrier:
  // read them without the lock, as every peer does.
  lock.unlock();
  std::optional<std::string> bad = checkCalls(r.slots, r.devices, axis);
  if (!bad)
    share(r.slots, me);
  lock.lock();
  im.barrier(r, lock, /*abortable=*/false);
  if (settle && !bad) {
    lock.unlock();
    settle(r.devices, me);
    lock.lock();
    im.barrier(r, lock, /*abortable=*/false);
  }
  if (bad) {
    error = *bad;
    return failure();
  }
  elementsSent = callElementsSent(call, r.devices.size(), me);
  return success();
}

LocalExchange::LocalExchange(ir::Mesh mesh)
    : impl_(std::make_unique<Impl>(std::move(mesh))) {}

LocalExchange::~LocalExchange() = default;

const ir::Mesh &LocalExchange::mesh() const { return impl_->mesh; }

llvm::ArrayRef<int64_t> LocalExchange::group(int64_t device, int axis) const {
  return impl_->groups[device][axis]->devices;
}

LogicalResult LocalExchange::send(int64_t from, int64_t to, const void *in,
                                  int64_t count, ir::DType dtype,
                                  std::string &error) {
  Impl &im = *impl_;
  std::string bad = badPointToPoint(im.mesh, from, to, count);
  if (!bad.empty()) {
    error = "send to device " + std::to_string(to) + ": " + bad;
    return failure();
  }
  Message m{dtype, count, {}};
  const auto *bytes = static_cast<const std::byte *>(in);
  m.data.assign(bytes, bytes + count * ir::dtypeBytes(dtype));
  {
    std::lock_guard<std::mutex> lock(im.mailMutex);
    if (im.aborted.load()) {
      error = "send to device " + std::to_string(to) +
              " was aborted: " + im.abortReason();
      return failure();
    }
    im.mail[{from, to}].push_back(std::move(m));
  }
  im.mailCv.notify_all();
  return success();
}

LogicalResult LocalExchange::recv(int64_t to, int64_t from, void *out,
                                  int64_t count, ir::DType dtype,
                                  std::string &error) {
  Impl &im = *impl_;
  std::string what = "recv from device " + std::to_string(from);
  std::string bad = badPointToPoint(im.mesh, to, from, count);
  if (!bad.empty()) {
    error = what + ": " + bad;
    return failure();
  }
  std::unique_lock<std::mutex> lock(im.mailMutex);
  std::deque<Message> &box = im.mail[{from, to}];
  im.mailCv.wait(lock, [&] { return !box.empty() || im.aborted.load(); });
  if (box.empty()) {
    error = what + " was aborted: " + im.abortReason();
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

void LocalExchange::abort(const std::string &reason) {
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

void LocalExchange::reset() {
  {
    std::lock_guard<std::mutex> lock(impl_->reasonMutex);
    impl_->aborted.store(false);
    impl_->reason.clear();
  }
  // Messages of the aborted step are not for the next one.
  std::lock_guard<std::mutex> lock(impl_->mailMutex);
  impl_->mail.clear();
}

} // namespace mgc::backend
