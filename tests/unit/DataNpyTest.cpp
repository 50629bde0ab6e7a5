#include "DataTestSupport.h"

#include "runtime/DataNpy.h"

#include <doctest/doctest.h>

using namespace mgc;
using namespace mgc::runtime;
using namespace mgc::testing;

namespace {

llvm::Expected<NpyArray> parseBytes(const std::string &bytes) {
  return parseNpy(bytes, "a.npy");
}

// A file with a hand-written header dictionary and format version.
std::string npyFile(const std::string &dict, int major,
                    const std::string &data) {
  std::string header = dict + "\n";
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  size_t lenBytes = major == 1 ? 2 : 4;
  for (size_t i = 0; i < lenBytes; ++i)
    out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + data;
}

std::string f32Bytes(std::initializer_list<float> values) {
  std::string s;
  for (float v : values)
    s.append(reinterpret_cast<const char *>(&v), 4);
  return s;
}

} // namespace

TEST_CASE("npy: tensors of every storable type round-trip") {
  TempDir dir;
  for (ir::DType d : {ir::DType::F32, ir::DType::F16, ir::DType::F64,
                      ir::DType::I32, ir::DType::I64}) {
    for (std::vector<int64_t> shape :
         {std::vector<int64_t>{}, {5}, {2, 3}, {2, 0, 4}}) {
      Tensor t = makeTensor(d, shape, [](int64_t i) { return i * 0.5 - 2; });
      std::string path = dir.file("t.npy");
      REQUIRE(errorText(writeNpy(path, t)) == "");
      // The data starts 64-aligned, as NumPy writes it.
      std::string bytes = readBytes(path);
      CHECK((bytes.size() - t.nbytes()) % 64 == 0);
      llvm::Expected<NpyArray> a = readNpy(path);
      REQUIRE(errorText(a) == "");
      CHECK(a->dtype == *npyDTypeOf(d));
      CHECK(a->shape == ir::Shape(shape.begin(), shape.end()));
      Tensor back(t.type());
      CHECK_FALSE(
          llvm::errorToBool(copyNpyElements(*a, 0, a->numel(), back, 0)));
      CHECK(sameBytes(back, t));
    }
  }
  CHECK(errorText(writeNpy(dir.file("b.npy"),
                           Tensor(ir::TensorType(ir::DType::BF16, {2}))))
            .find("no bf16") != std::string::npos);
}

TEST_CASE("npy: headers of versions 1, 2 and 3 and Python's spellings") {
  std::string data = f32Bytes({1, 2, 3, 4, 5, 6});
  for (int major : {1, 2, 3}) {
    llvm::Expected<NpyArray> a = parseBytes(
        npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                major, data));
    REQUIRE(errorText(a) == "");
    CHECK(a->shape == ir::Shape{2, 3});
  }
  // Double quotes, no trailing comma, keys in another order, 1-tuples,
  // Python 2 long literals.
  llvm::Expected<NpyArray> b = parseBytes(npyFile(
      R"({"shape": (6L,), "fortran_order": False, "descr": "<f4"})", 1, data));
  REQUIRE(errorText(b) == "");
  CHECK(b->shape == ir::Shape{6});
  llvm::Expected<NpyArray> u8 = parseBytes(
      npyFile("{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }", 1,
              std::string("\x01\x02\xff", 3)));
  REQUIRE(errorText(u8) == "");
  Tensor labels(ir::TensorType(ir::DType::I32, {3}));
  CHECK_FALSE(llvm::errorToBool(copyNpyElements(*u8, 0, 3, labels, 0)));
  CHECK(labels.get(2) == 255);
  llvm::Expected<NpyArray> u16 = parseBytes(
      npyFile("{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }", 1,
              std::string("\xff\xff\x01\x00", 4)));
  REQUIRE(errorText(u16) == "");
  Tensor ids(ir::TensorType(ir::DType::I64, {2}));
  CHECK_FALSE(llvm::errorToBool(copyNpyElements(*u16, 0, 2, ids, 0)));
  CHECK(ids.get(0) == 65535);
  CHECK(ids.get(1) == 1);
  llvm::Expected<NpyArray> f2 = parseBytes(
      npyFile("{'descr': '<f2', 'fortran_order': False, 'shape': (1,), }", 1,
              std::string("\x00\x3c", 2)));
  REQUIRE(errorText(f2) == "");
  Tensor widened(ir::TensorType(ir::DType::F32, {1}));
  CHECK_FALSE(llvm::errorToBool(copyNpyElements(*f2, 0, 1, widened, 0)));
  CHECK(widened.get(0) == 1.0);
}

