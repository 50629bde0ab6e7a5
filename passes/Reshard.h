// Reshard: the one routine that creates communication. It moves a value
// from its placement to another, one mesh axis at a time:
//   P -> R      all_reduce           P -> S(d)  reduce_scatter
//   S(d) -> R   all_gather           R -> S(d)  local_split (no traffic)
//   S(a) -> S(b) all_to_all
//   Pmax -> R   all_reduce_max       Pmax -> S(d) all_reduce_max, local_split
// R or S -> P (or Pmax), and P <-> Pmax, are never needed (the propagation
// does not ask for them) and are refused. Data, tensor and ZeRO parallelism
// all communicate through here.
#pragma once

#include "ir/Builder.h"
#include "ir/Graph.h"
#include "ir/Sharding.h"

#include <string>

namespace mgc::passes {

// Bytes one device sends for changing `from` to `to` on one axis of size n,
// for a value whose local part (under its current placement) has `bytes`
// bytes (ring algorithms): all_reduce (of sums or maxima) 2(n-1)/n * bytes,
// also for partial maxima to a split; reduce_scatter and
// all_to_all (n-1)/n * bytes; all_gather (n-1) * bytes (its result is n
// times the part); local_split and no change 0; infinity when impossible.
double axisReshardBytes(ir::Placement from, ir::Placement to,
                        const ir::MeshAxis &axis, double bytes);

// Bytes of one device's part of a value of type `type` placed as `s`
// (device 0's part: a fair size for every device).
double localBytes(const ir::TensorType &type, const ir::Sharding &s,
                  const ir::Mesh &mesh);

// The total over the mesh axes for moving a value of logical type `type`
// from `from` to `to` (both complete on the mesh).
double reshardBytes(const ir::TensorType &type, const ir::Sharding &from,
                    const ir::Sharding &to, const ir::Mesh &mesh);

// Converts `v` (complete sharding on `mesh`) to `to`, creating the
// communication ops with `b` at its insertion point (each result carries
// its new sharding); returns `v` itself when nothing changes, or null with
// `error` set when the conversion is impossible. Splits are undone before
// new ones are made, so no dimension is ever split on two axes at once.
ir::Value *reshard(ir::Builder &b, ir::Value *v, const ir::Sharding &to,
                   const ir::Mesh &mesh, std::string &error);

// `s` restricted to the mesh's axes, in mesh order, with R for the axes it
// does not list.
ir::Sharding completeSharding(const ir::Sharding &s, const ir::Mesh &mesh);

} // namespace mgc::passes
