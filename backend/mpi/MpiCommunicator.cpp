#include "backend/mpi/MpiCommunicator.h"

#include "backend/FaultInjection.h"
#include "backend/PeerPlan.h"
#include "backend/ProcessGroup.h"
#include "backend/cpu/HostMover.h"
#include "support/Deadline.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <ctime>
#include <thread>
#include <vector>

namespace mgc::backend::mpi {

std::string mpiErrorText(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, static_cast<size_t>(len));
}

namespace {

// MPI counts are ints: larger messages travel as pieces of this many bytes.
constexpr int64_t kMaxPiece = int64_t(1) << 30;

// When the process was last continued after a stop, in steady-clock
// nanoseconds (0: never).
std::atomic<int64_t> gContinuedAt{0};

void onContinue(int) {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now); // async-signal-safe
  gContinuedAt.store(int64_t(now.tv_sec) * 1000000000 + now.tv_nsec);
}

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t)
      .count();
}

} // namespace

void watchForContinue() {
  struct sigaction action {};
  action.sa_handler = onContinue;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGCONT, &action, nullptr);
}

std::string stalledNote(const WaitOutcome &w, double timeoutSeconds) {
  char text[256];
  if (w.longestGapSeconds >= 1 && w.longestGapSeconds >= 0.25 * timeoutSeconds)
    std::snprintf(text, sizeof text,
                  "; but this rank itself did not run for %.3g s of the wait "
                  "(stopped, or starved of CPU), so the ranks named may have "
                  "given up on it first",
                  w.longestGapSeconds);
  else if (w.continuedSecondsAgo >= 0)
    std::snprintf(text, sizeof text,
                  "; but this rank was stopped and continued %.3g s ago, so "
                  "the ranks named may have given up on it while it was "
                  "stopped",
                  w.continuedSecondsAgo);
  else
    return "";
  return text;
}

WaitOutcome waitRequests(std::vector<MPI_Request> &requests,
                         std::vector<MPI_Status> &statuses,
                         double timeoutSeconds,
                         const std::function<bool()> &aborted,
                         std::mutex *serialize) {
  using Clock = std::chrono::steady_clock;
  WaitOutcome out;
  size_t n = requests.size();
  statuses.resize(n);
  Clock::time_point started = Clock::now(), lastPoll = started;
  Clock::time_point deadline = deadlineAfter(timeoutSeconds);
  std::vector<int> indices(n);
  std::vector<MPI_Status> done(n);
  int idle = 0, sleepUs = 0;
  auto giveUp = [&](bool timedOut) {
    out.ok = false;
    out.timedOut = timedOut;
    int64_t continued = gContinuedAt.load();
    if (continued > 0) {
      Clock::time_point at{std::chrono::nanoseconds(continued)};
      if (std::chrono::duration<double>(started - at).count() <= timeoutSeconds)
        out.continuedSecondsAgo = secondsSince(at);
    }
    // The requests are left as they are: the job ends after a failed call
    // (Open MPI cannot cancel or free them reliably from several threads),
    // and the caller keeps their buffers alive (Exchange::abandon).
    for (size_t i = 0; i < n; ++i)
      if (requests[i] != MPI_REQUEST_NULL)
        out.pending.push_back(i);
    return out;
  };
  while (true) {
    int count = 0, rc;
    Clock::time_point now = Clock::now();
    out.longestGapSeconds =
        std::max(out.longestGapSeconds,
                 std::chrono::duration<double>(now - lastPoll).count());
    lastPoll = now;
    {
      MaybeLock lock(serialize);
      rc = MPI_Testsome(static_cast<int>(n), requests.data(), &count,
                        indices.data(), done.data());
    }
    if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) {
      out.mpiError = mpiErrorText(rc);
      return giveUp(false);
    }
    if (count == MPI_UNDEFINED)
      return out; // every request is done
    for (int i = 0; i < count; ++i) {
      statuses[indices[i]] = done[i];
      if (rc == MPI_ERR_IN_STATUS && done[i].MPI_ERROR != MPI_SUCCESS) {
        out.mpiError = mpiErrorText(done[i].MPI_ERROR);
        return giveUp(false);
      }
    }
    if (count > 0) {
      idle = sleepUs = 0;
      continue;
    }
    if (aborted && aborted())
      return giveUp(false);
    if (Clock::now() > deadline)
      return giveUp(true);
    // Progress happens inside MPI calls: poll often at first, then back off
    // so that waiting ranks leave the cores to the ones still computing.
    if (++idle < 64) {
      std::this_thread::yield();
    } else {
      sleepUs = std::min(200, std::max(16, sleepUs * 2));
      std::this_thread::sleep_for(std::chrono::microseconds(sleepUs));
    }
  }
}

