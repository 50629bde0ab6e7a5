#include "DataTestSupport.h"

#include "runtime/DataArrays.h"
#include "runtime/DataNpy.h"
#include "runtime/DataPrefetch.h"
#include "runtime/DataSynthetic.h"
#include "runtime/DataTokens.h"
#include "support/Random.h"

#include <doctest/doctest.h>

#include <chrono>
#include <cstring>
#include <numeric>
#include <set>
#include <thread>

using namespace mgc;
using namespace mgc::runtime;
using namespace mgc::testing;

namespace {

InputSpec spec(const char *name, ir::DType dtype,
               std::initializer_list<int64_t> shape) {
  return {name, ir::TensorType(dtype, shape)};
}

std::vector<Batch> take(BatchSource &source, int n) {
  std::vector<Batch> out;
  for (int i = 0; i < n; ++i) {
    Batch b;
    REQUIRE(errorText(source.next(b)) == "");
    out.push_back(std::move(b));
  }
  return out;
}

bool sameBatch(const Batch &a, const Batch &b) {
  if (a.size() != b.size())
    return false;
  for (const auto &[name, t] : a)
    if (!b.count(name) || !sameBytes(t, b.at(name)))
      return false;
  return true;
}

// Resuming at step k gives the batches of an uninterrupted run from k on.
void checkResume(BatchSource &fresh, BatchSource &resumed, int k, int n) {
  std::vector<Batch> all = take(fresh, k + n);
  REQUIRE(errorText(resumed.seek(k)) == "");
  CHECK(resumed.position() == k);
  std::vector<Batch> tail = take(resumed, n);
  for (int i = 0; i < n; ++i)
    CHECK(sameBatch(all[k + i], tail[i]));
}

std::unique_ptr<BatchSource>
orFail(llvm::Expected<std::unique_ptr<BatchSource>> source) {
  REQUIRE(errorText(source) == "");
  return std::move(*source);
}

// x row r = [r, r + 0.5]; y row r = r (u8 labels).
void writeRows(const TempDir &dir, int64_t rows) {
  Tensor x = makeTensor(ir::DType::F32, {rows, 2},
                        [](int64_t i) { return i / 2 + (i % 2) * 0.5; });
  REQUIRE(errorText(writeNpy(dir.file("x.npy"), x)) == "");
  std::string labels;
  for (int64_t r = 0; r < rows; ++r)
    labels += static_cast<char>(r);
  REQUIRE(errorText(
              writeNpy(dir.file("y.npy"), NpyDType::U8, {rows}, labels)) == "");
}

std::vector<InputSpec> rowInputs(int64_t batch) {
  return {spec("x", ir::DType::F32, {batch, 2}),
          spec("y", ir::DType::I32, {batch})};
}

std::string arrayError(std::vector<InputSpec> inputs,
                       std::vector<ArrayBinding> bindings) {
  llvm::Expected<std::unique_ptr<BatchSource>> s =
      makeArraySource(std::move(inputs), std::move(bindings), {});
  return errorText(s);
}

} // namespace

