// Files written here load in NumPy and the Python safetensors package, and
// files they write load here. Skipped (with a message) where python3 cannot
// import numpy and safetensors (`pip install numpy safetensors`).
#include "DataTestSupport.h"

#include "runtime/Checkpoint.h"
#include "runtime/DataNpy.h"

#include <doctest/doctest.h>

#include <cstdlib>

using namespace mgc;
using namespace mgc::runtime;
using namespace mgc::testing;

namespace {

bool havePython() {
  static bool have = pythonHas("numpy, safetensors");
  if (!have)
    MESSAGE("skipped: python3 cannot import numpy and safetensors "
            "(pip install numpy safetensors)");
  return have;
}

// Runs a Python script; returns its exit status (0: its checks passed).
int runPython(const TempDir &dir, const std::string &script,
              const std::string &args) {
  std::string path = dir.file("check.py");
  writeBytes(path, script);
  std::string cmd = "python3 '" + path + "' " + args + " 2>&1";
  int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

double value(int64_t i) { return i * 1.5 - 4; } // exact in every dtype

const char *kPrelude = R"(
import sys, json, struct
import numpy as np
def expect(dtype, shape):
    n = int(np.prod(shape)) if shape else 1
    v = np.arange(n) * 1.5 - 4
    if np.dtype(dtype).kind == 'i':
        v = np.trunc(v)
    return v.astype(dtype).reshape(shape)
def check(cond, what):
    if not cond:
        print('mismatch:', what)
        sys.exit(1)
)";

} // namespace

TEST_CASE("interop: Python safetensors loads our checkpoint") {
  if (!havePython())
    return;
  TempDir dir;
  Checkpoint c;
  c.info.step = 10;
  c.info.optimizer = "adamw";
  c.info.seed = 42;
  c.info.sourceHash = hashModelSource("m");
  for (ir::DType d : {ir::DType::F32, ir::DType::F16, ir::DType::F64,
                      ir::DType::I32, ir::DType::I64, ir::DType::BF16})
    c.tensors["t." + ir::dtypeName(d).str()] = makeTensor(d, {2, 3}, value);
  c.tensors["scalar"] = makeTensor(ir::DType::F32, {}, value);
  std::string path = dir.file("ckpt.safetensors");
  REQUIRE(errorText(saveCheckpoint(path, c)) == "");
  std::string script = std::string(kPrelude) + R"(
from safetensors import safe_open, deserialize
path = sys.argv[1]
with safe_open(path, framework='np') as f:
    meta = f.metadata()
    check(meta['step'] == '10' and meta['optimizer'] == 'adamw' and
          meta['seed'] == '42' and meta['format'] == 'mgc' and
          len(meta['source_hash']) == 64, meta)
    names = sorted(f.keys())
    check(names == ['scalar', 't.bf16', 't.f16', 't.f32', 't.f64', 't.i32',
                    't.i64'], names)
    for name, dt in [('t.f32', np.float32), ('t.f16', np.float16),
                     ('t.f64', np.float64), ('t.i32', np.int32),
                     ('t.i64', np.int64)]:
        t = f.get_tensor(name)
        check(t.dtype == dt and np.array_equal(t, expect(dt, (2, 3))), name)
    s = f.get_tensor('scalar')
    check(s.shape == () and s == np.float32(-4), 'scalar')
# NumPy has no bfloat16: check its raw bits, the top half of an f32.
raw = dict(deserialize(open(path, 'rb').read()))['t.bf16']
check(raw['dtype'] == 'BF16' and raw['shape'] == [2, 3], raw)
bits = np.frombuffer(bytes(raw['data']), dtype='<u2').astype('<u4') << 16
check(np.array_equal(bits.view('<f4'), expect(np.float32, (6,))), 'bf16')
)";
  CHECK(runPython(dir, script, "'" + path + "'") == 0);
}