namespace {

class MpiSet;

// The messages of one call: every send and receive is posted at once, then
// waited for together.
struct Exchange {
  struct Recv {
    int64_t peer;
    int64_t bytes;
  };
  std::vector<MPI_Request> requests;
  // Per request: the peer device and, for a receive, its expected bytes
  // (-1 for a send).
  std::vector<Recv> what;
  // Where the call receives the parts it reduces: the endpoint's buffer,
  // kept between calls (grown, never shrunk, not cleared).
  std::unique_ptr<std::byte[]> *scratch = nullptr;

  // After a failed wait the requests may still write into the scratch
  // buffer: it is handed over to live until the process ends (which it
  // does soon: a failed call ends the job), and the endpoint starts anew.
  void abandon() {
    if (scratch)
      (void)scratch->release();
  }
};

class Endpoint final : public GroupCallEndpoint {
public:
  Endpoint(MpiSet &set, int64_t device) : set_(set), device_(device) {}

  const ir::Mesh &mesh() const override;
  int64_t device() const override { return device_; }

  LogicalResult send(int64_t peer, const void *in, int64_t count,
                     ir::DType dtype, std::string &error) override;
  LogicalResult recv(int64_t peer, void *out, int64_t count, ir::DType dtype,
                     std::string &error) override;
  // Every message of the group posted at once, then waited for together.
  LogicalResult sendRecv(llvm::ArrayRef<PointToPoint> sends,
                         llvm::ArrayRef<PointToPoint> recvs,
                         std::string &error) override;

private:
  friend class MpiTransport;

  // Plans the call's messages (backend/PeerPlan.h) and runs them.
  LogicalResult call(llvm::StringRef axis, const GroupCall &call,
                     std::string &error) override;

  void postSend(Exchange &x, int64_t peer, const void *data, int64_t bytes);
  void postRecv(Exchange &x, int64_t peer, void *data, int64_t bytes);
  // Waits for the exchange; `what` names the call in an error.
  LogicalResult finish(Exchange &x, const std::string &what,
                       std::string &error);

  MpiSet &set_;
  int64_t device_;
  std::unique_ptr<std::byte[]> scratch_;
  size_t scratchBytes_ = 0;
};

class MpiSet final : public CommunicatorSet {
public:
  MpiSet(ir::Mesh mesh, const MpiSettings &settings, MPI_Comm comm,
         std::vector<int64_t> local)
      : mesh_(std::move(mesh)), settings_(settings), comm_(comm),
        local_(std::move(local)) {
    perRank_ = mesh_.numDevices() / settings_.size;
    for (int64_t d : local_)
      endpoints_.push_back(std::make_unique<Endpoint>(*this, d));
  }
  ~MpiSet() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized)
      return;
    MaybeLock lock(settings_.serialize);
    MPI_Comm_free(&comm_);
  }

  const ir::Mesh &mesh() const override { return mesh_; }
  llvm::ArrayRef<int64_t> localDevices() const override { return local_; }
  Communicator &endpoint(int64_t device) override {
    return *endpoints_[static_cast<size_t>(device - local_.front())];
  }
  void abort(const std::string &reason) override {
    std::lock_guard<std::mutex> lock(reasonMutex_);
    if (!aborted_.load())
      reason_ = reason;
    aborted_.store(true);
  }
  void reset() override {
    std::lock_guard<std::mutex> lock(reasonMutex_);
    aborted_.store(false);
    reason_.clear();
  }
  bool aborted() const { return aborted_.load(); }
  std::string abortReason() {
    std::lock_guard<std::mutex> lock(reasonMutex_);
    return reason_;
  }

  int rankOf(int64_t device) const {
    return static_cast<int>(device / perRank_);
  }
  int tag(int64_t from, int64_t to) const {
    return static_cast<int>(from * mesh_.numDevices() + to);
  }
  MPI_Comm comm() const { return comm_; }
  const MpiSettings &settings() const { return settings_; }

private:
  ir::Mesh mesh_;
  MpiSettings settings_;
  MPI_Comm comm_;
  std::vector<int64_t> local_;
  int64_t perRank_ = 1;
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
  std::atomic<bool> aborted_{false};
  std::mutex reasonMutex_;
  std::string reason_;
};

const ir::Mesh &Endpoint::mesh() const { return set_.mesh(); }

