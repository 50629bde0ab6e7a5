#include "ir/TextLexer.h"

#include "llvm/ADT/StringExtras.h"

namespace mgc::ir {

bool isIdentStart(char c) { return llvm::isAlpha(c) || c == '_'; }
bool isIdentChar(char c) { return llvm::isAlnum(c) || c == '_' || c == '.'; }

bool isIdentifier(llvm::StringRef s) {
  if (s.empty() || !isIdentStart(s[0]))
    return false;
  for (char c : s)
    if (!isIdentChar(c))
      return false;
  return true;
}

static void appendHex(std::string &out, unsigned char c) {
  out += "\\x";
  out += llvm::hexdigit(c >> 4, /*LowerCase=*/true);
  out += llvm::hexdigit(c & 15, /*LowerCase=*/true);
}

std::string quoteString(llvm::StringRef s) {
  std::string out = "\"";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\t':
      out += "\\t";
      break;
    case '\r':
      out += "\\r";
      break;
    default:
      if (u < 0x20 || u == 0x7f)
        appendHex(out, u);
      else
        out += c;
    }
  }
  return out + "\"";
}

std::string describeToken(const Token &tok) {
  if (tok.is(TokenKind::Eof))
    return "end of file";
  // Keep messages one short line whatever the token holds.
  llvm::StringRef s = tok.spelling;
  bool cut = s.size() > 40;
  if (cut)
    s = s.take_front(40);
  std::string out = "'";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f)
      appendHex(out, u);
    else
      out += c;
  }
  return out + (cut ? "...'" : "'");
}

void TextLexer::advance() {
  if (atEnd())
    return;
  if (text_[pos_] == '\n') {
    ++line_;
    lineStart_ = pos_ + 1;
  }
  ++pos_;
}

void TextLexer::skipSpaceAndComments() {
  while (!atEnd()) {
    char c = peek();
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
        c == '\v') {
      advance();
    } else if (c == '/' && peek(1) == '/') {
      while (!atEnd() && peek() != '\n')
        advance();
    } else {
      return;
    }
  }
}

Token TextLexer::make(TokenKind kind, size_t begin, uint32_t line,
                      uint32_t col) {
  Token t;
  t.kind = kind;
  t.spelling = text_.slice(begin, pos_);
  t.line = line;
  t.col = col;
  return t;
}

Token TextLexer::error(const std::string &message, size_t begin, uint32_t line,
                       uint32_t col) {
  Token t = make(TokenKind::Error, begin, line, col);
  t.value = message;
  return t;
}

Token TextLexer::next() {
  skipSpaceAndComments();
  size_t begin = pos_;
  uint32_t line = line_;
  uint32_t col = static_cast<uint32_t>(pos_ - lineStart_ + 1);
  if (atEnd())
    return make(TokenKind::Eof, begin, line, col);

  char c = peek();
  auto single = [&](TokenKind kind) {
    advance();
    return make(kind, begin, line, col);
  };
  switch (c) {
  case '{':
    return single(TokenKind::LBrace);
  case '}':
    return single(TokenKind::RBrace);
  case '(':
    return single(TokenKind::LParen);
  case ')':
    return single(TokenKind::RParen);
  case '[':
    return single(TokenKind::LBracket);
  case ']':
    return single(TokenKind::RBracket);
  case ',':
    return single(TokenKind::Comma);
  case ':':
    return single(TokenKind::Colon);
  case '=':
    return single(TokenKind::Equal);
  case '"':
    return lexString(begin, line, col);
  case '%':
    return lexSigilName(TokenKind::ValueName, begin, line, col);
  case '@':
    return lexSigilName(TokenKind::ModuleName, begin, line, col);
  default:
    break;
  }
  if (llvm::isDigit(c) || (c == '-' && llvm::isDigit(peek(1))))
    return lexNumber(begin, line, col);
  if (c == '-' && peek(1) == 'i' && peek(2) == 'n' && peek(3) == 'f' &&
      !isIdentChar(peek(4))) {
    for (int i = 0; i < 4; ++i)
      advance();
    return make(TokenKind::Float, begin, line, col);
  }
  if (isIdentStart(c)) {
    while (!atEnd() && isIdentChar(peek()))
      advance();
    return make(TokenKind::Ident, begin, line, col);
  }
  advance();
  Token bad = make(TokenKind::Error, begin, line, col);
  bad.value = "unexpected character " + describeToken(bad);
  return bad;
}

