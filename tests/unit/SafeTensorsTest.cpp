#include "DataTestSupport.h"

#include "runtime/SafeTensors.h"

#include <doctest/doctest.h>

#include <cstring>

using namespace mgc;
using namespace mgc::runtime;
using namespace mgc::testing;

namespace {

const ir::DType kAllDTypes[] = {ir::DType::F32, ir::DType::BF16,
                                ir::DType::F16, ir::DType::F64,
                                ir::DType::I32, ir::DType::I64};

// One tensor of every dtype, plus a scalar and an empty tensor.
TensorMap sampleTensors() {
  TensorMap m;
  for (ir::DType d : kAllDTypes)
    m["t_" + ir::dtypeName(d).str()] =
        makeTensor(d, {2, 3}, [](int64_t i) { return i * 1.5 - 4; });
  m["scalar"] = makeTensor(ir::DType::F64, {}, [](int64_t) { return 0.1; });
  m["empty"] = Tensor(ir::TensorType(ir::DType::I32, {0, 5}));
  return m;
}

std::string encoded(const TensorMap &t, const StringMap &m) {
  llvm::Expected<std::string> bytes = encodeSafeTensors(t, m);
  REQUIRE(bytes);
  return *bytes;
}

// The file with its 8-byte header length replaced by `header`.
std::string withHeader(const std::string &header, const std::string &data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

std::string decodeError(const std::string &bytes) {
  llvm::Expected<SafeTensorsContents> c = decodeSafeTensors(bytes, "x.st");
  return errorText(c);
}

} // namespace

TEST_CASE("safetensors: every dtype round-trips, with and without metadata") {
  TempDir dir;
  TensorMap tensors = sampleTensors();
  for (const StringMap &meta :
       {StringMap{}, StringMap{{"step", "3"}, {"note", "h\u00e9 \"q\"\n"}}}) {
    std::string path = dir.file("rt.safetensors");
    REQUIRE(errorText(saveSafeTensors(path, tensors, meta)) == "");
    llvm::Expected<SafeTensorsContents> back = loadSafeTensors(path);
    REQUIRE(errorText(back) == "");
    CHECK(back->metadata == meta);
    REQUIRE(back->tensors.size() == tensors.size());
    for (const auto &[name, t] : tensors) {
      INFO(name);
      REQUIRE(back->tensors.count(name));
      CHECK(sameBytes(back->tensors.at(name), t));
    }
    CHECK(back->tensors.at("scalar").shape().empty());
    CHECK(back->tensors.at("t_i64").get(5) == 3.5 - 0.5); // trunc(3.5)=3
  }
  // No tensors at all is a valid file too.
  llvm::Expected<SafeTensorsContents> none =
      decodeSafeTensors(encoded({}, {}), "none");
  REQUIRE(errorText(none) == "");
  CHECK(none->tensors.empty());
}

TEST_CASE("safetensors: byte-exact files as the format specifies") {
  TensorMap one;
  one["a"] = makeTensor(ir::DType::F32, {2}, [](int64_t i) { return i + 1; });
  // 8-byte little-endian header size, compact JSON, spaces to a multiple
  // of 8, then 1.0f and 2.0f little-endian.
  const std::string json =
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  CHECK(encoded(one, {}) ==
        std::string("\x38\0\0\0\0\0\0\0", 8) + json + "  " +
            std::string("\x00\x00\x80\x3f\x00\x00\x00\x40", 8));
  const std::string jsonMeta =
      R"({"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  CHECK(encoded(one, {{"k", "v"}}) ==
        std::string("\x50\0\0\0\0\0\0\0", 8) + jsonMeta + " " +
            std::string("\x00\x00\x80\x3f\x00\x00\x00\x40", 8));

  // Names in sorted order, their bytes back to back; a scalar has shape [].
  TensorMap two;
  two["b"] = makeTensor(ir::DType::I64, {}, [](int64_t) { return 7; });
  two["a"] = makeTensor(ir::DType::F16, {1}, [](int64_t) { return 1.0; });
  const std::string json2 =
      R"({"a":{"dtype":"F16","shape":[1],"data_offsets":[0,2]},)"
      R"("b":{"dtype":"I64","shape":[],"data_offsets":[2,10]}})";
  CHECK(encoded(two, {}) == std::string("\x70\0\0\0\0\0\0\0", 8) + json2 +
                                "     " + std::string("\x00\x3c", 2) +
                                std::string("\x07\0\0\0\0\0\0\0", 8));
}

TEST_CASE("safetensors: every truncation of a file is refused") {
  TensorMap tensors;
  tensors["w"] = makeTensor(ir::DType::F32, {3}, [](int64_t i) { return i; });
  tensors["s"] = makeTensor(ir::DType::I32, {}, [](int64_t) { return 9; });
  std::string file = encoded(tensors, {{"step", "1"}});
  REQUIRE(errorText(decodeSafeTensors(file, "f")) == ""); // whole: fine
  for (size_t n = 0; n < file.size(); ++n) {
    std::string err = decodeError(file.substr(0, n));
    INFO("truncated at " << n);
    CHECK(err.find("invalid safetensors file 'x.st'") != std::string::npos);
  }
  // One byte too many is refused as well.
  CHECK(decodeError(file + "!").find("after the last tensor") !=
        std::string::npos);
}

TEST_CASE("safetensors: flipped header bytes are refused, never crash") {
  TensorMap tensors;
  tensors["w"] = makeTensor(ir::DType::F32, {3}, [](int64_t i) { return i; });
  tensors["b"] = makeTensor(ir::DType::BF16, {2}, [](int64_t i) { return i; });
  std::string file = encoded(tensors, {{"seed", "5"}});
  uint64_t headerLen = static_cast<uint8_t>(file[0]);
  // Inverting any byte of the length or the JSON makes the file invalid
  // (JSON is ASCII here; an inverted byte is not valid UTF-8 or JSON).
  for (size_t i = 0; i < 8 + headerLen; ++i) {
    std::string bad = file;
    bad[i] = static_cast<char>(~bad[i]);
    INFO("byte " << i);
    CHECK(decodeError(bad) != "");
  }
  // Any single-byte change anywhere: refused or decoded, never a crash.
  for (size_t i = 0; i < file.size(); ++i)
    for (int v : {0x00, 0x30, 0x39, 0x5b, 0x22, 0x2c, 0x20, 0x7f, 0xff}) {
      std::string bad = file;
      bad[i] = static_cast<char>(v);
      (void)decodeError(bad);
    }
}

TEST_CASE("safetensors: malformed headers are refused with the reason") {
  const std::string f4 = std::string(8, '\0'); // 8 data bytes
  auto expectError = [&](const std::string &header, const std::string &data,
                         const std::string &needle) {
    std::string err = decodeError(withHeader(header, data));
    INFO(header);
    CHECK(err.find("invalid safetensors file 'x.st'") != std::string::npos);
    CHECK(err.find(needle) != std::string::npos);
    if (err.find(needle) == std::string::npos)
      MESSAGE(err);
  };
  expectError(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})", f4,
              "not valid JSON");
  expectError(R"([1, 2])", "", "does not start with '{'");
  expectError(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}})", f4,
              "unsupported dtype 'U8'");
  expectError(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", f4,
              "shape entry");
  expectError(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", f4,
              "12 bytes, but its data offsets span 8 bytes");
  expectError(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}})", f4,
              "beyond the 8 data bytes");
  expectError(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", f4,
              "end before they begin");
  expectError(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
              R"("b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}})",
              f4, "overlap");
  expectError(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", f4,
              "belong to no tensor");
  expectError(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", f4,
              "4 bytes after the last tensor");
  expectError(R"({"a":{"dtype":"F32","shape":[2]}})", f4, "data_offsets");
  expectError(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", f4, "dtype");
  expectError(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],)"
              R"("extra":1}})",
              f4, "unknown field 'extra'");
  expectError(R"({"__metadata__":{"step":1}})", "", "is not a string");
  expectError(R"({"__metadata__":[]})", "", "__metadata__");
  expectError(R"({"a":[]})", "", "is not an object");
  expectError(R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],)"
              R"("data_offsets":[0,8]}})",
              f4, "overflows");

  // Header length beyond the file, and absurdly large.
  std::string lying = withHeader("{}", "");
  lying[0] = 100;
  CHECK(decodeError(lying).find("exceeds the 2 bytes") != std::string::npos);
  std::string huge(8, '\xff');
  CHECK(decodeError(huge + "{}").find("header length") != std::string::npos);
  CHECK(decodeError("abc").find("too short") != std::string::npos);
}

TEST_CASE("safetensors: names the writer refuses, files that are missing") {
  TempDir dir;
  TensorMap bad;
  bad["__metadata__"] = Tensor(ir::TensorType(ir::DType::F32, {1}));
  CHECK(errorText(saveSafeTensors(dir.file("x"), bad, {})) != "");
  TensorMap badUtf8;
  badUtf8["\xff"] = Tensor(ir::TensorType(ir::DType::F32, {1}));
  CHECK(errorText(encodeSafeTensors(badUtf8, {}).takeError()).find("UTF-8") !=
        std::string::npos);
  CHECK(!llvm::sys::fs::exists(dir.file("x")));
  llvm::Expected<SafeTensorsContents> missing =
      loadSafeTensors(dir.file("nope.safetensors"));
  std::string err = errorText(missing);
  CHECK(err.find("cannot read safetensors file '") != std::string::npos);
  CHECK(err.find("nope.safetensors") != std::string::npos);
}
