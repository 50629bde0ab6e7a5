// Moving whole (logical) tensors to and from the parts devices hold: how a
// session places parameters, state and each batch on a mesh, and how it
// gathers them back for checkpoints and for comparing with a one-device
// run.
#pragma once

#include "ir/Sharding.h"
#include "runtime/Tensor.h"

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mgc::runtime {

// The part of `logical` that `device` holds under `sharding` (axes not
// listed are replicated): split dimensions cut to the device's part
// (ir::splitSizes). A partial axis gives the whole value to coordinate 0 and
// zeros to the others, so that the parts add up to it.
Tensor shardTensor(const Tensor &logical, const ir::Sharding &sharding,
                   const ir::Mesh &mesh, int64_t device);

// The logical tensor back from every device's part (parts[k] from device
// k): split dimensions joined in coordinate order, partial axes summed in
// coordinate order, replicated axes taken from coordinate 0. The parts that
// are not read (partIsRead) may be anything, an empty Tensor() among them.
// Returns false and sets `error` if a part that is read has the wrong type.
bool unshardTensor(llvm::ArrayRef<Tensor> parts, const ir::Sharding &sharding,
                   const ir::Mesh &mesh, const ir::TensorType &logical,
                   Tensor &out, std::string &error);

// Where the part of `device` (shardTensor) starts in the logical tensor of
// type `logical`, per dimension.
std::vector<int64_t> partOffsets(const ir::TensorType &logical,
                                 const ir::Sharding &sharding,
                                 const ir::Mesh &mesh, int64_t device);

// Whether unshardTensor reads the part of `device`: it is at coordinate 0 of
// every axis on which `sharding` is replicated.
bool partIsRead(const ir::Sharding &sharding, const ir::Mesh &mesh,
                int64_t device);

// The elementwise sum of tensors of one type, in order: f32 and f64 in
// their own type, bf16 and f16 in f32 rounded once, integers wrapping.
Tensor sumTensors(llvm::ArrayRef<Tensor> parts);

// Elements [off, off + len) of dimension `dim`, and the reverse: parts of
// one shape but `dim` joined along it, in order.
Tensor cutTensor(const Tensor &t, int64_t dim, int64_t off, int64_t len);
Tensor joinTensors(llvm::ArrayRef<Tensor> parts, int64_t dim);

} // namespace mgc::runtime
