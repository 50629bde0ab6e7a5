// The CPU kernels of the communication ops, run as device programs on N
// threads with the in-process communicator, against what the op means on
// the whole (logical) tensor: slices, joins and coordinate-order sums
// computed here element by element.
#include "MeshTestSupport.h"

#include "backend/cpu/InProcessCommunicator.h"
#include "backend/cpu/Kernels.h"
#include "ir/Builder.h"
#include "runtime/Tensor.h"
#include "support/Random.h"

#include <doctest/doctest.h>

#include <cstring>
#include <memory>

namespace mgc::backend::testing {
namespace {

using cpu::InProcessMesh;
using ir::DType;
using ir::OpKind;
using runtime::Tensor;

// Values exact in every dtype tested (bf16 keeps 8 significant bits):
// multiples of 1/4 from -8 to 8, from a seed.
Tensor randomTensor(ir::TensorType type, uint64_t seed) {
  Tensor t(type);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double u = uniform01(seed, 11, i);
    t.set(i, ir::isInteger(type.dtype) ? std::floor(u * 1000) - 500
                                       : std::floor(u * 64) / 4 - 8);
  }
  return t;
}

// Fine random values for sums whose rounding matters.
Tensor fineTensor(ir::TensorType type, uint64_t seed) {
  Tensor t(type);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.set(i, uniform01(seed, 12, i) * 2 - 1);
  return t;
}

// Elements [off, off + len) of dimension `dim`, index by index.
Tensor slice(const Tensor &x, int64_t dim, int64_t off, int64_t len) {
  ir::TensorType type = x.type();
  type.shape[dim] = len;
  Tensor out(type);
  llvm::ArrayRef<int64_t> s = out.shape();
  for (int64_t i = 0; i < out.numel(); ++i) {
    int64_t rest = i, src = 0, stride = 1;
    for (size_t d = s.size(); d-- > 0;) {
      int64_t idx = rest % s[d] + (static_cast<int64_t>(d) == dim ? off : 0);
      rest /= s[d];
      src += idx * stride;
      stride *= x.shape()[d];
    }
    out.set(i, x.get(src));
  }
  return out;
}

// The sum of the tensors in order: f32 and f64 in their own type, bf16 in
// f32 rounded once.
Tensor orderedSum(const std::vector<Tensor> &xs) {
  Tensor out(xs.front().type());
  for (int64_t i = 0; i < out.numel(); ++i) {
    switch (out.dtype()) {
    case DType::F64: {
      double acc = xs[0].as<double>()[i];
      for (size_t j = 1; j < xs.size(); ++j)
        acc += xs[j].as<double>()[i];
      out.as<double>()[i] = acc;
      break;
    }
    case DType::BF16:
    case DType::F32: {
      float acc = static_cast<float>(xs[0].get(i));
      for (size_t j = 1; j < xs.size(); ++j)
        acc += static_cast<float>(xs[j].get(i));
      out.set(i, acc); // rounds once to bf16
      break;
    }
    default:
      FAIL("no sum for " << ir::dtypeName(out.dtype()).str());
    }
  }
  return out;
}

int64_t offsetOf(llvm::ArrayRef<int64_t> sizes, int64_t j) {
  int64_t at = 0;
  for (int64_t k = 0; k < j; ++k)
    at += sizes[k];
  return at;
}

// One device's program: a single communication op on input "x".
struct DeviceOp {
  std::unique_ptr<ir::Module> module = std::make_unique<ir::Module>();
  ir::Op *op = nullptr;
  Tensor input, expected;
};

DeviceOp makeOp(OpKind kind, const Tensor &input, ir::Attrs attrs,
                const Tensor &expected) {
  DeviceOp d;
  ir::Value *x = d.module->graph().addInput("x", input.type());
  ir::Builder b(d.module->graph());
  ir::ValueOrError r = b.create(kind, {x}, std::move(attrs));
  INFO(ir::opName(kind).str() << ": " << r.error);
  REQUIRE(r.ok());
  d.op = r.value->definingOp();
  REQUIRE(d.op->type() == expected.type());
  d.input = input;
  d.expected = expected;
  return d;
}

struct Run {
  std::vector<Tensor> outputs;
  std::vector<std::string> errors; // empty where the kernel succeeded
};

// Each device runs its op on its own thread; a device whose kernel fails
// aborts the mesh, as the mesh executor does.
Run runOnMesh(InProcessMesh &mesh, std::vector<DeviceOp> &ops,
              bool withComm = true) {
  int64_t n = mesh.mesh().numDevices();
  REQUIRE(static_cast<int64_t>(ops.size()) == n);
  Run run;
  run.outputs.resize(n);
  run.errors.resize(n);
  onDeviceThreads(n, [&](int64_t d) {
    DeviceOp &o = ops[d];
    cpu::ThreadPool pool(1);
    run.outputs[d] = Tensor(o.op->type());
    std::vector<std::byte> scratch(cpu::scratchBytes(*o.op));
    cpu::TensorRef in{o.input.data(), &o.op->operand(0)->type()};
    cpu::TensorRef out{run.outputs[d].data(), &o.op->type()};
    std::string error;
    cpu::KernelArgs args{
        *o.op,          in,   out,    scratch.data(),
        scratch.size(), pool, &error, withComm ? &mesh.endpoint(d) : nullptr};
    if (cpu::kernelFor(o.op->kind())(args).failed()) {
      run.errors[d] = error.empty() ? "(no message)" : error;
      mesh.abort("device " + std::to_string(d) + " failed");
    }
  });
  mesh.reset();
  return run;
}

void checkRun(const Run &run, const std::vector<DeviceOp> &ops) {
  for (size_t d = 0; d < ops.size(); ++d) {
    INFO("device " << d << ": " << run.errors[d]);
    REQUIRE(run.errors[d].empty());
    const Tensor &got = run.outputs[d], &want = ops[d].expected;
    REQUIRE(got.type() == want.type());
    REQUIRE((want.nbytes() == 0 ||
             std::memcmp(got.data(), want.data(), want.nbytes()) == 0));
  }
}

// The logical tensor of the group of `device` on `axis`: the same on every
// device of the group, different between groups.
uint64_t groupSeed(const ir::Mesh &mesh, int64_t device, const char *axis,
                   uint64_t salt) {
  return salt * 1000 + mesh.group(device, axis).front();
}

ir::Attrs splitAttrs(const char *axis, int64_t dim,
                     const std::vector<int64_t> &sizes, int64_t part) {
  return {{"axis", std::string(axis)},
          {"dim", dim},
          {"sizes", sizes},
          {"part", part}};
}

// Whether the parts are uneven, so a device program names its part.
bool uneven(const std::vector<int64_t> &sizes) { return !ir::allEqual(sizes); }

struct SplitCase {
  const char *mesh;
  const char *axis;
  int64_t dim;
  std::vector<int64_t> sizes;
};

const SplitCase kSplitCases[] = {
    {"dp=3", "dp", 0, {2, 2, 2}}, // even, outermost: no scratch
    {"dp=3", "dp", 1, {2, 2, 1}}, // uneven, named part
    {"dp=3", "dp", 2, {1, 0, 3}}, // an empty part
    {"dp=2,tp=3", "tp", 1, {1, 3, 1}}, {"dp=2,tp=3", "dp", 2, {3, 1}},
    {"dp=2,tp=3", "tp", 0, {2, 2, 2}},
};

// The logical shape [6, 5, 4] with dimension `dim` set to the parts' sum.
ir::TensorType logicalType(DType dt, int64_t dim,
                           const std::vector<int64_t> &sizes) {
  ir::Shape shape = {6, 5, 4};
  shape[dim] = offsetOf(sizes, static_cast<int64_t>(sizes.size()));
  return ir::TensorType(dt, shape);
}

TEST_CASE("collective kernels: all_gather joins the parts along dim 0, 1, 2") {
  for (const SplitCase &sc : kSplitCases)
    for (DType dt : {DType::F32, DType::F64, DType::BF16, DType::I32}) {
      INFO(sc.mesh << " axis " << sc.axis << " dim " << sc.dim << " "
                   << ir::dtypeName(dt).str());
      InProcessMesh mesh(meshOf(sc.mesh));
      const ir::Mesh &m = mesh.mesh();
      std::vector<DeviceOp> ops;
      for (int64_t d = 0; d < m.numDevices(); ++d) {
        int64_t c = mesh.endpoint(d).coord(sc.axis);
        Tensor x = randomTensor(logicalType(dt, sc.dim, sc.sizes),
                                groupSeed(m, d, sc.axis, 1));
        Tensor part = slice(x, sc.dim, offsetOf(sc.sizes, c), sc.sizes[c]);
        ops.push_back(makeOp(
            OpKind::AllGather, part,
            splitAttrs(sc.axis, sc.dim, sc.sizes, uneven(sc.sizes) ? c : -1),
            x));
        // The parts must be rearranged unless the split dimension is the
        // outermost.
        CHECK((cpu::scratchBytes(*ops.back().op) > 0) == (sc.dim > 0));
      }
      checkRun(runOnMesh(mesh, ops), ops);
    }
}

TEST_CASE("collective kernels: reduce_scatter keeps each device's part of "
          "the coordinate-order sum") {
  for (const SplitCase &sc : kSplitCases)
    for (DType dt : {DType::F32, DType::F64, DType::BF16}) {
      INFO(sc.mesh << " axis " << sc.axis << " dim " << sc.dim << " "
                   << ir::dtypeName(dt).str());
      InProcessMesh mesh(meshOf(sc.mesh));
      const ir::Mesh &m = mesh.mesh();
      ir::TensorType type = logicalType(dt, sc.dim, sc.sizes);
      std::vector<Tensor> partials;
      for (int64_t d = 0; d < m.numDevices(); ++d)
        partials.push_back(fineTensor(type, 100 + d));
      std::vector<DeviceOp> ops;
      for (int64_t d = 0; d < m.numDevices(); ++d) {
        int64_t c = mesh.endpoint(d).coord(sc.axis);
        std::vector<Tensor> group;
        for (int64_t p : m.group(d, sc.axis))
          group.push_back(partials[p]);
        Tensor want = slice(orderedSum(group), sc.dim, offsetOf(sc.sizes, c),
                            sc.sizes[c]);
        ops.push_back(makeOp(
            OpKind::ReduceScatter, partials[d],
            splitAttrs(sc.axis, sc.dim, sc.sizes, uneven(sc.sizes) ? c : -1),
            want));
      }
      checkRun(runOnMesh(mesh, ops), ops);
    }
}

TEST_CASE("collective kernels: all_reduce is the same sum on every device") {
  for (DType dt : {DType::F32, DType::F64, DType::BF16}) {
    InProcessMesh mesh(meshOf("dp=2,tp=3"));
    const ir::Mesh &m = mesh.mesh();
    ir::TensorType type(dt, {7, 3});
    std::vector<Tensor> partials;
    for (int64_t d = 0; d < m.numDevices(); ++d)
      partials.push_back(fineTensor(type, 200 + d));
    for (const char *axis : {"dp", "tp"}) {
      INFO(axis << " " << ir::dtypeName(dt).str());
      std::vector<DeviceOp> ops;
      for (int64_t d = 0; d < m.numDevices(); ++d) {
        std::vector<Tensor> group;
        for (int64_t p : m.group(d, axis))
          group.push_back(partials[p]);
        ops.push_back(makeOp(OpKind::AllReduce, partials[d],
                             {{"axis", std::string(axis)}}, orderedSum(group)));
      }
      checkRun(runOnMesh(mesh, ops), ops);
    }
  }
}

TEST_CASE("collective kernels: all_to_all moves the split from one dimension "
          "to another") {
  struct Case {
    const char *mesh;
    const char *axis;
    int64_t from, to;
    std::vector<int64_t> fromSizes, toSizes;
  };
  const Case cases[] = {
      {"dp=3", "dp", 0, 1, {2, 2, 2}, {2, 2, 1}},
      {"dp=3", "dp", 2, 0, {2, 1, 1}, {3, 2, 1}},
      {"dp=3", "dp", 1, 2, {2, 2, 2}, {2, 2, 2}},
      {"dp=2,tp=2", "tp", 2, 0, {3, 1}, {4, 2}},
      {"dp=2,tp=2", "dp", 0, 1, {5, 1}, {2, 3}},
  };
  for (const Case &k : cases)
    for (DType dt : {DType::F32, DType::BF16, DType::I32}) {
      INFO(k.mesh << " axis " << k.axis << " from " << k.from << " to " << k.to
                  << " " << ir::dtypeName(dt).str());
      InProcessMesh mesh(meshOf(k.mesh));
      const ir::Mesh &m = mesh.mesh();
      ir::Shape shape = {6, 5, 4};
      shape[k.from] = offsetOf(k.fromSizes, k.fromSizes.size());
      shape[k.to] = offsetOf(k.toSizes, k.toSizes.size());
      bool named = uneven(k.fromSizes) || uneven(k.toSizes);
      std::vector<DeviceOp> ops;
      for (int64_t d = 0; d < m.numDevices(); ++d) {
        int64_t c = mesh.endpoint(d).coord(k.axis);
        Tensor x =
            randomTensor(ir::TensorType(dt, shape), groupSeed(m, d, k.axis, 2));
        ir::Attrs attrs = {{"axis", std::string(k.axis)},
                           {"from", k.from},
                           {"to", k.to},
                           {"from_sizes", k.fromSizes},
                           {"to_sizes", k.toSizes},
                           {"part", named ? c : int64_t(-1)}};
        ops.push_back(makeOp(
            OpKind::AllToAll,
            slice(x, k.from, offsetOf(k.fromSizes, c), k.fromSizes[c]), attrs,
            slice(x, k.to, offsetOf(k.toSizes, c), k.toSizes[c])));
      }
      checkRun(runOnMesh(mesh, ops), ops);
    }
}

TEST_CASE("collective kernels: local_split keeps the device's part") {
  for (const SplitCase &sc : kSplitCases)
    for (DType dt : {DType::F32, DType::BF16, DType::I32}) {
      INFO(sc.mesh << " axis " << sc.axis << " dim " << sc.dim);
      InProcessMesh mesh(meshOf(sc.mesh));
      const ir::Mesh &m = mesh.mesh();
      std::vector<DeviceOp> ops;
      for (int64_t d = 0; d < m.numDevices(); ++d) {
        int64_t c = mesh.endpoint(d).coord(sc.axis);
        Tensor x = randomTensor(logicalType(dt, sc.dim, sc.sizes), 7);
        ops.push_back(makeOp(
            OpKind::LocalSplit, x,
            splitAttrs(sc.axis, sc.dim, sc.sizes, uneven(sc.sizes) ? c : -1),
            slice(x, sc.dim, offsetOf(sc.sizes, c), sc.sizes[c])));
      }
      checkRun(runOnMesh(mesh, ops), ops);
      // Programs that name their part need no communicator.
      if (uneven(sc.sizes))
        checkRun(runOnMesh(mesh, ops, /*withComm=*/false), ops);
    }
}

TEST_CASE("collective kernels: errors are messages, not hangs") {
  InProcessMesh mesh(meshOf("dp=2"));
  Tensor x = randomTensor(ir::TensorType(DType::F32, {4, 3}), 1);
  Tensor half = slice(x, 0, 0, 2);
  SUBCASE("a logical op") {
    std::vector<DeviceOp> ops;
    for (int d = 0; d < 2; ++d)
      ops.push_back(makeOp(OpKind::AllGather, x,
                           {{"axis", std::string("dp")}, {"dim", int64_t(0)}},
                           x));
    CHECK(cpu::scratchBytes(*ops[0].op) == 0);
    Run run = runOnMesh(mesh, ops);
    for (const std::string &e : run.errors)
      CHECK(e.find("logical module") != std::string::npos);
  }
  SUBCASE("no communicator") {
    std::vector<DeviceOp> ops;
    for (int d = 0; d < 2; ++d)
      ops.push_back(
          makeOp(OpKind::AllGather, half, splitAttrs("dp", 0, {2, 2}, -1), x));
    Run run = runOnMesh(mesh, ops, /*withComm=*/false);
    for (const std::string &e : run.errors)
      CHECK(e.find("needs a communicator") != std::string::npos);
    // local_split of even parts needs the coordinate from a communicator.
    std::vector<DeviceOp> splits;
    for (int d = 0; d < 2; ++d)
      splits.push_back(
          makeOp(OpKind::LocalSplit, x, splitAttrs("dp", 0, {2, 2}, -1), half));
    run = runOnMesh(mesh, splits, /*withComm=*/false);
    for (const std::string &e : run.errors)
      CHECK(e.find("needs a communicator") != std::string::npos);
  }
  SUBCASE("a program of the wrong part") {
    Tensor one = slice(x, 0, 3, 1);
    std::vector<DeviceOp> ops;
    // Device 0 runs the program of part 1; device 1 is left waiting until
    // device 0's failure aborts the mesh.
    ops.push_back(
        makeOp(OpKind::AllGather, one, splitAttrs("dp", 0, {3, 1}, 1), x));
    ops.push_back(
        makeOp(OpKind::AllGather, one, splitAttrs("dp", 0, {3, 1}, 1), x));
    Run run = runOnMesh(mesh, ops);
    CHECK(run.errors[0].find("part 1, but device 0 has coordinate 0") !=
          std::string::npos);
    CHECK(run.errors[1].find("aborted: device 0 failed") != std::string::npos);
  }
  SUBCASE("parts that do not match the axis") {
    std::vector<DeviceOp> ops;
    for (int d = 0; d < 2; ++d)
      ops.push_back(makeOp(OpKind::AllGather, slice(x, 0, 0, 1),
                           splitAttrs("dp", 0, {1, 1, 1, 1}, -1), x));
    Run run = runOnMesh(mesh, ops);
    for (const std::string &e : run.errors)
      CHECK(e.find("has 4 parts, but the axis has 2 devices") !=
            std::string::npos);
  }
  SUBCASE("an axis the mesh lacks") {
    std::vector<DeviceOp> ops;
    for (int d = 0; d < 2; ++d)
      ops.push_back(
          makeOp(OpKind::AllReduce, x, {{"axis", std::string("tp")}}, x));
    Run run = runOnMesh(mesh, ops);
    for (const std::string &e : run.errors)
      CHECK(e.find("has no such axis") != std::string::npos);
  }
}

} // namespace
} // namespace mgc::backend::testing
