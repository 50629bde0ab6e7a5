#include "support/Diagnostics.h"
#include "support/InputFile.h"

#include "llvm/Support/MemoryBuffer.h"

namespace mgc {

DiagnosticEngine::DiagnosticEngine(llvm::raw_ostream &os) : os_(os) {}

const char *DiagnosticEngine::addSource(llvm::StringRef fileName,
                                        llvm::StringRef text) {
  const char *interned = internFileName(fileName);
  sourceMgr_.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(text, interned), llvm::SMLoc());
  return interned;
}

bool DiagnosticEngine::addSourceFile(llvm::StringRef fileName,
                                     std::string *textOut) {
  llvm::Expected<std::string> read =
      readInputFile(fileName, "input file", kMaxTextInputBytes);
  if (!read) {
    error(llvm::toString(read.takeError()));
    return false;
  }
  llvm::StringRef text = *read;
  if (textOut)
    *textOut = text.str();
  addSource(fileName == "-" ? "<stdin>" : fileName, text);
  return true;
}

llvm::StringRef DiagnosticEngine::sourceText(llvm::StringRef fileName) const {
  for (unsigned id = 1; id <= sourceMgr_.getNumBuffers(); ++id) {
    const llvm::MemoryBuffer *buf = sourceMgr_.getMemoryBuffer(id);
    if (buf->getBufferIdentifier() == fileName)
      return buf->getBuffer();
  }
  return {};
}

static llvm::SourceMgr::DiagKind toKind(Severity s) {
  switch (s) {
  case Severity::Error:
    return llvm::SourceMgr::DK_Error;
  case Severity::Warning:
    return llvm::SourceMgr::DK_Warning;
  case Severity::Note:
    return llvm::SourceMgr::DK_Note;
  }
  return llvm::SourceMgr::DK_Error;
}

void DiagnosticEngine::report(Severity severity, Loc loc,
                              const llvm::Twine &msg) {
  if (handler_) {
    if (severity == Severity::Error)
      ++errors_;
    else if (severity == Severity::Warning)
      ++warnings_;
    handler_(severity, loc, msg.str());
    return;
  }
  if (severity == Severity::Error) {
    ++errors_;
    suppressingNotes_ = errors_ > errorLimit_;
    if (errors_ == errorLimit_ + 1)
      os_ << "note: too many errors; further errors are not shown\n";
  } else if (severity == Severity::Warning) {
    suppressingNotes_ = !warningsEnabled_;
    if (warningsEnabled_)
      ++warnings_;
  }
  if (suppressingNotes_)
    return;

  std::string text = msg.str();
  if (!loc.valid()) {
    llvm::SMDiagnostic(subject_.empty() ? "mgc" : subject_, toKind(severity),
                       text)
        .print(nullptr, os_);
    return;
  }
  // Find the registered buffer of this file to show the line and a caret.
  for (unsigned id = 1; id <= sourceMgr_.getNumBuffers(); ++id) {
    const llvm::MemoryBuffer *buf = sourceMgr_.getMemoryBuffer(id);
    if (buf->getBufferIdentifier() != loc.fileName())
      continue;
    llvm::SMLoc smloc =
        sourceMgr_.FindLocForLineAndColumn(id, loc.line, loc.col);
    if (!smloc.isValid())
      break;
    sourceMgr_.PrintMessage(os_, smloc, toKind(severity), text);
    return;
  }
  // The file is not loaded (for example a location recorded in textual IR):
  // print the position without the source line.
  llvm::SMDiagnostic(loc.str(), toKind(severity), text).print(nullptr, os_);
}

} // namespace mgc
