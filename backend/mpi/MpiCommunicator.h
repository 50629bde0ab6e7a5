// The communicator of a mesh whose devices are spread over MPI processes
// (every device of the mesh is an endpoint on the rank that runs it; a rank
// may run several). Each collective is the point-to-point plan of
// backend/PeerPlan.h, so its sums are taken exactly as the in-process
// communicator takes them: a run on N processes is bit-identical to the
// same mesh in one process.
//
// Messages between two devices carry the tag (sender * N + receiver) on a
// communicator of their own (a duplicate of the world for each set), so the
// k-th message from one device to another meets the k-th receive there:
// every device issues the same communication ops in the same order.
// Every wait polls its requests, so that it can give up at the timeout
// (naming the peers that never sent) or when the set is aborted.
#pragma once

#include "backend/Communicator.h"

#include <mpi.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace mgc::backend::mpi {

// The text of an MPI error code.
std::string mpiErrorText(int code);

// Holds `m` for its scope, when there is one (MpiSettings::serialize).
class MaybeLock {
public:
  explicit MaybeLock(std::mutex *m) {
    if (m)
      lock_ = std::unique_lock<std::mutex>(*m);
  }

private:
  std::unique_lock<std::mutex> lock_;
};

struct MpiSettings {
  MPI_Comm world = MPI_COMM_WORLD;
  int rank = 0, size = 1;
  // Seconds a call waits for its peers.
  double timeoutSeconds = 300;
  // Serialises MPI calls when MPI gives less than MPI_THREAD_MULTIPLE.
  std::mutex *serialize = nullptr;
};

// The endpoints of this rank's devices of `mesh`; null (with `error`) when
// the ranks cannot share the mesh. Collective over the world: every rank
// makes its set in the same order.
std::unique_ptr<CommunicatorSet> makeCommunicators(const ir::Mesh &mesh,
                                                   const MpiSettings &settings,
                                                   std::string &error);

// Waits for `requests` (the ones that are MPI_REQUEST_NULL count as done)
// until they complete, `deadline` passes, or `aborted()` says so; polls
// with a short back-off. Returns the indices that had not completed (empty
// on success). `serialize` as in MpiSettings.
struct WaitOutcome {
  bool ok = true;
  bool timedOut = false;
  std::vector<size_t> pending;
  std::string mpiError; // an MPI error code's text, if one was returned
  // Whether this rank itself ran: the longest time between two polls (a
  // process stopped, or starved of CPU, does not poll), and the seconds
  // since the process was continued after a stop (SIGCONT) when that
  // happened during the wait or within a timeout before it, else -1.
  double longestGapSeconds = 0;
  double continuedSecondsAgo = -1;
};
WaitOutcome waitRequests(std::vector<MPI_Request> &requests,
                         std::vector<MPI_Status> &statuses,
                         double timeoutSeconds,
                         const std::function<bool()> &aborted,
                         std::mutex *serialize);

// For a wait that timed out: when this rank itself did not run for a good
// part of it, or was stopped and continued, a note saying so (its peers
// may have given up on it first, so the ranks it names may be healthy),
// starting "; "; else "".
std::string stalledNote(const WaitOutcome &w, double timeoutSeconds);

// Records when the process is continued after a stop (SIGCONT), for
// WaitOutcome::continuedSecondsAgo. Called once when MPI starts.
void watchForContinue();

} // namespace mgc::backend::mpi
