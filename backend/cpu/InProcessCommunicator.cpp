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

#include "backend/cpu/Elem.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstring>
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

// The accumulator of sums: f32, f64 in their own type, bf16 and f16 in f32
// (rounded once at the end), integers wrapping in unsigned arithmetic.
template <typename S> struct SumOf {
  using A = ComputeOf<S>;
  static A load(S v) { return Elem<S>::load(v); }
  static S store(A v) { return Elem<S>::store(v); }
};
template <> struct SumOf<int32_t> {
  using A = uint32_t;
  static A load(int32_t v) { return static_cast<uint32_t>(v); }
  static int32_t store(A v) { return static_cast<int32_t>(v); }
};
template <> struct SumOf<int64_t> {
  using A = uint64_t;
  static A load(int64_t v) { return static_cast<uint64_t>(v); }
  static int64_t store(A v) { return static_cast<int64_t>(v); }
};

// dst[i] = sum over j (in order) of srcs[j][i], for i in [0, n).
template <typename S>
void sumInto(llvm::ArrayRef<const std::byte *> srcs, std::byte *dst,
             int64_t n) {
  using Sum = SumOf<S>;
  S *d = reinterpret_cast<S *>(dst);
  for (int64_t i = 0; i < n; ++i) {
    typename Sum::A acc = Sum::load(reinterpret_cast<const S *>(srcs[0])[i]);
    for (size_t j = 1; j < srcs.size(); ++j)
      acc += Sum::load(reinterpret_cast<const S *>(srcs[j])[i]);
    d[i] = Sum::store(acc);
  }
}

void sumIntoDType(ir::DType dtype, llvm::ArrayRef<const std::byte *> srcs,
                  std::byte *dst, int64_t n) {
  visitDType(dtype, [&]<typename S>() { sumInto<S>(srcs, dst, n); });
}

// dst[i] = the maximum over j (in order) of srcs[j][i]: the first NaN, else
// the first of the largest values, copied bit for bit.
template <typename S>
void maxInto(llvm::ArrayRef<const std::byte *> srcs, std::byte *dst,
             int64_t n) {
  S *d = reinterpret_cast<S *>(dst);
  for (int64_t i = 0; i < n; ++i) {
    S best = reinterpret_cast<const S *>(srcs[0])[i];
    if constexpr (kIsInt<S>) {
      for (size_t j = 1; j < srcs.size(); ++j)
        best = std::max(best, reinterpret_cast<const S *>(srcs[j])[i]);
    } else {
      double b = Elem<S>::load(best);
      for (size_t j = 1; j < srcs.size() && !std::isnan(b); ++j) {
        S v = reinterpret_cast<const S *>(srcs[j])[i];
        double x = Elem<S>::load(v);
        if (x > b || std::isnan(x)) {
          best = v;
          b = x;
        }
      }
    }
    d[i] = best;
  }
}

void maxIntoDType(ir::DType dtype, llvm::ArrayRef<const std::byte *> srcs,
                  std::byte *dst, int64_t n) {
  visitDType(dtype, [&]<typename S>() { maxInto<S>(srcs, dst, n); });
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

} // namespace

struct InProcessMesh::Impl {
  class Endpoint;

  explicit Impl(ir::Mesh m);

  ir::Mesh mesh;
  std::vector<std::unique_ptr<Rendezvous>> rendezvous;
  // groups[device][axis]: the rendezvous of the device's group on the axis.
  std::vector<std::vector<Rendezvous *>> groups;
  std::vector<std::unique_ptr<Endpoint>> endpoints;

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

  LogicalResult collective(int64_t device, llvm::StringRef axis,
                           const Call &call, std::string &error);
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
      sumIntoDType(mine.dtype, srcs, first, hi - lo);
    else
      maxIntoDType(mine.dtype, srcs, first, hi - lo);
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
    sumIntoDType(mine.dtype, srcs, mine.out, count);
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

private:
  LogicalResult run(llvm::StringRef axis, Call &c, const void *in, void *out,
                    ir::DType dtype, std::string &error) {
    c.dtype = dtype;
    c.in = static_cast<const std::byte *>(in);
    c.out = static_cast<std::byte *>(out);
    return impl_.collective(device_, axis, c, error);
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
  for (int64_t d = 0; d < devices; ++d)
    endpoints.push_back(std::make_unique<Endpoint>(*this, d));
}

LogicalResult InProcessMesh::Impl::collective(int64_t device,
                                              llvm::StringRef axis,
                                              const Call &call,
                                              std::string &error) {
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
  return success();
}

InProcessMesh::InProcessMesh(ir::Mesh mesh)
    : impl_(std::make_unique<Impl>(std::move(mesh))) {}

InProcessMesh::~InProcessMesh() = default;

const ir::Mesh &InProcessMesh::mesh() const { return impl_->mesh; }

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
}

void InProcessMesh::reset() {
  std::lock_guard<std::mutex> lock(impl_->reasonMutex);
  impl_->aborted.store(false);
  impl_->reason.clear();
}

} // namespace mgc::backend::cpu