void Endpoint::postSend(Exchange &x, int64_t peer, const void *data,
                        int64_t bytes) {
  countSent(static_cast<uint64_t>(bytes));
  const auto *p = static_cast<const std::byte *>(data);
  MaybeLock lock(set_.settings().serialize);
  if (corruptNextMessage().exchange(false)) {
    // An injected fault (FaultInjection.h): a message one byte off.
    std::byte junk{0};
    MPI_Request r;
    MPI_Isend(bytes > 0 ? p : &junk, static_cast<int>(bytes > 0 ? 0 : 1),
              MPI_BYTE, set_.rankOf(peer), set_.tag(device_, peer), set_.comm(),
              &r);
    x.requests.push_back(r);
    x.what.push_back({peer, -1});
    return;
  }
  // Even an empty message is sent, so that every receive has its match.
  for (int64_t at = 0; at == 0 || at < bytes; at += kMaxPiece) {
    int piece = static_cast<int>(std::min(kMaxPiece, bytes - at));
    MPI_Request r;
    MPI_Isend(p + at, piece, MPI_BYTE, set_.rankOf(peer),
              set_.tag(device_, peer), set_.comm(), &r);
    x.requests.push_back(r);
    x.what.push_back({peer, -1});
  }
}

void Endpoint::postRecv(Exchange &x, int64_t peer, void *data, int64_t bytes) {
  auto *p = static_cast<std::byte *>(data);
  MaybeLock lock(set_.settings().serialize);
  for (int64_t at = 0; at == 0 || at < bytes; at += kMaxPiece) {
    int piece = static_cast<int>(std::min(kMaxPiece, bytes - at));
    MPI_Request r;
    MPI_Irecv(p + at, piece, MPI_BYTE, set_.rankOf(peer),
              set_.tag(peer, device_), set_.comm(), &r);
    x.requests.push_back(r);
    x.what.push_back({peer, piece});
  }
}

LogicalResult Endpoint::finish(Exchange &x, const std::string &what,
                               std::string &error) {
  std::vector<MPI_Status> statuses;
  const MpiSettings &s = set_.settings();
  WaitOutcome w = waitRequests(
      x.requests, statuses, s.timeoutSeconds, [this] { return set_.aborted(); },
      s.serialize);
  auto deviceStr = [&](int64_t d) {
    return "device " + std::to_string(d) + " (rank " +
           std::to_string(set_.rankOf(d)) + ")";
  };
  if (!w.ok) {
    x.abandon();
    if (!w.mpiError.empty()) {
      error = what + ": MPI failed: " + w.mpiError +
              " (the devices may disagree on the call)";
      return failure();
    }
    if (!w.timedOut) {
      error = what + " was aborted: " + set_.abortReason();
      return failure();
    }
    // The peers it still waited for: those whose messages never arrived,
    // else those that never took its messages.
    auto peersOf = [&](bool receives) {
      std::vector<int64_t> peers;
      for (size_t i : w.pending)
        if ((x.what[i].bytes >= 0) == receives &&
            std::find(peers.begin(), peers.end(), x.what[i].peer) ==
                peers.end())
          peers.push_back(x.what[i].peer);
      std::string list;
      for (int64_t d : peers)
        list += (list.empty() ? "" : ", ") + deviceStr(d);
      return list;
    };
    std::string from = peersOf(true), to = peersOf(false);
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", s.timeoutSeconds);
    error = what + " timed out after " + seconds + " s (--comm-timeout): " +
            (!from.empty() ? "nothing arrived from " + from
             : !to.empty() ? "its messages to " + to + " were never taken"
                           : std::string("its messages were never taken")) +
            stalledNote(w, s.timeoutSeconds);
    return failure();
  }
  for (size_t i = 0; i < x.requests.size(); ++i) {
    if (x.what[i].bytes < 0)
      continue;
    int got = 0;
    MPI_Get_count(&statuses[i], MPI_BYTE, &got);
    if (got != x.what[i].bytes) {
      error = what + ": " + deviceStr(x.what[i].peer) + " sent " +
              std::to_string(got) + " bytes where " +
              std::to_string(x.what[i].bytes) +
              " were expected: the devices disagree on the call";
      return failure();
    }
  }
  return success();
}

// The messages of one phase of a plan, between the devices of a group.
class MpiTransport final : public PeerTransport {
public:
  MpiTransport(Endpoint &endpoint, llvm::ArrayRef<int64_t> group,
               std::unique_ptr<std::byte[]> *scratch, std::string what)
      : endpoint_(endpoint), group_(group), scratch_(scratch),
        what_(std::move(what)) {}