TEST_CASE("data: synthetic batches are seeded, in range, resumable") {
  std::vector<InputSpec> inputs = {spec("x", ir::DType::F32, {8, 16}),
                                   spec("y", ir::DType::I32, {8}),
                                   spec("h", ir::DType::BF16, {4})};
  SyntheticOptions options;
  options.seed = 7;
  options.intRange["y"] = 10;
  auto a = orFail(makeSyntheticSource(inputs, options));
  auto b = orFail(makeSyntheticSource(inputs, options));
  std::vector<Batch> first = take(*a, 3);
  CHECK(sameBatch(first[0], take(*b, 1)[0])); // same seed, same data
  CHECK_FALSE(sameBatch(first[0], first[1])); // steps differ
  options.seed = 8;
  auto c = orFail(makeSyntheticSource(inputs, options));
  CHECK_FALSE(sameBatch(first[0], take(*c, 1)[0]));

  std::set<int64_t> labels;
  double sum = 0, sq = 0;
  for (const Batch &batch : first) {
    CHECK(batch.at("x").type() == inputs[0].type);
    for (int64_t i = 0; i < 8; ++i) {
      double v = batch.at("y").get(i);
      CHECK(v >= 0);
      CHECK(v < 10);
      labels.insert(static_cast<int64_t>(v));
    }
    for (int64_t i = 0; i < 128; ++i) {
      sum += batch.at("x").get(i);
      sq += batch.at("x").get(i) * batch.at("x").get(i);
    }
  }
  CHECK(labels.size() > 5);
  CHECK(std::abs(sum / 384) < 0.2);     // mean of normal(0, 1)
  CHECK(std::abs(sq / 384 - 1) < 0.25); // variance

  auto fresh = orFail(makeSyntheticSource(inputs, options));
  auto resumed = orFail(makeSyntheticSource(inputs, options));
  checkResume(*fresh, *resumed, 5, 3);

  // Integer inputs need a range; ranges name real integer inputs.
  CHECK(errorText(makeSyntheticSource(inputs, {})).find("integer input 'y'") !=
        std::string::npos);
  SyntheticOptions badName;
  badName.intRange = {{"y", 10}, {"z", 3}};
  CHECK(errorText(makeSyntheticSource(inputs, badName)).find("input 'z'") !=
        std::string::npos);
  SyntheticOptions floatRange;
  floatRange.intRange = {{"y", 10}, {"x", 3}};
  CHECK(errorText(makeSyntheticSource(inputs, floatRange))
            .find("not an integer input") != std::string::npos);
}

TEST_CASE("data: a synthetic batch made on several threads is the element "
          "formula's") {
  // 3 x 2^20 + 5 elements: split over threads, with a ragged last chunk;
  // a bf16 and an integer input of the same size beside it.
  const int64_t rows = 3, cols = (1 << 20) + 5, n = rows * cols;
  std::vector<InputSpec> inputs = {spec("x", ir::DType::F32, {rows, cols}),
                                   spec("h", ir::DType::BF16, {rows, cols}),
                                   spec("y", ir::DType::I32, {rows, cols})};
  SyntheticOptions options;
  options.seed = 3;
  options.stddev = 0.5;
  options.intRange["y"] = 1000;
  auto source = orFail(makeSyntheticSource(inputs, options));
  std::vector<Batch> batches = take(*source, 2);
  const Batch &b = batches[1]; // step 1: elements n .. 2n - 1 of the streams
  uint64_t base = static_cast<uint64_t>(n);
  std::vector<double> z(static_cast<size_t>(n));
  for (const char *name : {"x", "h"}) {
    INFO(name);
    standardNormals(options.seed,
                    hashName(std::string("data.synthetic.") + name), base, n,
                    z.data());
    Tensor want = Tensor::uninitialized(b.at(name).type());
    for (int64_t i = 0; i < n; ++i)
      want.set(i, options.stddev * z[static_cast<size_t>(i)]);
    CHECK(std::memcmp(want.data(), b.at(name).data(), want.nbytes()) == 0);
  }
  uint64_t stream = hashName("data.synthetic.y");
  int64_t mismatched = 0;
  for (int64_t i = 0; i < n; ++i)
    mismatched += b.at("y").as<int32_t>()[i] !=
                  uniformBelow(randomBits(3, stream, base + i), 1000);
  CHECK(mismatched == 0);
}

TEST_CASE("data: npy rows in order, last partial batch dropped") {
  TempDir dir;
  writeRows(dir, 10);
  ArraySourceOptions options;
  options.shuffle = false;
  auto s = orFail(makeArraySource(
      rowInputs(4), {{"x", dir.file("x.npy")}, {"y", dir.file("y.npy")}},
      options));
  CHECK(s->batchesPerEpoch() == 2);
  std::vector<Batch> batches = take(*s, 3);
  // Rows 0-3, 4-7, then (rows 8, 9 dropped) 0-3 again.
  for (int k = 0; k < 3; ++k)
    for (int64_t r = 0; r < 4; ++r) {
      int64_t row = (k % 2) * 4 + r;
      CHECK(batches[k].at("y").get(r) == row);
      CHECK(batches[k].at("x").get(2 * r) == row);
      CHECK(batches[k].at("x").get(2 * r + 1) == row + 0.5);
    }
}

