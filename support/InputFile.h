// Files a user names as inputs: model sources, data arrays, token streams,
// checkpoints, cluster descriptions, executables.
//
// Two defects share one cause, and this one place fixes both:
// - an input that is not a regular file (/dev/zero, /dev/urandom, a FIFO)
//   or is far larger than its kind can sanely be was read without bound,
//   until memory ran out or for ever;
// - an input read through a memory map faults (SIGBUS) when another
//   process truncates it while a job runs.
// So every input is checked with stat() before it is read and is read with
// pread() into memory its caller owns: a file that shrank afterwards gives an
// error naming it instead of a signal.
#pragma once

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <string>

namespace mgc {

inline constexpr uint64_t kMiB = uint64_t(1) << 20;
// What a text input read whole (a model source, an executable, a cluster
// description, a checkpoint index) may weigh: far above any real one.
inline constexpr uint64_t kMaxTextInputBytes = 256 * kMiB;
// Inputs read piece by piece (data, tokens, checkpoints) need no limit but
// the file system's.
inline constexpr uint64_t kNoSizeLimit = ~uint64_t(0);

class InputFile {
public:
  // Opens `path` for reading. Refused, naming `what` ("token file") and the
  // path: a file that cannot be opened, is not a regular file, or holds more
  // than `maxBytes`.
  static llvm::Expected<InputFile> open(llvm::StringRef path,
                                        llvm::StringRef what,
                                        uint64_t maxBytes = kNoSizeLimit);
  // Bytes held in memory, read through the same interface (tests, fuzzing,
  // standard input). `path` only names them in errors.
  static InputFile fromBytes(std::string bytes, llvm::StringRef path,
                             llvm::StringRef what);

  const std::string &path() const { return path_; }
  const std::string &what() const { return what_; }
  // The size when it was opened.
  uint64_t size() const { return size_; }

  // Reads `n` bytes from `offset`. An error names the file when they lie
  // beyond its size, or when the file has become shorter since it was opened
  // (it was overwritten or truncated under the job).
  llvm::Error read(uint64_t offset, size_t n, void *dst) const;
  llvm::Expected<std::string> readAll() const;

private:
  struct Source;
  std::shared_ptr<const Source> source_;
  std::string path_, what_;
  uint64_t size_ = 0;
};

// The whole of an input file checked as InputFile::open checks it; "-" reads
// standard input, up to `maxBytes`.
llvm::Expected<std::string>
readInputFile(llvm::StringRef path, llvm::StringRef what, uint64_t maxBytes);

} // namespace mgc
