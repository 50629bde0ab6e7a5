#include "ir/Sharding.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <numeric>

namespace mgc::ir {

std::string Placement::str() const {
  switch (kind) {
  case PlacementKind::Replicate:
    return "R";
  case PlacementKind::Partial:
    return reduce == Reduction::Max ? "Pmax" : "P";
  case PlacementKind::Split:
    return "S" + std::to_string(dim);
  }
  return "?";
}

std::optional<Placement> Placement::parse(llvm::StringRef text) {
  if (text == "R")
    return replicate();
  if (text == "P")
    return partial();
  if (text == "Pmax")
    return partialMax();
  if (text.size() >= 2 && text[0] == 'S') {
    llvm::StringRef digits = text.drop_front();
    if (!llvm::all_of(digits, llvm::isDigit) || digits.size() > 3)
      return std::nullopt;
    int64_t dim = 0;
    if (digits.getAsInteger(10, dim))
      return std::nullopt;
    return split(dim);
  }
  return std::nullopt;
}

const Placement *Sharding::find(llvm::StringRef axis) const {
  for (const Entry &e : entries_)
    if (e.axis == axis)
      return &e.placement;
  return nullptr;
}

Placement Sharding::get(llvm::StringRef axis) const {
  const Placement *p = find(axis);
  return p ? *p : Placement::replicate();
}

void Sharding::set(llvm::StringRef axis, Placement placement) {
  for (Entry &e : entries_)
    if (e.axis == axis) {
      e.placement = placement;
      return;
    }
  entries_.push_back({axis.str(), placement});
}

bool Sharding::erase(llvm::StringRef axis) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it)
    if (it->axis == axis) {
      entries_.erase(it);
      return true;
    }
  return false;
}

llvm::StringRef Sharding::axisSplitting(int64_t dim) const {
  for (const Entry &e : entries_)
    if (e.placement.isSplit() && e.placement.dim == dim)
      return e.axis;
  return {};
}

std::string Sharding::str() const {
  std::string s = "{";
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (i)
      s += ", ";
    s += entries_[i].axis + "=" + entries_[i].placement.str();
  }
  return s + "}";
}

int knownAxisIndex(llvm::StringRef name) {
  for (size_t i = 0; i < std::size(kMeshAxisKinds); ++i)
    if (name == kMeshAxisKinds[i].name)
      return static_cast<int>(i);
  return -1;
}

std::string knownAxesList() {
  std::string s;
  for (const MeshAxisKind &k : kMeshAxisKinds)
    s += (s.empty() ? "" : ", ") + std::string(k.name);
  return s;
}

std::vector<std::string> knownAxisNames() {
  std::vector<std::string> names;
  for (const MeshAxisKind &k : kMeshAxisKinds)
    names.push_back(k.name);
  return names;
}

static bool isKnownAxis(llvm::StringRef name) {
  return knownAxisIndex(name) >= 0;
}

std::optional<Mesh> Mesh::parse(llvm::StringRef text, std::string &error) {
  std::vector<MeshAxis> axes;
  llvm::StringRef rest = text.trim();
  if (rest.empty()) {
    error = "empty mesh: expected axes such as dp=4 or dp=2,tp=2";
    return std::nullopt;
  }
  while (!rest.empty()) {
    // One axis: NAME=SIZE or NAME=SIZE[w0,w1,...].
    size_t end = rest.find(',');
    size_t bracket = rest.find('[');
    if (bracket != llvm::StringRef::npos && bracket < end) {
      size_t close = rest.find(']', bracket);
      if (close == llvm::StringRef::npos) {
        error = "'" + rest.str() + "': missing ']' after the weights";
        return std::nullopt;
      }
      end = rest.find(',', close);
    }
    llvm::StringRef part = rest.substr(0, end).trim();
    rest = end == llvm::StringRef::npos ? llvm::StringRef()
                                        : rest.substr(end + 1).trim();
    auto [name, value] = part.split('=');
    name = name.trim();
    value = value.trim();
    if (!part.contains('=') || name.empty() || value.empty()) {
      error = "'" + part.str() + "': expected AXIS=SIZE, such as dp=4";
      return std::nullopt;
    }
    if (!isKnownAxis(name)) {
      error = "unknown mesh axis '" + name.str() + "' (expected one of " +
              knownAxesList() + ")";
      return std::nullopt;
    }
    for (const MeshAxis &a : axes)
      if (a.name == name) {
        error = "mesh axis '" + name.str() + "' is given twice";
        return std::nullopt;
      }
    MeshAxis axis;
    axis.name = name.str();
    llvm::StringRef sizeText = value, weightText;
    if (size_t b = value.find('['); b != llvm::StringRef::npos) {
      sizeText = value.substr(0, b).trim();
      weightText = value.substr(b + 1);
      if (!weightText.endswith("]")) {
        error = "'" + part.str() + "': expected weights as [w0,w1,...]";
        return std::nullopt;
      }
      weightText = weightText.drop_back();
    }
    if (sizeText.getAsInteger(10, axis.size) || axis.size < 1 ||
        axis.size > 4096) {
      error = "mesh axis '" + axis.name + "' has size '" + sizeText.str() +
              "': expected an integer from 1 to 4096";
      return std::nullopt;
    }
    if (!weightText.empty()) {
      llvm::SmallVector<llvm::StringRef, 8> ws;
      weightText.split(ws, ',');
      for (llvm::StringRef w : ws) {
        int64_t x = 0;
        if (w.trim().getAsInteger(10, x) || x < 1 || x > 1000000) {
          error = "weight '" + w.trim().str() + "' of mesh axis '" + axis.name +
                  "': expected a positive integer";
          return std::nullopt;
        }
        axis.weights.push_back(x);
      }
      if (static_cast<int64_t>(axis.weights.size()) != axis.size) {
        error = "mesh axis '" + axis.name + "' of size " +
                std::to_string(axis.size) + " has " +
                std::to_string(axis.weights.size()) +
                " weights: expected one per device";
        return std::nullopt;
      }
      if (allEqual(axis.weights))
        axis.weights.clear();
    }
    axes.push_back(std::move(axis));
  }
  // Every axis within its limit can still make a mesh no run can hold
  // (4096^3 devices): the devices together have the same limit.
  int64_t devices = 1;
  for (const MeshAxis &a : axes)
    devices *= a.size; // at most 4096^3: no overflow
  if (devices > kMaxMeshDevices) {
    error = "the mesh has " + std::to_string(devices) + " devices: at most " +
            std::to_string(kMaxMeshDevices) + " together";
    return std::nullopt;
  }
  // Keep the nesting order of kMeshAxisKinds whatever the order written.
  std::stable_sort(axes.begin(), axes.end(),
                   [](const MeshAxis &a, const MeshAxis &b) {
                     return knownAxisIndex(a.name) < knownAxisIndex(b.name);
                   });
  return Mesh(std::move(axes));
}

