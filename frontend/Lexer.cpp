#include "frontend/Lexer.h"

#include "llvm/ADT/StringSwitch.h"

#include <cerrno>
#include <cstdlib>

namespace mgc::frontend {

llvm::StringRef tokName(Tok kind) {
  switch (kind) {
  case Tok::Eof:
    return "end of file";
  case Tok::Newline:
    return "end of line";
  case Tok::Ident:
    return "identifier";
  case Tok::Int:
    return "integer";
  case Tok::Float:
    return "number";
  case Tok::KwConst:
    return "'const'";
  case Tok::KwModel:
    return "'model'";
  case Tok::KwBlock:
    return "'block'";
  case Tok::KwInput:
    return "'input'";
  case Tok::KwParam:
    return "'param'";
  case Tok::KwBuffer:
    return "'buffer'";
  case Tok::KwOutput:
    return "'output'";
  case Tok::KwLoss:
    return "'loss'";
  case Tok::KwReturn:
    return "'return'";
  case Tok::KwRepeat:
    return "'repeat'";
  case Tok::KwTrain:
    return "'train'";
  case Tok::KwTrue:
    return "'true'";
  case Tok::KwFalse:
    return "'false'";
  case Tok::LParen:
    return "'('";
  case Tok::RParen:
    return "')'";
  case Tok::LBracket:
    return "'['";
  case Tok::RBracket:
    return "']'";
  case Tok::LBrace:
    return "'{'";
  case Tok::RBrace:
    return "'}'";
  case Tok::Comma:
    return "','";
  case Tok::Colon:
    return "':'";
  case Tok::Semicolon:
    return "';'";
  case Tok::Equal:
    return "'='";
  case Tok::Plus:
    return "'+'";
  case Tok::Minus:
    return "'-'";
  case Tok::Star:
    return "'*'";
  case Tok::Slash:
    return "'/'";
  case Tok::At:
    return "'@'";
  case Tok::Arrow:
    return "'->'";
  case Tok::Error:
    return "invalid token";
  }
  return "token";
}

namespace {

bool isIdentStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isIdentChar(char c) { return isIdentStart(c) || isDigit(c); }

class Lexer {
public:
  Lexer(const char *file, llvm::StringRef text, DiagnosticEngine &diag)
      : file_(file), text_(text), diag_(diag) {}

  std::vector<Token> run() {
    while (true) {
      skipSpaceAndComments();
      if (pos_ >= text_.size())
        break;
      lexOne();
    }
    push(Tok::Newline, here());
    push(Tok::Eof, here());
    return std::move(tokens_);
  }

private:
  Loc here() const { return Loc{file_, line_, col_}; }
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  void advance() {
    if (text_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }

  void push(Tok kind, Loc loc, std::string text = {}) {
    // Collapse runs of newlines, and drop newlines inside ( ) and [ ].
    if (kind == Tok::Newline) {
      if (depth_ > 0 || tokens_.empty() || tokens_.back().kind == Tok::Newline)
        return;
    }
    Token t;
    t.kind = kind;
    t.loc = loc;
    t.text = std::move(text);
    tokens_.push_back(std::move(t));
  }

  void skipSpaceAndComments() {
    while (pos_ < text_.size()) {
      char c = peek();
      if (c == '\n') {
        push(Tok::Newline, here());
        advance();
      } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
        advance();
      } else if (c == '/' && peek(1) == '/') {
        while (pos_ < text_.size() && peek() != '\n')
          advance();
      } else {
        break;
      }
    }
  }

