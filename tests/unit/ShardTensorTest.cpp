// Whole tensors to device parts and back: every part holds the elements
// its device owns (checked index by index), and joining the parts gives the
// tensor back exactly.
#include "MeshTestSupport.h"

#include "runtime/ShardTensor.h"

#include <doctest/doctest.h>

#include <cstring>

namespace mgc::runtime {
namespace {

using backend::testing::bitIdentical;
using backend::testing::meshOf;
using ir::DType;
using ir::Placement;
using ir::Sharding;

Tensor numbered(ir::TensorType type) {
  Tensor t(type);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.set(i, static_cast<double>(i % 97) * 0.5 - 7);
  return t;
}

// Element by element: part element idx is logical element idx + the offset
// of the device's part on each split dimension (each dimension split by at
// most one axis here).
void checkPartContents(const Tensor &logical, const Tensor &part,
                       const Sharding &s, const ir::Mesh &mesh,
                       int64_t device) {
  llvm::SmallVector<int64_t, 4> coords = mesh.coords(device);
  llvm::SmallVector<int64_t, 4> offset(logical.shape().size(), 0);
  bool zero = false;
  for (size_t a = 0; a < mesh.axes().size(); ++a) {
    Placement p = s.get(mesh.axes()[a].name);
    if (p.isSplit())
      offset[p.dim] =
          ir::splitOffset(logical.shape()[p.dim], mesh.axes()[a], coords[a]);
    if (p.isPartial() && coords[a] != 0)
      zero = true;
  }
  REQUIRE(part.type() == ir::localType(logical.type(), s, mesh, coords));
  llvm::ArrayRef<int64_t> ps = part.shape();
  for (int64_t i = 0; i < part.numel(); ++i) {
    int64_t rest = i, flat = 0, stride = 1;
    for (size_t d = ps.size(); d-- > 0;) {
      int64_t idx = rest % ps[d] + offset[d];
      rest /= ps[d];
      flat += idx * stride;
      stride *= logical.shape()[d];
    }
    double want = zero ? 0.0 : logical.get(flat);
    INFO("device " << device << " element " << i);
    REQUIRE(part.get(i) == want);
  }
}

std::vector<Tensor> shardAll(const Tensor &logical, const Sharding &s,
                             const ir::Mesh &mesh) {
  std::vector<Tensor> parts;
  for (int64_t d = 0; d < mesh.numDevices(); ++d)
    parts.push_back(shardTensor(logical, s, mesh, d));
  return parts;
}

void checkRoundTrip(const Tensor &logical, const Sharding &s,
                    const ir::Mesh &mesh, bool checkContents = true) {
  INFO("sharding " << s.str() << " on " << mesh.str() << " of "
                   << logical.type().str());
  std::vector<Tensor> parts = shardAll(logical, s, mesh);
  if (checkContents)
    for (int64_t d = 0; d < mesh.numDevices(); ++d)
      checkPartContents(logical, parts[d], s, mesh, d);
  Tensor back;
  std::string error;
  REQUIRE(unshardTensor(parts, s, mesh, logical.type(), back, error));
  CHECK(bitIdentical(back, logical));
}

TEST_CASE("shard tensor: round trips on dp=2,tp=2 for S, R and P") {
  ir::Mesh mesh = meshOf("dp=2,tp=2");
  for (DType dt : {DType::F32, DType::F64, DType::BF16, DType::I32}) {
    Tensor x = numbered(ir::TensorType(dt, {5, 6, 3}));
    checkRoundTrip(x, Sharding{}, mesh);
    checkRoundTrip(
        x, Sharding{{"dp", Placement::split(0)}, {"tp", Placement::split(1)}},
        mesh);
    checkRoundTrip(
        x,
        Sharding{{"dp", Placement::split(2)}, {"tp", Placement::replicate()}},
        mesh);
    checkRoundTrip(
        x, Sharding{{"dp", Placement::partial()}, {"tp", Placement::split(0)}},
        mesh);
    checkRoundTrip(
        x, Sharding{{"dp", Placement::partial()}, {"tp", Placement::partial()}},
        mesh);
    checkRoundTrip(
        x, Sharding{{"tp", Placement::split(1)}, {"dp", Placement::split(2)}},
        mesh);
  }
}

TEST_CASE("shard tensor: two axes splitting one dimension nest") {
  ir::Mesh mesh = meshOf("dp=2,tp=2");
  Tensor x = numbered(ir::TensorType(DType::F32, {7, 2}));
  Sharding s{{"dp", Placement::split(0)}, {"tp", Placement::split(0)}};
  std::vector<Tensor> parts = shardAll(x, s, mesh);
  // dp cuts 7 rows into 4 + 3, tp cuts those into 2 + 2 and 2 + 1.
  int64_t rows[4] = {2, 2, 2, 1}, first[4] = {0, 2, 4, 6};
  for (int64_t d = 0; d < 4; ++d) {
    REQUIRE(parts[d].shape()[0] == rows[d]);
    for (int64_t i = 0; i < parts[d].numel(); ++i)
      CHECK(parts[d].get(i) == x.get(first[d] * 2 + i));
  }
  checkRoundTrip(x, s, mesh, /*checkContents=*/false);
}

TEST_CASE("shard tensor: weighted dp=2[3,1] gives 3/4 and 1/4") {
  ir::Mesh mesh = meshOf("dp=2[3,1],tp=2");
  Tensor x = numbered(ir::TensorType(DType::I64, {8, 3}));
  Sharding s{{"dp", Placement::split(0)}, {"tp", Placement::replicate()}};
  std::vector<Tensor> parts = shardAll(x, s, mesh);
  CHECK(parts[0].shape()[0] == 6);
  CHECK(parts[1].shape()[0] == 6);
  CHECK(parts[2].shape()[0] == 2);
  checkRoundTrip(x, s, mesh);
  checkRoundTrip(
      numbered(ir::TensorType(DType::F32, {3, 9})),
      Sharding{{"dp", Placement::split(1)}, {"tp", Placement::split(0)}}, mesh);
}

TEST_CASE("shard tensor: partial parts are summed in coordinate order") {
  ir::Mesh mesh = meshOf("dp=3");
  ir::TensorType type(DType::BF16, {2});
  Sharding s{{"dp", Placement::partial()}};
  // 1 + 2^-8 + 2^-8: in f32 that is 1 + 2^-7, exact in bf16; rounding after
  // each addition would give 1.
  std::vector<Tensor> parts(3, Tensor(type));
  parts[0].set(0, 1.0);
  parts[1].set(0, 0x1p-8);
  parts[2].set(0, 0x1p-8);
  parts[0].set(1, -3.0);
  parts[2].set(1, 5.0);
  Tensor out;
  std::string error;
  REQUIRE(unshardTensor(parts, s, mesh, type, out, error));
  CHECK(out.get(0) == 1.0078125);
  CHECK(out.get(1) == 2.0);
  // Sharding a value that is partial: device 0 holds it, the others zeros.
  Tensor x = numbered(type);
  CHECK(bitIdentical(shardTensor(x, s, mesh, 0), x));
  CHECK(shardTensor(x, s, mesh, 2).get(0) == 0.0);
}

TEST_CASE("shard tensor: parts of the wrong type are an error") {
  ir::Mesh mesh = meshOf("dp=2,tp=2");
  ir::TensorType type(DType::F32, {4, 6});
  Sharding s{{"dp", Placement::split(0)}, {"tp", Placement::split(1)}};
  std::vector<Tensor> parts = shardAll(numbered(type), s, mesh);
  Tensor out;
  std::string error;
  SUBCASE("a wrong shape") {
    parts[3] = Tensor(ir::TensorType(DType::F32, {2, 2}));
    CHECK_FALSE(unshardTensor(parts, s, mesh, type, out, error));
    CHECK(error.find("device 3") != std::string::npos);
    CHECK(error.find("f32[2, 2]") != std::string::npos);
    CHECK(error.find("expected f32[2, 3]") != std::string::npos);
  }
  SUBCASE("a wrong dtype") {
    parts[1] = Tensor(ir::TensorType(DType::F64, {2, 3}));
    CHECK_FALSE(unshardTensor(parts, s, mesh, type, out, error));
    CHECK(error.find("device 1") != std::string::npos);
  }
  SUBCASE("a part missing") {
    parts.pop_back();
    CHECK_FALSE(unshardTensor(parts, s, mesh, type, out, error));
    CHECK(error.find("one part per device") != std::string::npos);
  }
  SUBCASE("a device outside the mesh gets nothing") {
    CHECK(shardTensor(parts[0], s, mesh, 4).data() == nullptr);
    CHECK(shardTensor(parts[0], s, mesh, -1).data() == nullptr);
  }
}

} // namespace
} // namespace mgc::runtime
