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

#include "ir/Sharding.h"
#include "support/Result.h"

#include "llvm/ADT/StringRef.h"

#include <functional>
#include <map>
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
  // The link from device a to device b (a != b): the one listed, else the
  // default link.
  ClusterLink link(size_t a, size_t b) const;

  // Parses `text` (named `file` in errors); null with `error` set to
  // "FILE: devices[2]: 'tflops' must be a number > 0, got ...".
  static std::optional<Cluster> parse(llvm::StringRef file,
                                      llvm::StringRef text, std::string &error);
  // Reads and parses a file.
  static std::optional<Cluster> read(llvm::StringRef path, std::string &error);

private:
  std::vector<ClusterDevice> devices_;
  // Only the links the file lists (by (from, to), both ways unless the
  // other way is listed too), and the default: a cluster of thousands of
  // devices lists few of its millions of pairs.
  std::map<std::pair<size_t, size_t>, ClusterLink> links_;
  std::optional<ClusterLink> defaultLink_;
};

// "" when `cluster` has one device per device of `mesh`, else why not
// ("8 devices for the mesh dp=4 of 4: expected one per device").
std::string clusterMismatch(const Cluster &cluster, const ir::Mesh &mesh);

// The weights of dp axis `axis` reduced to the rows of a batch of `batch`
// they give each coordinate, divided by their greatest common divisor
// ([49, 10] on 8 rows: [7, 1]); the weights as they are when a coordinate
// would get no row, or without weights.
std::vector<int64_t> rowWeights(const ir::MeshAxis &axis, int64_t batch);

// `mesh` (without pp) with its dp shares of the batch weighted for
// `cluster`'s devices (one per device of the mesh, in mesh order): each dp
// coordinate's weight is in inverse proportion to seconds(device) of the
// slowest of its devices (the time it takes for an equal share of the
// work), as integers (the slowest coordinate 10, reduced by their
// greatest common divisor; none when all are equal). With a `batch` (the
// rows the dp axis splits, > 0) the weights are then the rows each
// coordinate gets: finer weights than the batch can follow change no
// row, but would ask the partitioner to balance other dimensions by them
// (splitting activations and gathering weight gradients), a plan that
// moves more bytes than the plain one. Null with `error` when the cluster
// has another number of devices, or the mesh has no dp axis or dp weights
// already.
std::optional<ir::Mesh>
weightDataAxis(const ir::Mesh &mesh, const Cluster &cluster,
               const std::function<double(const ClusterDevice &)> &seconds,
               std::string &error, int64_t batch = 0);

} // namespace mgc::passes
