#include "backend/mpi/MpiWorld.h"

#include "backend/mpi/MpiCommunicator.h"

#include <climits>
#include <cstdlib>
#include <memory>
#include <mutex>

namespace mgc::backend::mpi {

namespace {

class World final : public ProcessGroup {
public:
  World(int rank, int size, bool serialize)
      : rank_(rank), size_(size), serialize_(serialize) {
    MPI_Comm_dup(MPI_COMM_WORLD, &host_);
    MPI_Comm_set_errhandler(host_, MPI_ERRORS_RETURN);
  }
  ~World() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) {
      MPI_Comm_free(&host_);
      MPI_Finalize();
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  LogicalResult allGather(const std::string &mine,
                          std::vector<std::string> &all,
                          std::string &error) override;

  CommunicatorFactory communicators() override {
    MpiSettings s;
    s.rank = rank_;
    s.size = size_;
    s.timeoutSeconds = timeout_;
    s.serialize = serialize_ ? &mutex_ : nullptr;
    return [s](const ir::Mesh &mesh, std::string &error) {
      return makeCommunicators(mesh, s, error);
    };
  }

  [[noreturn]] void abortJob(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

  void setTimeout(double seconds) { timeout_ = seconds; }

private:
  std::mutex *serializer() { return serialize_ ? &mutex_ : nullptr; }

  int rank_, size_;
  bool serialize_;
  std::mutex mutex_;
  MPI_Comm host_ = MPI_COMM_NULL;
  double timeout_ = 300;
};

LogicalResult World::allGather(const std::string &mine,
                               std::vector<std::string> &all,
                               std::string &error) {
  // Point-to-point rather than MPI_Allgatherv, so that a rank that never
  // arrives can be named: first every rank's size, then its bytes.
  all.assign(size_, std::string());
  all[rank_] = mine;
  std::vector<uint64_t> sizes(size_, 0);
  uint64_t mySize = mine.size();
  auto exchange = [&](const char *what, int tag, auto post) {
    std::vector<MPI_Request> requests;
    std::vector<int> from;
    {
      MaybeLock lock(serializer());
      for (int r = 0; r < size_; ++r)
        if (r != rank_)
          post(r, tag, requests, from);
    }
    std::vector<MPI_Status> statuses;
    WaitOutcome w =
        waitRequests(requests, statuses, timeout_, nullptr, serializer());
    if (w.ok)
      return success();
    std::string missing;
    for (size_t i : w.pending)
      if (from[i] >= 0 &&
          missing.find("rank " + std::to_string(from[i])) == std::string::npos)
        missing +=
            (missing.empty() ? "rank " : ", rank ") + std::to_string(from[i]);
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", timeout_);
    error = std::string(what) + " between the ranks " +
            (w.timedOut
                 ? "timed out after " + std::string(seconds) +
                       " s (--comm-timeout)" +
                       (missing.empty() ? ""
                                        : ": nothing arrived from " + missing) +
                       stalledNote(w, timeout_)
                 : "failed: " + w.mpiError);
    return failure();
  };
  // Sends are entered with from = -1, receives with their source rank.
  if (failed(exchange("an exchange of sizes", 1,
                      [&](int r, int tag, std::vector<MPI_Request> &reqs,
                          std::vector<int> &from) {
                        MPI_Request q;
                        MPI_Irecv(&sizes[r], 1, MPI_UINT64_T, r, tag, host_,
                                  &q);
                        reqs.push_back(q);
                        from.push_back(r);
                        MPI_Isend(&mySize, 1, MPI_UINT64_T, r, tag, host_, &q);
                        reqs.push_back(q);
                        from.push_back(-1);
                      })))
    return failure();
  for (int r = 0; r < size_; ++r)
    if (r != rank_) {
      if (sizes[r] > static_cast<uint64_t>(INT_MAX) ||
          mine.size() > static_cast<size_t>(INT_MAX)) {
        error = "a message of more than 2 GiB between the ranks is too large "
                "to exchange at once";
        return failure();
      }
      all[r].resize(sizes[r]);
    }
  return exchange("an exchange of tensors", 2,
                  [&](int r, int tag, std::vector<MPI_Request> &reqs,
                      std::vector<int> &from) {
                    MPI_Request q;
                    MPI_Irecv(all[r].data(), static_cast<int>(sizes[r]),
                              MPI_BYTE, r, tag, host_, &q);
                    reqs.push_back(q);
                    from.push_back(r);
                    MPI_Isend(mine.data(), static_cast<int>(mine.size()),
                              MPI_BYTE, r, tag, host_, &q);
                    reqs.push_back(q);
                    from.push_back(-1);
                  });
}

std::unique_ptr<World> &instance() {
  static std::unique_ptr<World> world;
  return world;
}

} // namespace

ProcessGroup *world(std::string &error) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<World> &w = instance();
  if (w)
    return w.get();
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = MPI_THREAD_SINGLE;
  if (!initialized) {
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) {
      error = "MPI could not be initialised: " + mpiErrorText(rc);
      return nullptr;
    }
  } else {
    MPI_Query_thread(&provided);
  }
  // A rank that was stopped and continued says so when it times out.
  watchForContinue();
  if (provided < MPI_THREAD_SERIALIZED) {
    error = "this MPI gives only thread level " + std::to_string(provided) +
            "; mgc's devices need at least MPI_THREAD_SERIALIZED";
    return nullptr;
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  w = std::make_unique<World>(rank, size, provided < MPI_THREAD_MULTIPLE);
  return w.get();
}

ProcessGroup *existingWorld() { return instance().get(); }

void setCommTimeout(double seconds) {
  if (instance())
    instance()->setTimeout(seconds);
}

} // namespace mgc::backend::mpi
