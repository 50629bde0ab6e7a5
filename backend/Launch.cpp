#include "backend/Launch.h"

#include "llvm/ADT/StringRef.h"

#include <cstdlib>

namespace mgc::backend {

namespace {

struct Variables {
  const char *launcher, *size, *rank, *localRank;
  bool mpi;
};

constexpr Variables kLaunchers[] = {
    {"mpirun", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
     "OMPI_COMM_WORLD_LOCAL_RANK", true},
    {"srun", "SLURM_NTASKS", "SLURM_PROCID", "SLURM_LOCALID", true},
    {"hydra", "PMI_SIZE", "PMI_RANK", nullptr, true},
    {"torchrun", "WORLD_SIZE", "RANK", "LOCAL_RANK", false},
};

// The integer value of variable `name`, `fallback` when unset; nullopt
// (with `error`) when it is not an integer in [lo, hi].
std::optional<int> readInt(const char *name, int fallback, int lo, int hi,
                           std::string &error) {
  const char *v = name ? std::getenv(name) : nullptr;
  if (!v)
    return fallback;
  long long x = 0;
  if (llvm::StringRef(v).trim().getAsInteger(10, x) || x < lo || x > hi) {
    error = "the launcher's variable " + std::string(name) + "='" + v +
            "' is not an integer in [" + std::to_string(lo) + ", " +
            std::to_string(hi) + "]";
    return std::nullopt;
  }
  return static_cast<int>(x);
}

} // namespace

std::optional<LaunchInfo> detectLaunch(std::string &error) {
  for (const Variables &l : kLaunchers) {
    if (!std::getenv(l.size))
      continue;
    LaunchInfo info;
    info.launcher = l.launcher;
    info.mpi = l.mpi;
    auto size = readInt(l.size, 1, 1, 1 << 20, error);
    if (!size)
      return std::nullopt;
    auto rank = readInt(l.rank, 0, 0, *size - 1, error);
    if (!rank)
      return std::nullopt;
    auto local = readInt(l.localRank, 0, 0, *size - 1, error);
    if (!local)
      return std::nullopt;
    info.size = *size;
    info.rank = *rank;
    info.localRank = *local;
    return info;
  }
  return std::nullopt;
}

} // namespace mgc::backend
