// What a launcher tells a process about the job it is part of, read from
// the variables it sets: Open MPI's mpirun (OMPI_COMM_WORLD_SIZE, _RANK,
// _LOCAL_RANK), Slurm's srun (SLURM_NTASKS, SLURM_PROCID, SLURM_LOCALID),
// MPICH's hydra (PMI_SIZE, PMI_RANK) and torchrun (WORLD_SIZE, RANK,
// LOCAL_RANK), in that order of precedence.
#pragma once

#include <optional>
#include <string>

namespace mgc::backend {

struct LaunchInfo {
  int size = 1, rank = 0, localRank = 0;
  // The launcher the variables came from: "mpirun", "srun", "hydra",
  // "torchrun".
  std::string launcher;
  // Whether the launcher starts MPI's processes (torchrun does not).
  bool mpi = true;
};

// The job as the environment describes it, or nullopt when no launcher's
// variables are set (a process on its own). A variable that is set but not
// a number in range sets `error` (naming it) and returns nullopt.
std::optional<LaunchInfo> detectLaunch(std::string &error);

} // namespace mgc::backend
