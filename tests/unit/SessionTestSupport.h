// Helpers of the session tests: sample paths, a temporary folder, seeded
// batches, sessions that must open.
#pragma once

#include "SourcePath.h"
#include "mgc/Session.h"

#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <unistd.h>

namespace mgc::session_test {

namespace fs = std::filesystem;

inline std::string sample(const char *file) {
  return mgc::test::sourceDir() + "/samples/" + file;
}

// A fresh folder for the files of one test.
struct TempDir {
  fs::path path;
  explicit TempDir(const char *tag) {
    path = fs::temp_directory_path() / ("mgc-session-" + std::string(tag) +
                                        "-" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const char *name) const { return (path / name).string(); }
};

// Deterministic data: splitmix64 per (stream, index).
inline double uniform(uint64_t stream, uint64_t i) {
  uint64_t z = stream * 0x9E3779B97F4A7C15ull + i + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) / 9007199254740992.0;
}

inline std::map<std::string, std::string> mlpDefines() {
  return {{"B", "8"}, {"D", "12"}, {"H", "16"}, {"C", "4"}};
}

inline std::map<std::string, std::string> gptDefines() {
  return {{"V", "32"}, {"T", "8"}, {"D", "16"},
          {"H", "2"},  {"L", "2"}, {"B", "2"}};
}

inline std::map<std::string, std::string> adamwCosine() {
  return {{"optimizer", "adamw"}, {"lr", "0.01"},
          {"schedule", "cosine"}, {"steps", "20"},
          {"warmup_steps", "3"},  {"weight_decay", "0.1"}};
}

// Batch number `k` for an input: floats in [-1, 1), integers below `ids`
// (`pos` is 0, 1, ...).
inline Tensor batchTensor(const TensorInfo &in, int64_t k, int ids) {
  Tensor t = Tensor::zeros(in.dtype, in.shape);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double u = uniform(static_cast<uint64_t>(k) * 7 + in.name.size(),
                       static_cast<uint64_t>(i));
    if (in.dtype == DType::I32) {
      int32_t v = in.name == "pos" ? static_cast<int32_t>(i)
                                   : static_cast<int32_t>(u * ids);
      std::memcpy(t.data() + 4 * i, &v, 4);
    } else {
      float v = static_cast<float>(2 * u - 1);
      std::memcpy(t.data() + 4 * i, &v, 4);
    }
  }
  return t;
}

inline void feedBatch(Session &s, int64_t k, int ids) {
  for (const TensorInfo &in : s.inputs())
    REQUIRE(s.feed(in.name, batchTensor(in, k, ids)));
}

inline std::unique_ptr<Session> makeSession(const std::string &path,
                                            SessionOptions options) {
  auto s = Session::create(path, options);
  INFO(s.status().message());
  REQUIRE(s);
  return std::move(*s);
}

} // namespace mgc::session_test