Token TextLexer::lexNumber(size_t begin, uint32_t line, uint32_t col) {
  bool isFloat = false;
  if (peek() == '-')
    advance();
  while (llvm::isDigit(peek()))
    advance();
  if (peek() == '.') {
    isFloat = true;
    advance();
    while (llvm::isDigit(peek()))
      advance();
  }
  if ((peek() == 'e' || peek() == 'E') &&
      (llvm::isDigit(peek(1)) ||
       ((peek(1) == '+' || peek(1) == '-') && llvm::isDigit(peek(2))))) {
    isFloat = true;
    advance();
    if (peek() == '+' || peek() == '-')
      advance();
    while (llvm::isDigit(peek()))
      advance();
  }
  // "12abc" or "1.5.2" is one malformed number, not two tokens.
  if (isIdentChar(peek())) {
    while (!atEnd() && isIdentChar(peek()))
      advance();
    Token bad = make(TokenKind::Error, begin, line, col);
    bad.value = "invalid number " + describeToken(bad);
    return bad;
  }
  return make(isFloat ? TokenKind::Float : TokenKind::Integer, begin, line,
              col);
}

Token TextLexer::lexString(size_t begin, uint32_t line, uint32_t col) {
  std::string value;
  advance(); // opening quote
  while (true) {
    if (atEnd() || peek() == '\n')
      return error("unterminated string", begin, line, col);
    char c = peek();
    if (c == '"') {
      advance();
      break;
    }
    if (c != '\\') {
      value += c;
      advance();
      continue;
    }
    uint32_t escCol = static_cast<uint32_t>(pos_ - lineStart_ + 1);
    size_t escBegin = pos_;
    advance();
    char e = peek();
    switch (e) {
    case '"':
      value += '"';
      advance();
      continue;
    case '\\':
      value += '\\';
      advance();
      continue;
    case 'n':
      value += '\n';
      advance();
      continue;
    case 't':
      value += '\t';
      advance();
      continue;
    case 'r':
      value += '\r';
      advance();
      continue;
    case 'x': {
      unsigned hi = llvm::hexDigitValue(peek(1));
      unsigned lo = llvm::hexDigitValue(peek(2));
      if (hi != ~0U && lo != ~0U) {
        value += static_cast<char>(hi * 16 + lo);
        advance();
        advance();
        advance();
        continue;
      }
      break;
    }
    default:
      break;
    }
    // Skip the rest of the string (to its closing quote or the end of the
    // line) so that lexing resumes after it.
    if (!atEnd() && peek() != '\n')
      advance();
    size_t escEnd = pos_;
    while (!atEnd() && peek() != '\n' && peek() != '"') {
      if (peek() == '\\' && (peek(1) == '"' || peek(1) == '\\'))
        advance();
      advance();
    }
    if (peek() == '"')
      advance();
    Token bad = error("", begin, line, escCol);
    Token esc;
    esc.kind = TokenKind::Error;
    esc.spelling = text_.slice(escBegin, escEnd);
    bad.value = "invalid escape sequence " + describeToken(esc) +
                " in string (expected \\\", \\\\, \\n, \\t, \\r or \\xHH)";
    return bad;
  }
  Token t = make(TokenKind::String, begin, line, col);
  t.value = std::move(value);
  return t;
}

Token TextLexer::lexSigilName(TokenKind kind, size_t begin, uint32_t line,
                              uint32_t col) {
  char sigil = peek();
  advance();
  if (peek() == '"') {
    uint32_t strCol = static_cast<uint32_t>(pos_ - lineStart_ + 1);
    Token str = lexString(pos_, line, strCol);
    if (str.is(TokenKind::Error))
      return str;
    Token t = make(kind, begin, line, col);
    t.value = std::move(str.value);
    return t;
  }
  if (!isIdentChar(peek()))
    return error(std::string("expected a name after '") + sigil + "'", begin,
                 line, col);
  while (!atEnd() && isIdentChar(peek()))
    advance();
  Token t = make(kind, begin, line, col);
  t.value = t.spelling.drop_front().str();
  return t;
}

} // namespace mgc::ir