TEST_CASE("data: npy shuffling is seeded and per epoch") {
  TempDir dir;
  writeRows(dir, 12);
  auto make = [&](uint64_t seed) {
    ArraySourceOptions options;
    options.seed = seed;
    return orFail(makeArraySource(
        rowInputs(4), {{"y", dir.file("y.npy")}, {"x", dir.file("x.npy")}},
        options));
  };
  auto s = make(1);
  std::vector<Batch> batches = take(*s, 6); // two epochs of three batches
  std::vector<int64_t> epoch0, epoch1;
  for (int k = 0; k < 6; ++k)
    for (int64_t r = 0; r < 4; ++r) {
      int64_t row = static_cast<int64_t>(batches[k].at("y").get(r));
      // x and y stay paired.
      CHECK(batches[k].at("x").get(2 * r) == row);
      (k < 3 ? epoch0 : epoch1).push_back(row);
    }
  // Each epoch visits every row once, in a different order.
  CHECK(std::set<int64_t>(epoch0.begin(), epoch0.end()).size() == 12);
  CHECK(std::set<int64_t>(epoch1.begin(), epoch1.end()).size() == 12);
  CHECK(epoch0 != epoch1);
  std::vector<int64_t> sorted(12);
  std::iota(sorted.begin(), sorted.end(), 0);
  CHECK(epoch0 != sorted);
  // Same seed, same order; another seed, another order.
  auto again = make(1);
  CHECK(sameBatch(take(*again, 1)[0], batches[0]));
  auto other = make(2);
  CHECK_FALSE(sameBatch(take(*other, 1)[0], batches[0]));
  // Resume in the middle of the second epoch.
  auto fresh = make(1), resumed = make(1);
  checkResume(*fresh, *resumed, 4, 4);
}

TEST_CASE("data: npy files that do not fit the model are named") {
  TempDir dir;
  writeRows(dir, 10);
  std::vector<ArrayBinding> both = {{"x", dir.file("x.npy")},
                                    {"y", dir.file("y.npy")}};
  // Wrong element type: f64 data for an f32 input.
  REQUIRE(errorText(writeNpy(
              dir.file("x64.npy"),
              Tensor(ir::TensorType(ir::DType::F64, {100, 784})))) == "");
  std::string err = arrayError({spec("x", ir::DType::F32, {64, 784})},
                               {{"x", dir.file("x64.npy")}});
  CHECK(err.find("x64.npy' holds f64[100, 784] but input 'x' expects "
                 "f32[B, 784] with B = 64") != std::string::npos);
  // Wrong row shape.
  err = arrayError({spec("x", ir::DType::F32, {4, 3})},
                   {{"x", dir.file("x.npy")}});
  CHECK(err.find("holds f32[10, 2] but input 'x' expects f32[B, 3] with "
                 "B = 4") != std::string::npos);
  // Fewer rows than one batch.
  err = arrayError(rowInputs(16), both);
  CHECK(err.find("10 rows, fewer than one batch of 16") != std::string::npos);
  // Arrays of different lengths.
  REQUIRE(errorText(writeNpy(dir.file("y5.npy"), NpyDType::U8, {5}, "abcde")) ==
          "");
  err = arrayError(rowInputs(4),
                   {{"x", dir.file("x.npy")}, {"y", dir.file("y5.npy")}});
  CHECK(err.find("y5.npy' has 5 rows but") != std::string::npos);
  // Names: unknown input, unbound input, bound twice.
  err = arrayError(rowInputs(4), {{"x", dir.file("x.npy")},
                                  {"y", dir.file("y.npy")},
                                  {"z", dir.file("y.npy")}});
  CHECK(err.find("no such input (its inputs: 'x', 'y')") != std::string::npos);
  err = arrayError(rowInputs(4), {{"x", dir.file("x.npy")}});
  CHECK(err.find("input 'y' (i32[4]) has no data file") != std::string::npos);
  err = arrayError(rowInputs(4), {{"x", dir.file("x.npy")},
                                  {"x", dir.file("x.npy")},
                                  {"y", dir.file("y.npy")}});
  CHECK(err.find("given data twice") != std::string::npos);
  // Missing, short and corrupt files.
  err = arrayError(rowInputs(4),
                   {{"x", dir.file("missing.npy")}, {"y", dir.file("y.npy")}});
  CHECK(err.find("cannot read .npy file '") != std::string::npos);
  CHECK(err.find("missing.npy") != std::string::npos);
  std::string bytes = readBytes(dir.file("x.npy"));
  writeBytes(dir.file("short.npy"), bytes.substr(0, bytes.size() - 3));
  err = arrayError(rowInputs(4),
                   {{"x", dir.file("short.npy")}, {"y", dir.file("y.npy")}});
  CHECK(err.find("short.npy") != std::string::npos);
  CHECK(err.find("truncated") != std::string::npos);
  writeBytes(dir.file("junk.npy"), "this is not an array");
  err = arrayError(rowInputs(4),
                   {{"x", dir.file("junk.npy")}, {"y", dir.file("y.npy")}});
  CHECK(err.find("junk.npy") != std::string::npos);
  CHECK(err.find("magic") != std::string::npos);
}