  void lexOne() {
    Loc loc = here();
    char c = peek();
    if (isIdentStart(c)) {
      size_t start = pos_;
      while (isIdentChar(peek()))
        advance();
      llvm::StringRef word = text_.slice(start, pos_);
      Tok kind = llvm::StringSwitch<Tok>(word)
                     .Case("const", Tok::KwConst)
                     .Case("model", Tok::KwModel)
                     .Case("block", Tok::KwBlock)
                     .Case("input", Tok::KwInput)
                     .Case("param", Tok::KwParam)
                     .Case("buffer", Tok::KwBuffer)
                     .Case("output", Tok::KwOutput)
                     .Case("loss", Tok::KwLoss)
                     .Case("return", Tok::KwReturn)
                     .Case("repeat", Tok::KwRepeat)
                     .Case("train", Tok::KwTrain)
                     .Case("true", Tok::KwTrue)
                     .Case("false", Tok::KwFalse)
                     .Default(Tok::Ident);
      push(kind, loc, word.str());
      return;
    }
    if (isDigit(c) || (c == '.' && isDigit(peek(1)))) {
      lexNumber(loc);
      return;
    }
    advance();
    switch (c) {
    case '(':
      push(Tok::LParen, loc);
      ++depth_;
      return;
    case ')':
      push(Tok::RParen, loc);
      depth_ = depth_ ? depth_ - 1 : 0;
      return;
    case '[':
      push(Tok::LBracket, loc);
      ++depth_;
      return;
    case ']':
      push(Tok::RBracket, loc);
      depth_ = depth_ ? depth_ - 1 : 0;
      return;
    // A brace starts or ends a statement list: newlines count again inside.
    case '{':
      push(Tok::LBrace, loc);
      savedDepth_.push_back(depth_);
      depth_ = 0;
      return;
    case '}':
      if (!savedDepth_.empty()) {
        depth_ = savedDepth_.back();
        savedDepth_.pop_back();
      }
      push(Tok::RBrace, loc);
      return;
    case ',':
      push(Tok::Comma, loc);
      return;
    case ':':
      push(Tok::Colon, loc);
      return;
    case ';':
      push(Tok::Semicolon, loc);
      return;
    case '=':
      push(Tok::Equal, loc);
      return;
    case '+':
      push(Tok::Plus, loc);
      return;
    case '*':
      push(Tok::Star, loc);
      return;
    case '/':
      push(Tok::Slash, loc);
      return;
    case '@':
      push(Tok::At, loc);
      return;
    case '-':
      if (peek() == '>') {
        advance();
        push(Tok::Arrow, loc);
      } else {
        push(Tok::Minus, loc);
      }
      return;
    default:
      break;
    }
    std::string shown;
    if (c >= 0x20 && c < 0x7f)
      shown = std::string("'") + c + "'";
    else {
      char buf[8];
      snprintf(buf, sizeof buf, "0x%02x", static_cast<unsigned char>(c));
      shown = buf;
    }
    diag_.error(loc, "unexpected character " + shown);
    push(Tok::Error, loc);
  }

  void lexNumber(Loc loc) {
    size_t start = pos_;
    bool isFloat = false;
    while (isDigit(peek()))
      advance();
    if (peek() == '.' && isDigit(peek(1))) {
      isFloat = true;
      advance();
      while (isDigit(peek()))
        advance();
    } else if (peek() == '.' && !isIdentStart(peek(1))) {
      // "1." is a float too.
      isFloat = true;
      advance();
    }
    if ((peek() == 'e' || peek() == 'E') &&
        (isDigit(peek(1)) ||
         ((peek(1) == '+' || peek(1) == '-') && isDigit(peek(2))))) {
      isFloat = true;
      advance();
      if (peek() == '+' || peek() == '-')
        advance();
      while (isDigit(peek()))
        advance();
    }
    std::string spelling = text_.slice(start, pos_).str();
    if (isIdentChar(peek())) {
      while (isIdentChar(peek()))
        advance();
      diag_.error(loc,
                  "malformed number '" + text_.slice(start, pos_).str() + "'");
      push(Tok::Error, loc);
      return;
    }
    Token t;
    t.loc = loc;
    t.text = spelling;
    errno = 0;
    if (isFloat) {
      t.kind = Tok::Float;
      t.floatValue = std::strtod(spelling.c_str(), nullptr);
      if (errno == ERANGE && (t.floatValue > 1 || t.floatValue < -1)) {
        diag_.error(loc, "number '" + spelling + "' is out of range");
        t.kind = Tok::Error;
      }
    } else {
      t.kind = Tok::Int;
      unsigned long long v = std::strtoull(spelling.c_str(), nullptr, 10);
      if (errno == ERANGE || v > static_cast<unsigned long long>(INT64_MAX)) {
        diag_.error(loc, "integer '" + spelling + "' is too large");
        t.kind = Tok::Error;
      }
      t.intValue = static_cast<int64_t>(v);
      t.floatValue = static_cast<double>(v);
    }
    tokens_.push_back(std::move(t));
  }

  const char *file_;
  llvm::StringRef text_;
  DiagnosticEngine &diag_;
  size_t pos_ = 0;
  uint32_t line_ = 1, col_ = 1;
  unsigned depth_ = 0;
  std::vector<unsigned> savedDepth_;
  std::vector<Token> tokens_;
};

} // namespace

std::vector<Token> lex(const char *fileName, llvm::StringRef text,
                       DiagnosticEngine &diag) {
  return Lexer(fileName, text, diag).run();
}

} // namespace mgc::frontend