std::string Mesh::str() const {
  std::string s;
  for (const MeshAxis &a : axes_) {
    if (!s.empty())
      s += ",";
    s += a.name + "=" + std::to_string(a.size);
    if (!a.weights.empty()) {
      s += "[";
      for (size_t i = 0; i < a.weights.size(); ++i)
        s += (i ? "," : "") + std::to_string(a.weights[i]);
      s += "]";
    }
  }
  return s;
}

const MeshAxis *Mesh::findAxis(llvm::StringRef name) const {
  int i = axisIndex(name);
  return i < 0 ? nullptr : &axes_[i];
}

int Mesh::axisIndex(llvm::StringRef name) const {
  for (size_t i = 0; i < axes_.size(); ++i)
    if (axes_[i].name == name)
      return static_cast<int>(i);
  return -1;
}

int64_t Mesh::numDevices() const {
  int64_t n = 1;
  for (const MeshAxis &a : axes_)
    n *= a.size;
  return n;
}

llvm::SmallVector<int64_t, 4> Mesh::coords(int64_t device) const {
  llvm::SmallVector<int64_t, 4> c(axes_.size());
  for (size_t i = axes_.size(); i-- > 0;) {
    c[i] = device % axes_[i].size;
    device /= axes_[i].size;
  }
  return c;
}

int64_t Mesh::deviceAt(llvm::ArrayRef<int64_t> coords) const {
  int64_t d = 0;
  for (size_t i = 0; i < axes_.size(); ++i)
    d = d * axes_[i].size + coords[i];
  return d;
}

std::vector<int64_t> Mesh::group(int64_t device, llvm::StringRef axis) const {
  int i = axisIndex(axis);
  if (i < 0)
    return {device};
  llvm::SmallVector<int64_t, 4> c = coords(device);
  std::vector<int64_t> out;
  for (int64_t k = 0; k < axes_[i].size; ++k) {
    c[i] = k;
    out.push_back(deviceAt(c));
  }
  return out;
}

bool operator==(const Mesh &a, const Mesh &b) { return a.str() == b.str(); }

std::vector<int64_t> splitSizes(int64_t n, const MeshAxis &axis) {
  int64_t k = axis.size;
  std::vector<int64_t> sizes(k, 0);
  if (axis.weights.empty()) {
    for (int64_t i = 0; i < k; ++i)
      sizes[i] = n / k + (i < n % k ? 1 : 0);
    return sizes;
  }
  int64_t total =
      std::accumulate(axis.weights.begin(), axis.weights.end(), int64_t(0));
  // Floors of the exact shares, then the rest to the largest remainders.
  std::vector<std::pair<int64_t, int64_t>> remainders; // (-remainder, coord)
  int64_t given = 0;
  for (int64_t i = 0; i < k; ++i) {
    __int128 share = static_cast<__int128>(n) * axis.weights[i];
    sizes[i] = static_cast<int64_t>(share / total);
    remainders.push_back({-static_cast<int64_t>(share % total), i});
    given += sizes[i];
  }
  std::sort(remainders.begin(), remainders.end());
  for (int64_t j = 0; given < n; ++j, ++given)
    ++sizes[remainders[j].second];
  return sizes;
}

int64_t splitOffset(int64_t n, const MeshAxis &axis, int64_t coord) {
  std::vector<int64_t> sizes = splitSizes(n, axis);
  return std::accumulate(sizes.begin(), sizes.begin() + coord, int64_t(0));
}

TensorType localType(const TensorType &logical, const Sharding &s,
                     const Mesh &mesh, llvm::ArrayRef<int64_t> coords) {
  TensorType t = logical;
  for (const Sharding::Entry &e : s.entries()) {
    if (!e.placement.isSplit())
      continue;
    int i = mesh.axisIndex(e.axis);
    if (i < 0 || e.placement.dim < 0 || e.placement.dim >= t.rank())
      continue;
    t.shape[e.placement.dim] =
        splitSizes(logical.shape[e.placement.dim], mesh.axes()[i])[coords[i]];
  }
  return t;
}

} // namespace mgc::ir
