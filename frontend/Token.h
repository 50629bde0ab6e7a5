// The tokens of the .mg language.
#pragma once

#include "support/Loc.h"

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>

namespace mgc::frontend {

enum class Tok : uint8_t {
  Eof,
  Newline, // ends a statement (not produced inside ( ) or [ ])
  Ident,
  Int,
  Float,
  // Keywords.
  KwConst,
  KwModel,
  KwBlock,
  KwInput,
  KwParam,
  KwBuffer,
  KwOutput,
  KwLoss,
  KwReturn,
  KwRepeat,
  KwTrain,
  KwTrue,
  KwFalse,
  // Punctuation.
  LParen,
  RParen,
  LBracket,
  RBracket,
  LBrace,
  RBrace,
  Comma,
  Colon,
  Semicolon,
  Equal,
  Plus,
  Minus,
  Star,
  Slash,
  At,
  Arrow,
  Error, // a character the lexer could not use (already reported)
};

// How a token kind reads in messages: "identifier", "'('", "end of file".
llvm::StringRef tokName(Tok kind);

struct Token {
  Tok kind = Tok::Eof;
  Loc loc;
  std::string text; // identifier spelling or literal text
  int64_t intValue = 0;
  double floatValue = 0;
};

} // namespace mgc::frontend
