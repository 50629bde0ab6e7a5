#include "support/InputFile.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace mgc {

// Either an open descriptor or bytes in memory.
struct InputFile::Source {
  int fd = -1;
  std::string bytes;
  ~Source() {
    if (fd >= 0)
      ::close(fd);
  }
};

// "cannot read token file 'x': <why>": every error here has this form.
static llvm::Error inputError(llvm::StringRef what, llvm::StringRef path,
                              const llvm::Twine &why) {
  return llvm::createStringError(
      std::errc::invalid_argument, "%s",
      ("cannot read " + what + " '" + path + "': " + why).str().c_str());
}

static std::string sizeText(uint64_t bytes) {
  if (bytes >= kMiB && bytes % kMiB == 0)
    return std::to_string(bytes / kMiB) + " MiB";
  return std::to_string(bytes) + " bytes";
}

static const char *fileKind(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISFIFO(mode))
    return "a pipe";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a regular file";
}

llvm::Expected<InputFile>
InputFile::open(llvm::StringRef path, llvm::StringRef what, uint64_t maxBytes) {
  std::string p = path.str();
  // O_NONBLOCK: opening a FIFO with no writer would otherwise wait for ever
  // before fstat could refuse it.
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return inputError(what, path, std::strerror(errno));
  auto source = std::make_shared<Source>();
  source->fd = fd;
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return inputError(what, path, std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return inputError(what, path,
                      llvm::Twine("it is ") + fileKind(st.st_mode) +
                          ", not a regular file");
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > maxBytes)
    return inputError(what, path,
                      "it is " + llvm::Twine(size) + " bytes, more than the " +
                          sizeText(maxBytes) + " such a file may hold");
  InputFile file;
  file.source_ = std::move(source);
  file.path_ = p;
  file.what_ = what.str();
  file.size_ = size;
  return file;
}

InputFile InputFile::fromBytes(std::string bytes, llvm::StringRef path,
                               llvm::StringRef what) {
  auto source = std::make_shared<Source>();
  source->bytes = std::move(bytes);
  InputFile file;
  file.size_ = source->bytes.size();
  file.source_ = std::move(source);
  file.path_ = path.str();
  file.what_ = what.str();
  return file;
}

llvm::Error InputFile::read(uint64_t offset, size_t n, void *dst) const {
  if (offset > size_ || n > size_ - offset)
    return inputError(what_, path_,
                      llvm::Twine(n) + " bytes at offset " +
                          llvm::Twine(offset) + " lie beyond its " +
                          llvm::Twine(size_) + " bytes");
  if (source_->fd < 0) {
    if (n)
      std::memcpy(dst, source_->bytes.data() + offset, n);
    return llvm::Error::success();
  }
  char *out = static_cast<char *>(dst);
  size_t done = 0;
  while (done < n) {
    ssize_t got = ::pread(source_->fd, out + done, n - done,
                          static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      return inputError(what_, path_, std::strerror(errno));
    if (got == 0) {
      struct stat st;
      uint64_t now = ::fstat(source_->fd, &st) == 0
                         ? static_cast<uint64_t>(st.st_size)
                         : offset + done;
      return inputError(what_, path_,
                        "it holds " + llvm::Twine(now) + " bytes but held " +
                            llvm::Twine(size_) +
                            " when it was opened: it was truncated while the "
                            "job ran");
    }
    done += static_cast<size_t>(got);
  }
  return llvm::Error::success();
}

llvm::Expected<std::string> InputFile::readAll() const {
  std::string bytes(size_, '\0');
  if (llvm::Error err = read(0, size_, bytes.data()))
    return err;
  return bytes;
}

llvm::Expected<std::string>
readInputFile(llvm::StringRef path, llvm::StringRef what, uint64_t maxBytes) {
  if (path != "-") {
    llvm::Expected<InputFile> file = InputFile::open(path, what, maxBytes);
    if (!file)
      return file.takeError();
    return file->readAll();
  }
  std::string bytes;
  char chunk[1 << 16];
  for (;;) {
    ssize_t got = ::read(STDIN_FILENO, chunk, sizeof chunk);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      return inputError(what, "<stdin>", std::strerror(errno));
    if (got == 0)
      return bytes;
    if (bytes.size() + static_cast<size_t>(got) > maxBytes)
      return inputError(what, "<stdin>",
                        "it holds more than the " + sizeText(maxBytes) +
                            " such a file may hold");
    bytes.append(chunk, static_cast<size_t>(got));
  }
}

} // namespace mgc
