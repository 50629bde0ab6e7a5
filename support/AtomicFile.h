// Replacing a file so that a crash at any moment leaves either the old file
// or the complete new one, never a torn mix: what checkpoints are saved with.
#pragma once

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>

namespace mgc {

// Where the content of an atomically written file goes: an open descriptor
// of the temporary file.
class FileSink {
public:
  explicit FileSink(int fd) : fd_(fd) {}
  // Writes all of `bytes` (retrying short writes and EINTR).
  llvm::Error write(llvm::StringRef bytes);
  uint64_t bytesWritten() const { return written_; }

private:
  int fd_;
  uint64_t written_ = 0;
};

// Writes `path` atomically: a temporary file `<name>.tmp-<host>-<pid>-XXXXXX`
// in the same folder receives the content from `fill`, is flushed to disk (fsync), then
// renamed over `path`, and the folder is fsynced so the rename itself is
// durable. If `fill` fails, or any step fails, the temporary file is removed
// and `path` is untouched. Errors name `path` and the reason. A target that
// exists and is a device or a pipe (/dev/null) is written in place.
// Temporary files of `path` that a writer on this host killed by SIGKILL
// left behind (their process is gone) are removed first.
llvm::Error
writeFileAtomically(llvm::StringRef path,
                    llvm::function_ref<llvm::Error(FileSink &)> fill);

// Whether writeFileAtomically(path) can succeed as far as can be known
// before there is anything to write: the folder exists and takes a new file
// (one is made there and removed), and `path` is not a folder. A job checks
// its outputs so before its first step, not after hours of training.
llvm::Error checkWritable(llvm::StringRef path);

} // namespace mgc
