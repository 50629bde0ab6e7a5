// A description of the devices a job runs on, for the planner: per device
// its name, compute rate, memory and memory bandwidth; per link between two
// devices its bandwidth and latency. Read from JSON (mgc's --cluster
// FILE.json; samples/clusters/ has a uniform 8-GPU node and a mixed one):
//
//   {"devices": [{"name": "h100-0", "tflops": 400, "memory_gib": 80,
//                 "bandwidth_gbs": 3350}, ...],
//    "links": [{"from": 0, "to": 1, "gbps": 450, "latency_us": 3}, ...]}
//
// A link not listed takes "default_link" ({"gbps": ..., "latency_us": ...}),
// required when some pair has no link of its own.
#pragma once

#include "support/Result.h"

#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>
#include <vector>

namespace mgc::passes {

struct ClusterDevice {
  std::string name;
  double flopsPerSecond = 0; // tflops * 1e12
  double memoryBytes = 0;
  double bytesPerSecond = 0; // memory bandwidth
};

struct ClusterLink {
  double bytesPerSecond = 0;
  double latencySeconds = 0;
};

class Cluster {
public:
  const std::vector<ClusterDevice> &devices() const { return devices_; }
  // The link from device a to device b (a != b).
  const ClusterLink &link(size_t a, size_t b) const {
    return links_[a * devices_.size() + b];
  }

  // Parses `text` (named `file` in errors); null with `error` set to
  // "FILE: devices[2]: 'tflops' must be a number > 0, got ...".
  static std::optional<Cluster> parse(llvm::StringRef file,
                                      llvm::StringRef text, std::string &error);
  // Reads and parses a file.
  static std::optional<Cluster> read(llvm::StringRef path, std::string &error);

private:
  std::vector<ClusterDevice> devices_;
  std::vector<ClusterLink> links_; // n * n, the diagonal unused
};

} // namespace mgc::passes
