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

  double timeout_ = 300;

private:
  std::mutex *serializer() { return serialize_ ? &mutex_ : nullptr; }

  int rank_, size_;
  bool serialize_;
  std::mutex mutex_;
  MPI_Comm host_ = MPI_COMM_NULL;
};

LogicalResult World::allGather(const std::string &mine,
                               std::vector<std::string> &all,
                               std::string &error) {
  if (mine.size() > static_cast<size_t>(INT_MAX)) {
    error = "a message of " + std::to_string(mine.size()) +
            " bytes is too large to exchange (at most 2 GiB per rank)";
    return failure();
  }
  auto wait = [&](MPI_Request r, const char *what) {
    std::vector<MPI_Request> requests{r};
    std::vector<MPI_Status> statuses;
    WaitOutcome w =
        waitRequests(requests, statuses, timeout_, nullptr, serializer());
    if (w.ok)
      return success();
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", timeout_);
    error = std::string(what) +
            (w.timedOut ? " between the ranks timed out after " +
                              std::string(seconds) + " s (--comm-timeout)"
                        : " between the ranks failed: " + w.mpiError);
    return failure();
  };
  int size = static_cast<int>(mine.size());
  std::vector<int> sizes(size_);
  MPI_Request r;
  {
    MaybeLock lock(serializer());
    MPI_Iallgather(&size, 1, MPI_INT, sizes.data(), 1, MPI_INT, host_, &r);
  }
  if (failed(wait(r, "an exchange of sizes")))
    return failure();
  std::vector<int> offsets(size_);
  long long total = 0;
  for (int i = 0; i < size_; ++i) {
    if (total + sizes[i] > INT_MAX) {
      error = "the ranks' messages add up to more than 2 GiB, too large to "
              "exchange at once";
      return failure();
    }
    offsets[i] = static_cast<int>(total);
    total += sizes[i];
  }
  std::string buffer(static_cast<size_t>(total), '\0');
  {
    MaybeLock lock(serializer());
    MPI_Iallgatherv(mine.data(), size, MPI_BYTE, buffer.data(), sizes.data(),
                    offsets.data(), MPI_BYTE, host_, &r);
  }
  if (failed(wait(r, "an exchange of tensors")))
    return failure();
  all.clear();
  for (int i = 0; i < size_; ++i)
    all.push_back(buffer.substr(offsets[i], sizes[i]));
  return success();
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
    instance()->timeout_ = seconds;
}

} // namespace mgc::backend::mpi
