// The MPI communicator's all-reduce (a reduce-scatter that adds the parts in
// coordinate order, then an all-gather: bit-identical to the in-process
// mesh) against MPI_Allreduce, for f32 buffers of 1, 25 and 100 MiB; median
// of the repetitions. Run under mpirun:
//   mpirun -np 2 build/bench/mpi_allreduce [REPEATS]
#include "backend/mpi/MpiCommunicator.h"
#include "backend/mpi/MpiWorld.h"
#include "ir/Sharding.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

using namespace mgc;

int main(int argc, char **argv) {
  int repeats = argc > 1 ? std::atoi(argv[1]) : 10;
  std::string error;
  backend::ProcessGroup *world = backend::mpi::world(error);
  if (!world) {
    std::fprintf(stderr, "mpi_allreduce: %s\n", error.c_str());
    return 1;
  }
  int n = world->size();
  auto mesh = ir::Mesh::parse("dp=" + std::to_string(n), error);
  backend::mpi::MpiSettings settings;
  settings.rank = world->rank();
  settings.size = n;
  auto set = backend::mpi::makeCommunicators(*mesh, settings, error);
  if (!set) {
    std::fprintf(stderr, "mpi_allreduce: %s\n", error.c_str());
    return 1;
  }
  backend::Communicator &comm = set->endpoint(world->rank());
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  if (world->rank() == 0)
    std::printf("%d processes, f32 sums, median of %d\n"
                "   size   mgc rs+ag (ms, GB/s bus)   MPI_Allreduce (ms, GB/s "
                "bus)\n",
                n, repeats);
  for (int mib : {1, 25, 100}) {
    int64_t count = int64_t(mib) * 1048576 / 4;
    std::vector<float> in(count, 1.0f + world->rank()), out(count);
    std::vector<double> ours, theirs;
    for (int r = 0; r < repeats + 1; ++r) {
      MPI_Barrier(MPI_COMM_WORLD);
      auto t0 = std::chrono::steady_clock::now();
      if (failed(comm.allReduce("dp", in.data(), out.data(), count,
                                ir::DType::F32, error))) {
        std::fprintf(stderr, "mpi_allreduce: %s\n", error.c_str());
        return 1;
      }
      auto t1 = std::chrono::steady_clock::now();
      MPI_Barrier(MPI_COMM_WORLD);
      auto t2 = std::chrono::steady_clock::now();
      MPI_Allreduce(in.data(), out.data(), static_cast<int>(count), MPI_FLOAT,
                    MPI_SUM, MPI_COMM_WORLD);
      auto t3 = std::chrono::steady_clock::now();
      if (r == 0)
        continue; // warm-up
      ours.push_back(std::chrono::duration<double>(t1 - t0).count());
      theirs.push_back(std::chrono::duration<double>(t3 - t2).count());
    }
    // Bus bandwidth as NCCL's tests define it: 2 (n-1)/n bytes per second.
    double bus = 2.0 * (n - 1) / n * count * 4;
    double a = median(ours), b = median(theirs);
    if (world->rank() == 0)
      std::printf("%4d MiB   %8.2f ms %6.2f          %8.2f ms %6.2f\n", mib,
                  a * 1e3, bus / a / 1e9, b * 1e3, bus / b / 1e9);
  }
  return 0;
}