TEST_CASE("data: text tokens in windows of T + 1, shuffled per epoch") {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 41; ++i)
    text += static_cast<char>('A' + i % 26);
  writeBytes(dir.file("corpus.txt"), text);
  std::vector<InputSpec> inputs = {spec("idx", ir::DType::I32, {2, 5}),
                                   spec("targets", ir::DType::I32, {2, 5}),
                                   spec("pos", ir::DType::I64, {5})};
  TokenSourceOptions options;
  options.path = dir.file("corpus.txt");
  options.positionsInput = "pos";
  options.seed = 3;
  options.shuffle = false;
  auto s = orFail(makeTokenSource(inputs, options));
  // 41 tokens: windows start at 0, 5, ..., 35 (8 of them), 4 batches.
  CHECK(s->batchesPerEpoch() == 4);
  std::vector<Batch> batches = take(*s, 5);
  for (int k = 0; k < 5; ++k)
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t t = 0; t < 5; ++t) {
        int64_t start = ((k % 4) * 2 + b) * 5;
        CHECK(batches[k].at("idx").get(b * 5 + t) ==
              static_cast<unsigned char>(text[start + t]));
        CHECK(batches[k].at("targets").get(b * 5 + t) ==
              static_cast<unsigned char>(text[start + t + 1]));
      }
  for (int64_t t = 0; t < 5; ++t)
    CHECK(batches[0].at("pos").get(t) == t);

  options.shuffle = true;
  auto shuffled = orFail(makeTokenSource(inputs, options));
  std::vector<Batch> sb = take(*shuffled, 8); // two epochs
  std::vector<int64_t> starts0, starts1;
  for (int k = 0; k < 8; ++k)
    for (int64_t b = 0; b < 2; ++b) {
      // The window's first token identifies it (the text repeats after 26,
      // but windows 0..7 start at distinct letters A F K P U Z(=A+25) E J).
      int64_t first = static_cast<int64_t>(sb[k].at("idx").get(b * 5));
      (k < 4 ? starts0 : starts1).push_back(first);
      // Targets stay the inputs shifted by one.
      for (int64_t t = 0; t + 1 < 5; ++t)
        CHECK(sb[k].at("targets").get(b * 5 + t) ==
              sb[k].at("idx").get(b * 5 + t + 1));
    }
  CHECK(std::set<int64_t>(starts0.begin(), starts0.end()).size() == 8);
  CHECK(std::set<int64_t>(starts1.begin(), starts1.end()).size() == 8);
  CHECK(starts0 != starts1);
  auto fresh = orFail(makeTokenSource(inputs, options));
  auto resumed = orFail(makeTokenSource(inputs, options));
  checkResume(*fresh, *resumed, 6, 4);
}

