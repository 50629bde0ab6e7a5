// The placement algebra: a device mesh with named axes (dp=2,tp=2), and on
// each axis a tensor is split along one dimension (S0, S1, ...), replicated
// (R) or held as partial results: partial sums (P: the value is the sum over
// the axis group) or partial maxima (Pmax: the value is the maximum over the
// group, as a maximum over a split dimension leaves it).
// Data, tensor and ZeRO parallelism are all placements of the same logical
// tensors; moving between placements is the only source of communication
// (passes/Reshard.h). Text forms: mesh "dp=2,tp=2" (weights "dp=2[3,1]");
// sharding "{dp=S0, tp=R}", "{tp=Pmax}".
#pragma once

#include "ir/Types.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mgc::ir {

enum class PlacementKind : uint8_t { Replicate, Split, Partial };

// How the partial values of the devices of an axis group make the value.
enum class Reduction : uint8_t { Sum, Max };

struct Placement {
  PlacementKind kind = PlacementKind::Replicate;
  int64_t dim = 0;                   // Split only: the logical dimension split
  Reduction reduce = Reduction::Sum; // Partial only

  static Placement replicate() { return {}; }
  static Placement split(int64_t dim) { return {PlacementKind::Split, dim}; }
  static Placement partial() { return {PlacementKind::Partial, 0}; }
  static Placement partialMax() {
    return {PlacementKind::Partial, 0, Reduction::Max};
  }
  bool isReplicate() const { return kind == PlacementKind::Replicate; }
  bool isSplit() const { return kind == PlacementKind::Split; }
  // Partial sums or partial maxima.
  bool isPartial() const { return kind == PlacementKind::Partial; }
  bool isPartialSum() const { return isPartial() && reduce == Reduction::Sum; }
  bool isPartialMax() const { return isPartial() && reduce == Reduction::Max; }

  std::string str() const; // "R", "S0", "P", "Pmax"
  // "R", "S<digits>", "P", "Pmax"; nullopt otherwise.
  static std::optional<Placement> parse(llvm::StringRef text);

  friend bool operator==(const Placement &a, const Placement &b) {
    if (a.kind != b.kind)
      return false;
    if (a.kind == PlacementKind::Split)
      return a.dim == b.dim;
    if (a.kind == PlacementKind::Partial)
      return a.reduce == b.reduce;
    return true;
  }
  friend bool operator!=(const Placement &a, const Placement &b) {
    return !(a == b);
  }
};

// The placement of one value on some mesh axes, by axis name. An axis not
// listed is not decided yet (before propagation) or, on a value of a
// partitioned module, replicated.
class Sharding {
public:
  struct Entry {
    std::string axis;
    Placement placement;
    friend bool operator==(const Entry &a, const Entry &b) {
      return a.axis == b.axis && a.placement == b.placement;
    }
  };

  Sharding() = default;
  Sharding(std::initializer_list<Entry> entries) {
    for (const Entry &e : entries)
      set(e.axis, e.placement);
  }

  bool empty() const { return entries_.empty(); }
  llvm::ArrayRef<Entry> entries() const { return entries_; }
  const Placement *find(llvm::StringRef axis) const;
  // The placement on `axis`; R when the axis is not listed.
  Placement get(llvm::StringRef axis) const;
  // Sets or replaces; new axes are appended (callers that know the mesh
  // append in mesh order, so printing follows the mesh).
  void set(llvm::StringRef axis, Placement placement);
  bool erase(llvm::StringRef axis);
  // The axis that splits logical dimension `dim`, or empty.
  llvm::StringRef axisSplitting(int64_t dim) const;

  std::string str() const; // "{dp=S0, tp=R}"

  friend bool operator==(const Sharding &a, const Sharding &b) {
    return a.entries_ == b.entries_;
  }
  friend bool operator!=(const Sharding &a, const Sharding &b) {
    return !(a == b);
  }

private:
  llvm::SmallVector<Entry, 2> entries_;
};

struct MeshAxis {
  std::string name;
  int64_t size = 1;
  // Relative share of each coordinate when a dimension is split on this
  // axis (devices of different speed); empty: as even as possible.
  std::vector<int64_t> weights;
};

// What a mesh axis is for. Passes ask for the axis of a role
// (axisNamed(AxisRole::Data)), never test a name.
enum class AxisRole : uint8_t {
  Pipeline, // each device runs some of the layers (a stage)
  Data,     // each device takes a part of every batch
  Tensor,   // weight matrices are split across the devices
};

