// Helpers for the checkpoint and data-loading tests: a temporary folder,
// file I/O, error capture.
#pragma once

#include "runtime/Tensor.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

namespace mgc::testing {

// A fresh folder, removed with its contents at the end of the test.
class TempDir {
public:
  TempDir() {
    std::error_code ec =
        llvm::sys::fs::createUniqueDirectory("mgc-data-test", path_);
    REQUIRE_FALSE(ec);
  }
  ~TempDir() { llvm::sys::fs::remove_directories(path_); }
  std::string file(llvm::StringRef name) const {
    llvm::SmallString<256> p(path_);
    llvm::sys::path::append(p, name);
    return std::string(p);
  }
  std::string path() const { return std::string(path_); }

private:
  llvm::SmallString<256> path_;
};

inline void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream os(path, std::ios::binary | std::ios::trunc);
  os.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(os.good());
}

inline std::string readBytes(const std::string &path) {
  std::ifstream is(path, std::ios::binary);
  std::stringstream ss;
  ss << is.rdbuf();
  return ss.str();
}

// The message of an error, or "" for success.
inline std::string errorText(llvm::Error err) {
  return err ? llvm::toString(std::move(err)) : std::string();
}
template <typename T> std::string errorText(llvm::Expected<T> &value) {
  return value ? std::string() : llvm::toString(value.takeError());
}
template <typename T> std::string errorText(llvm::Expected<T> &&value) {
  return errorText(value);
}

// A tensor whose element i is f(i).
template <typename F>
runtime::Tensor makeTensor(ir::DType dtype, llvm::ArrayRef<int64_t> shape,
                           F f) {
  runtime::Tensor t(ir::TensorType(dtype, shape));
  for (int64_t i = 0; i < t.numel(); ++i)
    t.set(i, f(i));
  return t;
}

inline bool sameBytes(const runtime::Tensor &a, const runtime::Tensor &b) {
  return a.type() == b.type() &&
         (a.nbytes() == 0 || std::memcmp(a.data(), b.data(), a.nbytes()) == 0);
}

// Whether python3 can import the given modules (for interop tests that
// skip cleanly without them).
inline bool pythonHas(const std::string &modules) {
  std::string cmd = "python3 -c 'import " + modules + "' >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

} // namespace mgc::testing
