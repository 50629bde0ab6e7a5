// Splits the text form of the IR into tokens (see docs/ir.md). Malformed
// input becomes an Error token carrying the message; the lexer never fails
// otherwise and always makes progress, so the parser cannot loop on it.
#pragma once

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>

namespace mgc::ir {

enum class TokenKind : uint8_t {
  Eof,
  Error,      // value: the message
  Ident,      // module, input, matmul, f32, blocks.0.w, true, nan
  ValueName,  // %x, %0, %"any name"; value: the name without '%'
  ModuleName, // @mlp, @"any name"; value: the name without '@'
  String,     // "..."; value: the decoded contents
  Integer,    // -12
  Float,      // 0.5, -1e-05, -inf (nan and inf lex as Ident)
  LBrace,
  RBrace,
  LParen,
  RParen,
  LBracket,
  RBracket,
  Comma,
  Colon,
  Equal,
};

struct Token {
  TokenKind kind = TokenKind::Eof;
  llvm::StringRef spelling; // the raw text in the buffer
  std::string value;        // decoded text for names and strings
  uint32_t line = 1;        // 1-based
  uint32_t col = 1;         // 1-based, in bytes

  bool is(TokenKind k) const { return kind == k; }
  bool isIdent(llvm::StringRef word) const {
    return kind == TokenKind::Ident && spelling == word;
  }
};

class TextLexer {
public:
  explicit TextLexer(llvm::StringRef text) : text_(text) {}
  Token next();

private:
  Token make(TokenKind kind, size_t begin, uint32_t line, uint32_t col);
  Token error(const std::string &message, size_t begin, uint32_t line,
              uint32_t col);
  void skipSpaceAndComments();
  Token lexNumber(size_t begin, uint32_t line, uint32_t col);
  // Reads a quoted string starting at pos_ (the opening quote): a String
  // token with the decoded contents, or an Error token.
  Token lexString(size_t begin, uint32_t line, uint32_t col);
  Token lexSigilName(TokenKind kind, size_t begin, uint32_t line, uint32_t col);
  void advance();
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  bool atEnd() const { return pos_ >= text_.size(); }

  llvm::StringRef text_;
  size_t pos_ = 0;
  uint32_t line_ = 1;
  size_t lineStart_ = 0;
};

// Identifier characters of the text form: [A-Za-z_][A-Za-z0-9_.]*.
bool isIdentStart(char c);
bool isIdentChar(char c);
bool isIdentifier(llvm::StringRef s);
// A string literal that reads back to `s`: quotes, \" \\ \n \t \r and \xHH
// for other control characters.
std::string quoteString(llvm::StringRef s);
// How a token is named in "found ..." messages: 'text' or "end of file".
std::string describeToken(const Token &tok);

} // namespace mgc::ir