TEST_CASE("npy: a header too long for version 1.0 is written as 2.0") {
  std::vector<int64_t> shape(25000, 1); // "1, " x 25000 > 65535 bytes
  shape[0] = 2;
  std::string file = encodeNpy(NpyDType::F32, shape, f32Bytes({7, 8}));
  CHECK(file[6] == 2);
  CHECK(file.size() % 64 == 8); // header 64-aligned, then 8 data bytes
  llvm::Expected<NpyArray> a = parseBytes(file);
  REQUIRE(errorText(a) == "");
  CHECK(a->shape.size() == 25000);
  CHECK(a->numel() == 2);
  CHECK(encodeNpy(NpyDType::F32, {2}, f32Bytes({7, 8}))[6] == 1);
}

TEST_CASE("npy: exact conversions only") {
  CHECK(npyConvertsExactly(NpyDType::U8, ir::DType::I32));
  CHECK(npyConvertsExactly(NpyDType::F32, ir::DType::F64));
  CHECK_FALSE(npyConvertsExactly(NpyDType::F64, ir::DType::F32));
  CHECK_FALSE(npyConvertsExactly(NpyDType::I64, ir::DType::I32));
  CHECK_FALSE(npyConvertsExactly(NpyDType::F32, ir::DType::I32));
  CHECK_FALSE(npyConvertsExactly(NpyDType::I32, ir::DType::F32));
}

TEST_CASE("npy: unsupported and corrupt files are refused with the reason") {
  std::string data = f32Bytes({1, 2});
  auto expectError = [&](const std::string &file, const std::string &needle) {
    llvm::Expected<NpyArray> a = parseBytes(file);
    std::string err = errorText(a);
    INFO(err);
    CHECK(err.find("invalid .npy file 'a.npy'") != std::string::npos);
    CHECK(err.find(needle) != std::string::npos);
  };
  expectError(npyFile("{'descr': '<f4', 'fortran_order': True, "
                      "'shape': (2,), }",
                      1, data),
              "Fortran");
  expectError(npyFile("{'descr': '>f4', 'fortran_order': False, "
                      "'shape': (2,), }",
                      1, data),
              "dtype '>f4' is not supported");
  expectError(npyFile("{'descr': '<c8', 'fortran_order': False, "
                      "'shape': (1,), }",
                      1, data),
              "dtype '<c8'");
  expectError(npyFile("{'descr': [('a', '<f4')], 'fortran_order': False, "
                      "'shape': (2,), }",
                      1, data),
              "'descr'");
  expectError(npyFile("{'descr': '<f4', 'fortran_order': False, "
                      "'shape': (3,), }",
                      1, data),
              "needs 12 data bytes but the file has 8 (truncated)");
  expectError(npyFile("{'descr': '<f4', 'fortran_order': False, "
                      "'shape': (1,), }",
                      1, data),
              "needs 4 data bytes but the file has 8");
  expectError(npyFile("{'descr': '<f4', 'shape': (2,), }", 1, data), "lacks");
  expectError(npyFile("{'descr': '<f4', 'fortran_order': False, "
                      "'shape': (2,), 'x': 1}",
                      1, data),
              "'x'");
  expectError(npyFile("{'descr': '<f4', 'fortran_order': False, "
                      "'shape': (-2,), }",
                      1, data),
              "'shape'");
  expectError(npyFile("{'descr': '<f4', 'fortran_order': False, "
                      "'shape': (2,), 'descr': '<f4'}",
                      1, data),
              "twice");
  expectError(npyFile("{'descr': '<f4'", 1, data), "header");
  expectError(npyFile("{'descr': '<f4', 'fortran_order': False, "
                      "'shape': (2,), }",
                      4, data),
              "format version 4.0");
  expectError("PK\x03\x04 not an npy file", "magic string");

  // Every truncation of a valid file is refused; no byte change crashes.
  std::string file = encodeNpy(NpyDType::F32, {2}, data);
  for (size_t n = 0; n < file.size(); ++n) {
    llvm::Expected<NpyArray> a = parseBytes(file.substr(0, n));
    CHECK(errorText(a) != "");
  }
  for (size_t i = 0; i < file.size(); ++i)
    for (int v : {0x00, 0x28, 0x29, 0x2c, 0x27, 0x39, 0xff}) {
      std::string bad = file;
      bad[i] = static_cast<char>(v);
      llvm::Expected<NpyArray> a = parseBytes(bad);
      (void)errorText(a);
    }
}

TEST_CASE("npy: a missing file is named") {
  TempDir dir;
  llvm::Expected<NpyArray> a = readNpy(dir.file("train_x.npy"));
  std::string err = errorText(a);
  CHECK(err.find("cannot read .npy file '") != std::string::npos);
  CHECK(err.find("train_x.npy") != std::string::npos);
}
