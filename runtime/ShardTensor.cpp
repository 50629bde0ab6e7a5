// Cutting whole tensors into device parts and joining them back. Axes are
// taken in mesh order: the outer axis cuts the logical tensor, the next one
// cuts that part, and so on, so two axes splitting the same dimension nest
// (the inner axis splits the outer axis's part). Joining goes the other way,
// innermost axis first. A split placement whose dimension the tensor does
// not have is ignored, as ir::localType does.
#include "runtime/ShardTensor.h"
#include "runtime/Slab.h"

#include <functional>

namespace mgc::runtime {

namespace {

// The dimension axis `axis` splits, or -1 (replicated, partial, or a
// dimension the tensor does not have).
int64_t splitDim(const ir::Sharding &s, const ir::MeshAxis &axis,
                 int64_t rank) {
  ir::Placement p = s.get(axis.name);
  return p.isSplit() && p.dim >= 0 && p.dim < rank ? p.dim : -1;
}

} // namespace

Tensor cutTensor(const Tensor &t, int64_t dim, int64_t off, int64_t len) {
  ir::TensorType type = t.type();
  type.shape[dim] = len;
  Tensor out(type);
  packSlab(t.data(), t.shape(), dim, off, len, out.data(),
           ir::dtypeBytes(t.dtype()));
  return out;
}

Tensor joinTensors(llvm::ArrayRef<Tensor> parts, int64_t dim) {
  ir::TensorType type = parts.front().type();
  type.shape[dim] = 0;
  for (const Tensor &p : parts)
    type.shape[dim] += p.shape()[dim];
  Tensor out(type);
  size_t bytes = ir::dtypeBytes(type.dtype);
  int64_t off = 0;
  for (const Tensor &p : parts) {
    unpackSlab(p.data(), type.shape, dim, off, p.shape()[dim], out.data(),
               bytes);
    off += p.shape()[dim];
  }
  return out;
}

Tensor sumTensors(llvm::ArrayRef<Tensor> parts) {
  Tensor out(parts.front().type());
  int64_t n = out.numel();
  auto add = [&]<typename S, typename A>(auto load, auto store) {
    S *dst = out.as<S>();
    for (int64_t i = 0; i < n; ++i) {
      A acc = load(parts[0].as<S>()[i]);
      for (size_t j = 1; j < parts.size(); ++j)
        acc += load(parts[j].as<S>()[i]);
      dst[i] = store(acc);
    }
  };
  auto same = [](auto v) { return v; };
  switch (out.dtype()) {
  case ir::DType::F32:
    add.operator()<float, float>(same, same);
    break;
  case ir::DType::F64:
    add.operator()<double, double>(same, same);
    break;
  case ir::DType::BF16:
    add.operator()<uint16_t, float>(bf16ToFloat, floatToBF16);
    break;
  case ir::DType::F16:
    add.operator()<uint16_t, float>(f16ToFloat, floatToF16);
    break;
  case ir::DType::I32:
    add.operator()<int32_t, uint32_t>(
        [](int32_t v) { return static_cast<uint32_t>(v); },
        [](uint32_t v) { return static_cast<int32_t>(v); });
    break;
  case ir::DType::I64:
    add.operator()<int64_t, uint64_t>(
        [](int64_t v) { return static_cast<uint64_t>(v); },
        [](uint64_t v) { return static_cast<int64_t>(v); });
    break;
  }
  return out;
}

namespace {

// The type device `coords` holds: each splitting axis in mesh order cuts the
// dimension it splits.
ir::TensorType partType(const ir::TensorType &logical,
                        const ir::Sharding &sharding, const ir::Mesh &mesh,
                        llvm::ArrayRef<int64_t> coords) {
  ir::TensorType t = logical;
  for (size_t a = 0; a < mesh.axes().size(); ++a) {
    const ir::MeshAxis &axis = mesh.axes()[a];
    int64_t d = splitDim(sharding, axis, t.rank());
    if (d >= 0)
      t.shape[d] = ir::splitSizes(t.shape[d], axis)[coords[a]];
  }
  return t;
}

} // namespace

std::vector<int64_t> partOffsets(const ir::TensorType &logical,
                                 const ir::Sharding &sharding,
                                 const ir::Mesh &mesh, int64_t device) {
  std::vector<int64_t> offsets(logical.rank(), 0);
  llvm::SmallVector<int64_t, 4> coords = mesh.coords(device);
  ir::TensorType t = logical;
  // As shardTensor cuts: each splitting axis in mesh order, within the part
  // the axes before it left.
  for (size_t a = 0; a < mesh.axes().size(); ++a) {
    const ir::MeshAxis &axis = mesh.axes()[a];
    int64_t d = splitDim(sharding, axis, t.rank());
    if (d < 0)
      continue;
    offsets[d] += ir::splitOffset(t.shape[d], axis, coords[a]);
    t.shape[d] = ir::splitSizes(t.shape[d], axis)[coords[a]];
  }
  return offsets;
}

Tensor shardTensor(const Tensor &logical, const ir::Sharding &sharding,
                   const ir::Mesh &mesh, int64_t device) {
  if (device < 0 || device >= mesh.numDevices())
    return Tensor();
  llvm::SmallVector<int64_t, 4> coords = mesh.coords(device);
  Tensor t = logical;
  bool zero = false;
  for (size_t a = 0; a < mesh.axes().size(); ++a) {
    const ir::MeshAxis &axis = mesh.axes()[a];
    if (sharding.get(axis.name).isPartial() && coords[a] != 0)
      zero = true;
    int64_t d = splitDim(sharding, axis, t.type().rank());
    if (d < 0)
      continue;
    int64_t n = t.shape()[d];
    t = cutTensor(t, d, ir::splitOffset(n, axis, coords[a]),
                  ir::splitSizes(n, axis)[coords[a]]);
  }
  return zero ? Tensor(t.type()) : t;
}

bool partIsRead(const ir::Sharding &sharding, const ir::Mesh &mesh,
                int64_t device) {
  llvm::SmallVector<int64_t, 4> coords = mesh.coords(device);
  for (size_t a = 0; a < mesh.axes().size(); ++a)
    if (coords[a] != 0 && sharding.get(mesh.axes()[a].name).isReplicate())
      return false;
  return true;
}

bool unshardTensor(llvm::ArrayRef<Tensor> parts, const ir::Sharding &sharding,
                   const ir::Mesh &mesh, const ir::TensorType &logical,
                   Tensor &out, std::string &error) {
  int64_t n = mesh.numDevices();
  if (static_cast<int64_t>(parts.size()) != n) {
    error = "expected one part per device of mesh " + mesh.str() + " (" +
            std::to_string(n) + "), got " + std::to_string(parts.size());
    return false;
  }
  for (int64_t k = 0; k < n; ++k) {
    ir::TensorType want = partType(logical, sharding, mesh, mesh.coords(k));
    if (partIsRead(sharding, mesh, k) && parts[k].type() != want) {
      error = "the part of device " + std::to_string(k) + " of " +
              logical.str() + " " + sharding.str() + " on mesh " + mesh.str() +
              " has type " + parts[k].type().str() + ", expected " + want.str();
      return false;
    }
  }
  // Joins the parts of the devices whose first coordinates are `prefix`
  // over the remaining axes, innermost first.
  llvm::SmallVector<int64_t, 4> prefix;
  std::function<Tensor()> combine = [&]() -> Tensor {
    size_t a = prefix.size();
    if (a == mesh.axes().size())
      return parts[mesh.deviceAt(prefix)];
    const ir::MeshAxis &axis = mesh.axes()[a];
    int64_t d = splitDim(sharding, axis, logical.rank());
    bool partial = sharding.get(axis.name).isPartial();
    std::vector<Tensor> subs;
    for (int64_t j = 0; j < axis.size; ++j) {
      prefix.push_back(j);
      subs.push_back(combine());
      prefix.pop_back();
      if (d < 0 && !partial)
        break; // replicated: coordinate 0 stands for all
    }
    if (d >= 0)
      return joinTensors(subs, d);
    if (partial)
      return sumTensors(subs);
    return std::move(subs.front());
  };
  out = combine();
  return true;
}

} // namespace mgc::runtime
