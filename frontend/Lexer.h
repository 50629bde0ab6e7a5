// Turns .mg text into tokens. Comments run from `//` to the end of the line.
// Newlines end statements, except inside parentheses and brackets.
#pragma once

#include "frontend/Token.h"
#include "support/Diagnostics.h"

#include <vector>

namespace mgc::frontend {

// Lexes the whole text. Bad characters and malformed numbers are reported
// and produce Tok::Error tokens; the result always ends with Tok::Eof.
std::vector<Token> lex(const char *fileName, llvm::StringRef text,
                       DiagnosticEngine &diag);

} // namespace mgc::frontend
