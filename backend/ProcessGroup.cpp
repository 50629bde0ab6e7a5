#include "backend/ProcessGroup.h"

namespace mgc::backend {

std::vector<int64_t> devicesOfRank(int64_t devices, int rank, int size,
                                   std::string &error) {
  if (size <= 0 || devices % size != 0) {
    error = "the mesh has " + std::to_string(devices) +
            " devices and the job " + std::to_string(size) +
            " processes: the process count must equal the mesh size or "
            "divide it (several devices per process)";
    return {};
  }
  int64_t k = devices / size;
  std::vector<int64_t> out;
  for (int64_t d = rank * k; d < (rank + 1) * k; ++d)
    out.push_back(d);
  return out;
}

} // namespace mgc::backend
