#include "support/AtomicFile.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <signal.h>
#include <string>
#include <system_error>
#include <unistd.h>

namespace mgc {

static llvm::Error errnoError(llvm::StringRef path, llvm::StringRef what,
                              int err) {
  return llvm::createStringError(std::error_code(err, std::generic_category()),
                                 "cannot write '%s': %s: %s",
                                 path.str().c_str(), what.str().c_str(),
                                 std::strerror(err));
}

llvm::Error FileSink::write(llvm::StringRef bytes) {
  const char *p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return llvm::createStringError(
          std::error_code(errno, std::generic_category()), "%s",
          std::strerror(errno));
    }
    p += n;
    left -= static_cast<size_t>(n);
    written_ += static_cast<uint64_t>(n);
  }
  return llvm::Error::success();
}

// Temporary files are named `<path>.tmp-<host>-<pid>-XXXXXX`: the host and
// the process that writes one say whether its writer is still alive. A
// writer killed by SIGKILL (or a power loss) cannot remove its own.
static std::string temporaryPrefix(llvm::StringRef path) {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0')
    std::strcpy(host, "host");
  // A '-' or '/' in a host name would make the name ambiguous to parse.
  for (char *c = host; *c; ++c)
    if (*c == '-' || *c == '/')
      *c = '_';
  return (path + ".tmp-" + host + "-").str();
}

// Removes the temporary files of `path` left by writers on this host that
// are no longer alive. Those of live processes (another job saving to the
// same path) and of other hosts (a shared filesystem) are left alone.
static void removeAbandonedTemporaries(llvm::StringRef path) {
  std::string prefix = temporaryPrefix(path);
  llvm::StringRef dir = llvm::sys::path::parent_path(prefix);
  llvm::StringRef namePrefix = llvm::sys::path::filename(prefix);
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir.empty() ? "." : dir, ec), end;
       !ec && it != end; it.increment(ec)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    if (!name.consume_front(namePrefix))
      continue;
    auto [pidText, rest] = name.split('-');
    long pid = 0;
    if (rest.empty() || pidText.getAsInteger(10, pid) || pid <= 0)
      continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH)
      continue; // alive, or not ours to ask about
    llvm::sys::fs::remove(it->path());
  }
}

// A new temporary file beside `path`, open for writing.
static llvm::Error createTemporaryBeside(llvm::StringRef path, int &fd,
                                         llvm::SmallString<256> &tmp) {
  removeAbandonedTemporaries(path);
  llvm::SmallString<256> model(temporaryPrefix(path));
  model += std::to_string(::getpid());
  model += "-%%%%%%";
  if (std::error_code ec = llvm::sys::fs::createUniqueFile(model, fd, tmp))
    return llvm::createStringError(ec, "cannot write '%s': %s",
                                   path.str().c_str(), ec.message().c_str());
  return llvm::Error::success();
}

llvm::Error checkWritable(llvm::StringRef path) {
  llvm::sys::fs::file_status status;
  bool exists =
      !llvm::sys::fs::status(path, status) && llvm::sys::fs::exists(status);
  if (exists && llvm::sys::fs::is_directory(status))
    return llvm::createStringError(std::errc::is_a_directory,
                                   "cannot write '%s': it is a folder",
                                   path.str().c_str());
  // A device or a pipe is written in place: it only has to open.
  if (exists && !llvm::sys::fs::is_regular_file(status)) {
    int fd = ::open(path.str().c_str(), O_WRONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
      return errnoError(path, "open", errno);
    ::close(fd);
    return llvm::Error::success();
  }
  llvm::SmallString<256> tmp;
  int fd = -1;
  if (llvm::Error err = createTemporaryBeside(path, fd, tmp))
    return err;
  ::close(fd);
  llvm::sys::fs::remove(tmp);
  return llvm::Error::success();
}

llvm::Error
writeFileAtomically(llvm::StringRef path,
                    llvm::function_ref<llvm::Error(FileSink &)> fill) {
  // A device or a pipe (-o /dev/null, -o /dev/stdout) cannot be replaced by
  // a rename, and there is nothing to keep whole: write it in place.
  llvm::sys::fs::file_status status;
  if (!llvm::sys::fs::status(path, status) && llvm::sys::fs::exists(status) &&
      !llvm::sys::fs::is_regular_file(status) &&
      !llvm::sys::fs::is_directory(status)) {
    int fd = ::open(path.str().c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0)
      return errnoError(path, "open", errno);
    FileSink sink(fd);
    llvm::Error err = fill(sink);
    ::close(fd);
    return err;
  }
  llvm::StringRef dir = llvm::sys::path::parent_path(path);
  llvm::SmallString<256> dirPath(dir.empty() ? "." : dir);
  llvm::SmallString<256> tmp;
  int fd = -1;
  if (llvm::Error err = createTemporaryBeside(path, fd, tmp))
    return err;

  // From here on, any failure removes the temporary file and leaves `path`
  // as it was.
  auto abandon = [&](llvm::Error err) -> llvm::Error {
    if (fd >= 0)
      ::close(fd);
    llvm::sys::fs::remove(tmp);
    return err;
  };
  FileSink sink(fd);
  if (llvm::Error err = fill(sink)) {
    std::string reason = llvm::toString(std::move(err));
    return abandon(llvm::createStringError(std::errc::io_error,
                                           "cannot write '%s': %s",
                                           path.str().c_str(), reason.c_str()));
  }
  // The data must be on disk before the rename makes it the target:
  // otherwise a power loss could leave a renamed but empty file.
  if (::fsync(fd) != 0)
    return abandon(errnoError(path, "fsync", errno));
  int closeResult = ::close(fd);
  fd = -1;
  if (closeResult != 0)
    return abandon(errnoError(path, "close", errno));
  if (::rename(tmp.c_str(), path.str().c_str()) != 0)
    return abandon(errnoError(path, "rename", errno));
  // Make the rename durable: the folder entry is what changed.
  int dirFd = ::open(dirPath.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirFd < 0)
    return errnoError(path, "open folder", errno);
  int syncResult = ::fsync(dirFd);
  int syncErr = errno;
  ::close(dirFd);
  if (syncResult != 0 && syncErr != EINVAL) // some filesystems refuse it
    return errnoError(path, "fsync folder", syncErr);
  return llvm::Error::success();
}

} // namespace mgc