TEST_CASE("interop: we load what Python safetensors writes") {
  if (!havePython())
    return;
  TempDir dir;
  std::string path = dir.file("py.safetensors");
  std::string script = std::string(kPrelude) + R"(
from safetensors.numpy import save_file
ts = {name: expect(dt, shape) for name, dt, shape in [
    ('w', np.float32, (3, 2)), ('h', np.float16, (4,)),
    ('d', np.float64, ()), ('i', np.int32, (5,)), ('l', np.int64, (2, 2)),
    ('e', np.float32, (0, 3))]}
save_file(ts, sys.argv[1], metadata={'step': '7', 'note': 'from python'})
)";
  REQUIRE(runPython(dir, script, "'" + path + "'") == 0);
  llvm::Expected<Checkpoint> c = loadCheckpoint(path);
  REQUIRE(errorText(c) == "");
  CHECK(c->info.step == 7);
  CHECK(c->info.extra.at("note") == "from python");
  struct Want {
    const char *name;
    ir::DType dtype;
    std::vector<int64_t> shape;
  };
  for (const Want &w :
       {Want{"w", ir::DType::F32, {3, 2}}, Want{"h", ir::DType::F16, {4}},
        Want{"d", ir::DType::F64, {}}, Want{"i", ir::DType::I32, {5}},
        Want{"l", ir::DType::I64, {2, 2}}, Want{"e", ir::DType::F32, {0, 3}}}) {
    INFO(w.name);
    REQUIRE(c->tensors.count(w.name));
    CHECK(
        sameBytes(c->tensors.at(w.name), makeTensor(w.dtype, w.shape, value)));
  }
}

TEST_CASE("interop: NumPy reads our .npy files and we read NumPy's") {
  if (!havePython())
    return;
  TempDir dir;
  REQUIRE(errorText(writeNpy(dir.file("ours_f32.npy"),
                             makeTensor(ir::DType::F32, {2, 3}, value))) == "");
  REQUIRE(errorText(writeNpy(dir.file("ours_i64.npy"),
                             makeTensor(ir::DType::I64, {5}, value))) == "");
  REQUIRE(errorText(writeNpy(dir.file("ours_f16.npy"),
                             makeTensor(ir::DType::F16, {}, value))) == "");
  std::string script = std::string(kPrelude) + R"(
d = sys.argv[1]
a = np.load(d + '/ours_f32.npy'); check(np.array_equal(a, expect(np.float32, (2, 3))) and a.dtype == np.float32, 'f32')
a = np.load(d + '/ours_i64.npy'); check(np.array_equal(a, expect(np.int64, (5,))) and a.dtype == np.int64, 'i64')
a = np.load(d + '/ours_f16.npy'); check(a.shape == () and a == np.float16(-4), 'f16')
np.save(d + '/np_u8.npy', np.arange(10, dtype=np.uint8) * 25)
np.save(d + '/np_f8.npy', expect(np.float64, (4, 3)))
np.save(d + '/np_fortran.npy', np.asfortranarray(expect(np.float32, (3, 4))))
np.lib.format.write_array(open(d + '/np_v2.npy', 'wb'), expect(np.int32, (7,)), version=(2, 0))
np.lib.format.write_array(open(d + '/np_v3.npy', 'wb'), expect(np.float32, (2,)), version=(3, 0))
)";
  REQUIRE(runPython(dir, script, "'" + dir.path() + "'") == 0);

  llvm::Expected<NpyArray> u8 = readNpy(dir.file("np_u8.npy"));
  REQUIRE(errorText(u8) == "");
  CHECK(u8->dtype == NpyDType::U8);
  Tensor labels(ir::TensorType(ir::DType::I32, {10}));
  CHECK_FALSE(llvm::errorToBool(copyNpyElements(*u8, 0, 10, labels, 0)));
  CHECK(labels.get(9) == 225);

  llvm::Expected<NpyArray> f8 = readNpy(dir.file("np_f8.npy"));
  REQUIRE(errorText(f8) == "");
  Tensor t(ir::TensorType(ir::DType::F64, {4, 3}));
  CHECK_FALSE(llvm::errorToBool(copyNpyElements(*f8, 0, 12, t, 0)));
  CHECK(sameBytes(t, makeTensor(ir::DType::F64, {4, 3}, value)));

  for (const char *name : {"np_v2.npy", "np_v3.npy"}) {
    llvm::Expected<NpyArray> a = readNpy(dir.file(name));
    CHECK(errorText(a) == "");
  }
  llvm::Expected<NpyArray> fortran = readNpy(dir.file("np_fortran.npy"));
  CHECK(errorText(fortran).find("Fortran") != std::string::npos);
}
