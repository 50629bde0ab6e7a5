// Sessions in a job of several processes: which process group a session
// joins (SessionOptions::processes and the launcher's variables), and the
// start-up check that every rank compiled the same plan.
#include "runtime/session/Guarded.h"
#include "runtime/session/Pipeline.h"
#include "runtime/session/SessionImpl.h"

#include "backend/FaultInjection.h"
#include "backend/Launch.h"
#include "ir/Printer.h"
#include "runtime/Checkpoint.h"

#include <chrono>
#include <cstdlib>
#include <thread>
#include <unistd.h>
#if MGC_HAVE_MPI
#include "backend/mpi/MpiWorld.h"
#endif

namespace mgc::session {

FailureOr<backend::ProcessGroup *> jobProcesses(const SessionOptions &options,
                                                DiagnosticEngine &diag) {
  if (options.processes == "one")
    return static_cast<backend::ProcessGroup *>(nullptr);
  if (options.processes != "auto") {
    diag.error("unknown processes '" + options.processes +
               "': expected auto or one");
    return failure();
  }
  if (!(options.commTimeout > 0)) {
    diag.error("the communication timeout must be a number of seconds > 0, "
               "got " +
               std::to_string(options.commTimeout));
    return failure();
  }
  std::string error;
  std::optional<backend::LaunchInfo> launch = backend::detectLaunch(error);
  if (!error.empty()) {
    diag.error(error);
    return failure();
  }
  if (!launch || launch->size <= 1)
    return static_cast<backend::ProcessGroup *>(nullptr);
  std::string job = "this process is rank " + std::to_string(launch->rank) +
                    " of " + std::to_string(launch->size) + " (" +
                    launch->launcher + ")";
  if (options.mesh.empty()) {
    diag.error(job + " but no mesh was given: give a mesh (--mesh, "
                     "--devices) whose device count the process count "
                     "equals or divides, or launch one process");
    return failure();
  }
  if (!launch->mpi) {
    diag.error(job + ": mgc's processes talk over MPI; launch them with "
                     "mpirun or srun");
    return failure();
  }
#if MGC_HAVE_MPI
  backend::ProcessGroup *world = backend::mpi::world(error);
  if (!world) {
    diag.error(job + ": " + error);
    return failure();
  }
  if (world->size() != launch->size || world->rank() != launch->rank) {
    diag.error(job + " but MPI sees rank " + std::to_string(world->rank()) +
               " of " + std::to_string(world->size()) +
               ": the launcher and this mgc's MPI disagree (launch with the "
               "mpirun of the MPI mgc was built with)");
    return failure();
  }
  backend::mpi::setCommTimeout(options.commTimeout);
  return world;
#else
  diag.error(job + " but this build of mgc has no MPI (install "
                   "libopenmpi-dev and configure again)");
  return failure();
#endif
}

namespace {

// What every rank must agree on, by the name a user knows each by, in the
// order a difference is reported: the caller's settings, the train.* ones
// (--steps before the train.steps it sets, both before the step graph they
// change), the flags the sharded model leaves out, and last the sharded
// model's hash (the model file, -D, the mesh: "plan").
std::vector<std::pair<std::string, std::string>>
planSettings(const MeshStep &s, const SessionOptions &options) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto &[name, value] : options.sameOnEveryRank)
    out.push_back({name, value});
  for (const auto &[name, value] : s.sharded->attrs().entries())
    if (llvm::StringRef(name).startswith("train."))
      out.push_back({name, ir::formatAttrValue(value)});
  out.push_back({"--accumulate", std::to_string(s.accumulate)});
  out.push_back({"--seed", std::to_string(options.seed)});
  out.push_back({"--backend", options.backend});
  if (const PipelinePart *p = s.pipeline.get()) {
    out.push_back(
        {"--pipeline-schedule", passes::scheduleName(p->schedule.kind)});
    out.push_back({"--virtual-stages", std::to_string(p->schedule.chunks)});
    std::string stages;
    for (size_t v = 0; v < p->first.size(); ++v)
      stages += (v ? "," : "") + std::to_string(p->first[v]);
    out.push_back({"--stages (the first layer of each stage)", stages});
  }
  out.push_back({"plan", modelHash(*s.sharded)});
  return out;
}

} // namespace