TEST_CASE("data: binary token files of uint16 and int32") {
  TempDir dir;
  std::string u16, i32;
  for (int i = 0; i < 9; ++i) {
    uint16_t a = static_cast<uint16_t>(60000 + i);
    int32_t b = 100000 * i;
    u16.append(reinterpret_cast<const char *>(&a), 2);
    i32.append(reinterpret_cast<const char *>(&b), 4);
  }
  writeBytes(dir.file("t16.bin"), u16);
  writeBytes(dir.file("t32.bin"), i32);
  std::vector<InputSpec> inputs = {spec("x", ir::DType::I64, {1, 4}),
                                   spec("y", ir::DType::I64, {1, 4})};
  TokenSourceOptions options;
  options.tokensInput = "x";
  options.targetsInput = "y";
  options.shuffle = false;
  options.path = dir.file("t16.bin");
  options.format = TokenFileFormat::U16;
  auto s16 = orFail(makeTokenSource(inputs, options));
  Batch b16 = take(*s16, 2)[1]; // second window: tokens 4..8
  CHECK(b16.at("x").get(0) == 60004);
  CHECK(b16.at("y").get(3) == 60008);
  options.path = dir.file("t32.bin");
  options.format = TokenFileFormat::I32;
  auto s32 = orFail(makeTokenSource(inputs, options));
  Batch b32 = take(*s32, 1)[0];
  CHECK(b32.at("x").get(1) == 100000);
  CHECK(b32.at("y").get(3) == 400000);

  // A vocabulary check reports the token and its position.
  options.vocabSize = 300000;
  auto checked = orFail(makeTokenSource(inputs, options));
  Batch ok;
  CHECK(errorText(checked->next(ok)) != ""); // window 0 holds 300000
  CHECK(checked->position() == 0);
  Batch bad;
  std::string err = errorText(checked->next(bad));
  CHECK(err.find("t32.bin': token 300000 at position 3 is outside the "
                 "vocabulary [0, 300000)") != std::string::npos);
}

TEST_CASE("data: token files that are missing, short or odd are refused") {
  TempDir dir;
  std::vector<InputSpec> inputs = {spec("idx", ir::DType::I32, {2, 8}),
                                   spec("targets", ir::DType::I32, {2, 8})};
  TokenSourceOptions options;
  auto errorFor = [&](const std::string &content, TokenFileFormat format) {
    writeBytes(dir.file("tok"), content);
    options.path = dir.file("tok");
    options.format = format;
    return errorText(makeTokenSource(inputs, options));
  };
  CHECK(errorFor(std::string(17, 'a'), TokenFileFormat::TextBytes)
            .find("holds 17 tokens: 2 windows of 9 tokens, fewer than one "
                  "batch of 2") == std::string::npos);
  CHECK(errorFor(std::string(17, 'a'), TokenFileFormat::TextBytes) == "");
  CHECK(errorFor(std::string(16, 'a'), TokenFileFormat::TextBytes)
            .find("holds 16 tokens: 1 windows of 9 tokens, fewer than one "
                  "batch of 2") != std::string::npos);
  CHECK(errorFor(std::string(101, 'a'), TokenFileFormat::U16)
            .find("101 bytes, not a whole number of 2-byte tokens") !=
        std::string::npos);
  CHECK(errorFor("", TokenFileFormat::I32).find("holds 0 tokens") !=
        std::string::npos);
  options.path = dir.file("nope.bin");
  std::string err = errorText(makeTokenSource(inputs, options));
  CHECK(err.find("cannot read token file '") != std::string::npos);
  CHECK(err.find("nope.bin") != std::string::npos);

  // Inputs that do not fit.
  writeBytes(dir.file("tok"), std::string(100, 'a'));
  options.path = dir.file("tok");
  options.format = TokenFileFormat::TextBytes;
  CHECK(errorText(makeTokenSource({spec("idx", ir::DType::F32, {2, 8}),
                                   spec("targets", ir::DType::I32, {2, 8})},
                                  options))
            .find("integer [B, T]") != std::string::npos);
  CHECK(errorText(makeTokenSource({spec("idx", ir::DType::I32, {2, 8}),
                                   spec("targets", ir::DType::I32, {2, 7})},
                                  options))
            .find("must be equal") != std::string::npos);
  CHECK(
      errorText(makeTokenSource({spec("idx", ir::DType::I32, {2, 8})}, options))
          .find("input 'targets', but the model has no such input") !=
      std::string::npos);
  CHECK(errorText(makeTokenSource({spec("idx", ir::DType::I32, {2, 8}),
                                   spec("targets", ir::DType::I32, {2, 8}),
                                   spec("mask", ir::DType::F32, {2, 8})},
                                  options))
            .find("input 'mask' (f32[2, 8]) is not fed") != std::string::npos);
  options.positionsInput = "pos";
  CHECK(errorText(makeTokenSource({spec("idx", ir::DType::I32, {2, 8}),
                                   spec("targets", ir::DType::I32, {2, 8}),
                                   spec("pos", ir::DType::I32, {7})},
                                  options))
            .find("position input 'pos' is i32[7]") != std::string::npos);
}

