// A position in a source file: what every diagnostic and every IR op carries,
// so that an error found late (in a pass) still points at the user's line.
#pragma once

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>

namespace mgc {

struct Loc {
  // Interned file name (see internFileName); null when the position is unknown.
  const char *file = nullptr;
  uint32_t line = 0; // 1-based
  uint32_t col = 0;  // 1-based

  static Loc make(llvm::StringRef file, uint32_t line, uint32_t col);

  bool valid() const { return file != nullptr && line > 0; }
  llvm::StringRef fileName() const { return file ? file : ""; }
  // "file:line:col", or "<unknown>".
  std::string str() const;

  friend bool operator==(const Loc &a, const Loc &b) {
    return a.file == b.file && a.line == b.line && a.col == b.col;
  }
};

// Returns a pointer that stays valid for the life of the process; equal names
// give equal pointers, so locations compare by pointer.
const char *internFileName(llvm::StringRef name);

} // namespace mgc