LogicalResult checkSamePlan(const MeshStep &s, backend::ProcessGroup *processes,
                            const SessionOptions &options,
                            DiagnosticEngine &diag) {
  if (!processes || processes->size() <= 1)
    return success();
  // One line per setting, "name\tvalue": the values hold no newline.
  auto settings = planSettings(s, options);
  std::string mine;
  for (const auto &[name, value] : settings)
    mine += name + "\t" + value + "\n";
  std::vector<std::string> all;
  std::string error;
  if (failed(processes->allGather(mine, all, error))) {
    diag.error("comparing the ranks' plans: " + error);
    return failure();
  }
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r] == all[0])
      continue;
    llvm::SmallVector<llvm::StringRef> first, theirs;
    llvm::StringRef(all[0]).split(first, '\n');
    llvm::StringRef(all[r]).split(theirs, '\n');
    for (size_t i = 0; i < std::max(first.size(), theirs.size()); ++i) {
      auto [name0, value0] =
          i < first.size() ? first[i].split('\t')
                           : std::pair<llvm::StringRef, llvm::StringRef>();
      auto [nameR, valueR] =
          i < theirs.size() ? theirs[i].split('\t')
                            : std::pair<llvm::StringRef, llvm::StringRef>();
      if (name0 == nameR && value0 == valueR)
        continue;
      if (name0 != nameR || name0 == "plan") {
        diag.error("rank " + std::to_string(r) +
                   " compiled another plan than rank 0 (plan hash " +
                   valueR.substr(0, 12).str() + "... against " +
                   value0.substr(0, 12).str() +
                   "...): every rank must be given the same model file, -D, "
                   "mesh, flags and seed");
        return failure();
      }
      diag.error("rank " + std::to_string(r) + " was given " + nameR.str() +
                 " '" + valueR.str() + "' but rank 0 '" + value0.str() +
                 "': every rank must be given the same model file, -D, "
                 "mesh, flags, seed and data");
      return failure();
    }
  }
  return success();
}

LogicalResult injectFault(const Session::Impl &impl, int64_t step,
                          DiagnosticEngine &diag) {
  if (!impl.processes)
    return success();
  std::string error;
  static const std::optional<backend::Fault> fault =
      backend::faultFromEnvironment(error);
  if (!error.empty()) {
    diag.error(error);
    return failure();
  }
  if (!fault || fault->rank != impl.processes->rank() || fault->step != step)
    return success();
  switch (fault->kind) {
  case backend::Fault::Kind::Hang:
    while (true)
      std::this_thread::sleep_for(std::chrono::seconds(1));
  case backend::Fault::Kind::Exit:
    _exit(3);
  case backend::Fault::Kind::Corrupt:
    backend::corruptNextMessage().store(true);
    break;
  }
  return success();
}

} // namespace mgc::session

namespace mgc {

int Session::rank() const {
  return impl_->processes ? impl_->processes->rank() : 0;
}

int Session::processCount() const {
  return impl_->processes ? impl_->processes->size() : 1;
}

std::string Session::meshText() const { return impl_->meshText; }

std::vector<std::string> Session::warnings() const { return impl_->warnings; }

std::pair<int64_t, int64_t> Session::inputRows(const std::string &name) const {
  const ir::Value *v =
      session::findArgument(*impl_, name, ir::ValueKind::Input);
  int64_t rows = v && v->type().rank() > 0 ? v->type().shape[0] : 0;
  if (!impl_->meshRunner || !impl_->processes)
    return {0, rows};
  return impl_->meshRunner->inputRows(name);
}

Result<bool> Session::anyRank(bool flag) const {
  return session::guarded("agreeing across processes", [&]() -> Result<bool> {
    if (!impl_->processes || impl_->processes->size() <= 1)
      return flag;
    std::vector<std::string> all;
    std::string error;
    if (failed(impl_->processes->allGather(flag ? "1" : "0", all, error)))
      return Status::error("error: " + error);
    for (const std::string &f : all)
      if (f == "1")
        return true;
    return false;
  });
}

void Session::abortJob(int exitCode) {
#if MGC_HAVE_MPI
  if (backend::ProcessGroup *world = backend::mpi::existingWorld())
    if (world->size() > 1)
      world->abortJob(exitCode);
#endif
  std::exit(exitCode);
}

} // namespace mgc