  void send(size_t peer, const std::byte *data, int64_t bytes) override {
    endpoint_.postSend(x_, group_[peer], data, bytes);
  }
  void recv(size_t peer, std::byte *data, int64_t bytes) override {
    endpoint_.postRecv(x_, group_[peer], data, bytes);
  }
  LogicalResult finish(std::string &error) override {
    x_.scratch = scratch_;
    LogicalResult done = endpoint_.finish(x_, what_, error);
    x_ = Exchange();
    return done;
  }

private:
  Endpoint &endpoint_;
  llvm::ArrayRef<int64_t> group_;
  std::unique_ptr<std::byte[]> *scratch_;
  std::string what_;
  Exchange x_;
};

LogicalResult Endpoint::call(llvm::StringRef axis, const GroupCall &c,
                             std::string &error) {
  FailureOr<DeviceCall> placed =
      planDeviceCall(mesh(), device_, axis, c, error);
  if (placed.failed())
    return failure();
  const PeerPlan &plan = placed->plan;
  if (plan.scratchBytes > 0 &&
      (!scratch_ || static_cast<size_t>(plan.scratchBytes) > scratchBytes_)) {
    scratch_.reset(new std::byte[plan.scratchBytes]);
    scratchBytes_ = static_cast<size_t>(plan.scratchBytes);
  }
  std::vector<int64_t> group = mesh().group(device_, axis);
  MpiTransport transport(*this, group, &scratch_, placed->what);
  cpu::HostMover mover;
  return runPeerPlan(plan, c, scratch_.get(), transport, mover, error);
}

LogicalResult Endpoint::send(int64_t peer, const void *in, int64_t count,
                             ir::DType dtype, std::string &error) {
  std::string what = "send to device " + std::to_string(peer);
  std::string bad = badPointToPoint(mesh(), device_, peer, count);
  if (!bad.empty()) {
    error = what + ": " + bad;
    return failure();
  }
  Exchange x;
  postSend(x, peer, in, count * static_cast<int64_t>(ir::dtypeBytes(dtype)));
  return finish(x, what, error);
}

LogicalResult Endpoint::recv(int64_t peer, void *out, int64_t count,
                             ir::DType dtype, std::string &error) {
  std::string what = "recv from device " + std::to_string(peer);
  std::string bad = badPointToPoint(mesh(), device_, peer, count);
  if (!bad.empty()) {
    error = what + ": " + bad;
    return failure();
  }
  Exchange x;
  postRecv(x, peer, out, count * static_cast<int64_t>(ir::dtypeBytes(dtype)));
  return finish(x, what, error);
}

LogicalResult Endpoint::sendRecv(llvm::ArrayRef<PointToPoint> sends,
                                 llvm::ArrayRef<PointToPoint> recvs,
                                 std::string &error) {
  std::string what = "a group of " + std::to_string(sends.size()) +
                     " sends and " + std::to_string(recvs.size()) +
                     " receives";
  for (const auto *list : {&sends, &recvs})
    for (const PointToPoint &m : *list) {
      std::string bad = badPointToPoint(mesh(), device_, m.peer, m.count);
      if (!bad.empty()) {
        error = what + ": " + bad;
        return failure();
      }
    }
  Exchange x;
  for (const PointToPoint &m : sends)
    postSend(x, m.peer, m.data,
             m.count * static_cast<int64_t>(ir::dtypeBytes(m.dtype)));
  for (const PointToPoint &m : recvs)
    postRecv(x, m.peer, m.data,
             m.count * static_cast<int64_t>(ir::dtypeBytes(m.dtype)));
  return finish(x, what, error);
}

} // namespace

std::unique_ptr<CommunicatorSet> makeCommunicators(const ir::Mesh &mesh,
                                                   const MpiSettings &settings,
                                                   std::string &error) {
  std::vector<int64_t> local =
      devicesOfRank(mesh.numDevices(), settings.rank, settings.size, error);
  if (local.empty())
    return nullptr;
  int64_t n = mesh.numDevices();
  int *tagUpper = nullptr, flag = 0;
  MaybeLock lock(settings.serialize);
  MPI_Comm_get_attr(settings.world, MPI_TAG_UB, &tagUpper, &flag);
  if (flag && tagUpper && n * n - 1 > *tagUpper) {
    error = "the mesh has " + std::to_string(n) +
            " devices, more than this MPI's message tags can tell apart (" +
            std::to_string(*tagUpper) + ")";
    return nullptr;
  }
  MPI_Comm comm;
  int rc = MPI_Comm_dup(settings.world, &comm);
  if (rc != MPI_SUCCESS) {
    error = "MPI_Comm_dup failed: " + mpiErrorText(rc);
    return nullptr;
  }
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  return std::make_unique<MpiSet>(mesh, settings, comm, std::move(local));
}

} // namespace mgc::backend::mpi
