// Parses .mg tokens into a FileAST. Syntax errors are reported and the parser
// resumes at the next statement, so one run shows several of them.
#pragma once

#include "frontend/AST.h"
#include "frontend/Token.h"
#include "support/Diagnostics.h"

#include <vector>

namespace mgc::frontend {

// Deepest nesting of parentheses, brackets, calls and unary minus, and the
// deepest expression tree (long operator chains), the parser accepts: deeper
// input is an error rather than a stack overflow later.
constexpr unsigned kMaxNesting = 200;
constexpr unsigned kMaxExprDepth = 2000;

// Always returns a tree (possibly partial); check diag for errors.
FileAST parse(const std::vector<Token> &tokens, DiagnosticEngine &diag);

// Lexes and parses in one go.
FileAST parseSource(const char *fileName, llvm::StringRef text,
                    DiagnosticEngine &diag);

} // namespace mgc::frontend