namespace {

// Checks that `restricted` (rows [lo, hi) of every batched input) gives the
// rows of `whole` there and zeros elsewhere, for `n` batches.
void checkRestricted(BatchSource &whole, BatchSource &restricted, int64_t lo,
                     int64_t hi, int n) {
  std::vector<Batch> a = take(whole, n), b = take(restricted, n);
  for (int k = 0; k < n; ++k)
    for (const auto &[name, t] : a[k]) {
      INFO("batch " << k << ", input " << name);
      const Tensor &r = b[k].at(name);
      REQUIRE(r.type() == t.type());
      if (t.shape().empty() || name == "pos") {
        CHECK(sameBytes(t, r)); // not batched: read whole
        continue;
      }
      int64_t perRow = t.numel() / t.shape()[0];
      for (int64_t i = 0; i < t.numel(); ++i) {
        int64_t row = i / perRow;
        CHECK(r.get(i) == (row >= lo && row < hi ? t.get(i) : 0.0));
      }
    }
}

} // namespace

TEST_CASE("data: a source restricted to some rows reads only those, the "
          "others zero, through read-ahead too") {
  TempDir dir;
  SUBCASE("synthetic") {
    std::vector<InputSpec> inputs = {spec("x", ir::DType::F32, {6, 3}),
                                     spec("y", ir::DType::I32, {6})};
    SyntheticOptions options;
    options.seed = 5;
    options.intRange["y"] = 7;
    auto whole = orFail(makeSyntheticSource(inputs, options));
    auto part = orFail(makeSyntheticSource(inputs, options));
    part->restrictRows("x", {2, 5});
    part->restrictRows("y", {2, 5});
    checkRestricted(*whole, *part, 2, 5, 3);
  }
  SUBCASE("npy rows, shuffled, behind a prefetching reader") {
    writeRows(dir, 12);
    ArraySourceOptions options;
    options.seed = 4;
    options.shuffle = true;
    auto make = [&] {
      return orFail(makeArraySource(
          rowInputs(4), {{"x", dir.file("x.npy")}, {"y", dir.file("y.npy")}},
          options));
    };
    auto whole = make();
    auto part = makePrefetchingSource(make(), 2);
    // Batches already read ahead are read again with the rows restricted.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    part->restrictRows("x", {1, 3});
    part->restrictRows("y", {1, 3});
    checkRestricted(*whole, *part, 1, 3, 5);
  }
  SUBCASE("text tokens") {
    std::string text;
    for (int i = 0; i < 61; ++i)
      text += static_cast<char>('a' + i % 26);
    writeBytes(dir.file("corpus.txt"), text);
    std::vector<InputSpec> inputs = {spec("idx", ir::DType::I32, {3, 4}),
                                     spec("targets", ir::DType::I32, {3, 4}),
                                     spec("pos", ir::DType::I64, {4})};
    TokenSourceOptions options;
    options.path = dir.file("corpus.txt");
    options.positionsInput = "pos";
    options.seed = 2;
    auto whole = orFail(makeTokenSource(inputs, options));
    auto part = orFail(makeTokenSource(inputs, options));
    part->restrictRows("idx", {2, 3});
    part->restrictRows("targets", {2, 3});
    checkRestricted(*whole, *part, 2, 3, 4);
  }
}
