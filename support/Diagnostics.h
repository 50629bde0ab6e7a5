// Compiler-style diagnostics: `file:line:col: error: message`, the source line
// and a caret, then notes that point at related places. Built on LLVM's
// SourceMgr, which already prints that format.
#pragma once

#include "support/Loc.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <memory>
#include <string>

namespace mgc {

enum class Severity { Error, Warning, Note };

class DiagnosticEngine {
public:
  // Diagnostics go to `os` (stderr by default).
  explicit DiagnosticEngine(llvm::raw_ostream &os = llvm::errs());

  // Registers the text of a file so that diagnostics inside it show the
  // source line and a caret. Returns the interned file name.
  const char *addSource(llvm::StringRef fileName, llvm::StringRef text);
  // Reads a file and registers it. On failure reports an error (naming the
  // file and the reason) and returns false.
  bool addSourceFile(llvm::StringRef fileName, std::string *textOut = nullptr);
  // The registered text of a file, or empty.
  llvm::StringRef sourceText(llvm::StringRef fileName) const;

  void error(Loc loc, const llvm::Twine &msg) {
    report(Severity::Error, loc, msg);
  }
  void warning(Loc loc, const llvm::Twine &msg) {
    report(Severity::Warning, loc, msg);
  }
  // A note belongs to the diagnostic printed just before it.
  void note(Loc loc, const llvm::Twine &msg) {
    report(Severity::Note, loc, msg);
  }
  // An error with no location (a flag, a missing file).
  void error(const llvm::Twine &msg) { report(Severity::Error, Loc{}, msg); }
  void report(Severity severity, Loc loc, const llvm::Twine &msg);

  unsigned errorCount() const { return errors_; }
  unsigned warningCount() const { return warnings_; }
  bool hasErrors() const { return errors_ > 0; }
  // After this many errors, further ones are counted but not printed, so one
  // broken file cannot flood the terminal.
  void setErrorLimit(unsigned limit) { errorLimit_ = limit; }
  // Whether the next error would be printed: work that only improves a
  // message (a did-you-mean search) can be skipped past the limit.
  bool printsErrors() const { return handler_ || errors_ < errorLimit_; }
  void setWarningsEnabled(bool on) { warningsEnabled_ = on; }
  // Hands every diagnostic to `handler` instead of printing it (an engine of
  // a worker thread whose first error another engine reports); counts stay.
  using Handler =
      std::function<void(Severity, Loc, const std::string &message)>;
  void setHandler(Handler handler) { handler_ = std::move(handler); }
  // While set, a diagnostic with no location is about this file and is
  // printed as "FILE: error: ..." rather than "mgc: error: ...": what a
  // pass says of the whole module it was given. See DiagnosticSubject.
  void setSubject(std::string file) { subject_ = std::move(file); }
  const std::string &subject() const { return subject_; }

private:
  llvm::raw_ostream &os_;
  llvm::SourceMgr sourceMgr_;
  unsigned errors_ = 0;
  unsigned warnings_ = 0;
  unsigned errorLimit_ = 50;
  bool warningsEnabled_ = true;
  bool suppressingNotes_ = false;
  Handler handler_;
  std::string subject_;
};

// Sets the engine's subject (DiagnosticEngine::setSubject) for a scope and
// puts the previous one back after it. Scope it to the work that is about
// the file (running a pass), never to the reading of flags, whose errors
// are not about it.
class DiagnosticSubject {
public:
  DiagnosticSubject(DiagnosticEngine &diag, std::string file)
      : diag_(diag), previous_(diag.subject()) {
    diag_.setSubject(std::move(file));
  }
  ~DiagnosticSubject() { diag_.setSubject(std::move(previous_)); }
  DiagnosticSubject(const DiagnosticSubject &) = delete;
  DiagnosticSubject &operator=(const DiagnosticSubject &) = delete;

private:
  DiagnosticEngine &diag_;
  std::string previous_;
};

} // namespace mgc