struct MeshAxisKind {
  const char *name;
  AxisRole role;
  const char *meaning; // for --help and the docs
};

// The mesh axes mgc knows, in the order they nest: pipeline parallel
// outermost, then data parallel, tensor parallel innermost (a tp group is
// neighbouring devices), as Megatron-LM nests them. The partitioner places
// values on dp and tp; pp is the pipeline pass's (passes/PipelineSplit.h).
inline constexpr MeshAxisKind kMeshAxisKinds[] = {
    {"pp", AxisRole::Pipeline,
     "pipeline parallel: each device runs some of the layers (a stage)"},
    {"dp", AxisRole::Data,
     "data parallel: each device takes a part of every batch"},
    {"tp", AxisRole::Tensor,
     "tensor parallel: weight matrices are split across the devices"},
};

// The name of the axis of `role`: "dp" for AxisRole::Data.
constexpr const char *axisNamed(AxisRole role) {
  for (const MeshAxisKind &k : kMeshAxisKinds)
    if (k.role == role)
      return k.name;
  return nullptr; // every role has a row
}
inline constexpr const char *kDataAxis = axisNamed(AxisRole::Data);
inline constexpr const char *kTensorAxis = axisNamed(AxisRole::Tensor);
inline constexpr const char *kPipelineAxis = axisNamed(AxisRole::Pipeline);

// The index of `name` in kMeshAxisKinds (its nesting rank), or -1 when it
// is not a known axis.
int knownAxisIndex(llvm::StringRef name);
// "dp, tp": the known axes, for messages.
std::string knownAxesList();
// The known axes' names, in nesting order.
std::vector<std::string> knownAxisNames();

// Module attribute that holds the mesh text (Mesh::str) of a module to be
// partitioned.
inline constexpr const char *kMeshAttr = "mesh";

// The most devices a mesh may have (its axes' sizes multiplied).
inline constexpr int64_t kMaxMeshDevices = 4096;

class Mesh {
public:
  Mesh() = default;
  explicit Mesh(std::vector<MeshAxis> axes) : axes_(std::move(axes)) {}

  // "dp=2,tp=2" or "dp=2[3,1]"; axes from kMeshAxisKinds, each at most once,
  // sizes 1 to 4096 and kMaxMeshDevices devices in all, weights (if any)
  // one positive integer per coordinate.
  // On error returns nullopt and sets `error` to a message naming the part
  // that is wrong and what was expected.
  static std::optional<Mesh> parse(llvm::StringRef text, std::string &error);
  std::string str() const;

  llvm::ArrayRef<MeshAxis> axes() const { return axes_; }
  const MeshAxis *findAxis(llvm::StringRef name) const;
  int axisIndex(llvm::StringRef name) const; // -1 if absent
  int64_t numDevices() const;
  // A mesh of one device (no axes, or every axis of size 1).
  bool isTrivial() const { return numDevices() == 1; }

  // Coordinates of a device (one per axis; the last axis varies fastest)
  // and back.
  llvm::SmallVector<int64_t, 4> coords(int64_t device) const;
  int64_t deviceAt(llvm::ArrayRef<int64_t> coords) const;
  // The devices along `axis` through `device`, by coordinate on that axis.
  std::vector<int64_t> group(int64_t device, llvm::StringRef axis) const;

  friend bool operator==(const Mesh &a, const Mesh &b);

private:
  std::vector<MeshAxis> axes_;
};

// Whether every element equals the first (true for none).
inline bool allEqual(llvm::ArrayRef<int64_t> xs) {
  for (int64_t x : xs)
    if (x != xs.front())
      return false;
  return true;
}

// Sizes of the parts of a dimension of size `n` split along `axis`: in
// proportion to the axis weights (largest remainders first, ties to the
// lower coordinate), or as even as possible (the first n % k parts get one
// more). They sum to n; a part may be 0 only when n is small.
std::vector<int64_t> splitSizes(int64_t n, const MeshAxis &axis);
// Where part `coord` starts: the sum of the sizes before it.
int64_t splitOffset(int64_t n, const MeshAxis &axis, int64_t coord);

// The type one device holds of a logical tensor of type `logical` with
// sharding `s` (axes not in `s` replicated): split dimensions take the part
// of the device's coordinate; replicated and partial ones are whole.
TensorType localType(const TensorType &logical, const Sharding &s,
                     const Mesh &mesh, llvm::ArrayRef<int64_t> coords);

} // namespace mgc::ir
