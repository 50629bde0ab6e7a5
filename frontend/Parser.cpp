#include "frontend/Parser.h"

#include "frontend/Lexer.h"

#include <algorithm>

namespace mgc::frontend {

namespace {

// Thrown-free recovery: every parse function returns false (or null) after
// reporting, and the statement loop skips to the next statement boundary.
class Parser {
public:
  Parser(const std::vector<Token> &tokens, DiagnosticEngine &diag)
      : toks_(tokens), diag_(diag) {}

  FileAST run() {
    FileAST file;
    while (true) {
      skipNewlines();
      switch (cur().kind) {
      case Tok::Eof:
        return file;
      case Tok::KwConst:
        if (!parseConst(file))
          skipToTopLevel();
        break;
      case Tok::KwBlock: {
        BlockDecl block;
        if (parseBlock(block))
          file.blocks.push_back(std::move(block));
        else
          skipToTopLevel();
        break;
      }
      case Tok::KwModel: {
        ModelDecl model;
        if (parseModel(model))
          file.models.push_back(std::move(model));
        else
          skipToTopLevel();
        break;
      }
      case Tok::KwTrain: {
        TrainDecl train;
        if (parseTrain(train))
          file.trains.push_back(std::move(train));
        else
          skipToTopLevel();
        break;
      }
      default:
        errorHere("expected 'const', 'block', 'model' or 'train' at the top "
                  "level, got " +
                  describe(cur()));
        skipToTopLevel();
        break;
      }
    }
  }

private:
  // ---- Token access ----
  const Token &cur() const { return toks_[pos_]; }
  const Token &peekTok(size_t n = 1) const {
    return toks_[std::min(pos_ + n, toks_.size() - 1)];
  }
  bool at(Tok k) const { return cur().kind == k; }
  const Token &take() {
    const Token &t = toks_[pos_];
    if (pos_ + 1 < toks_.size())
      ++pos_;
    return t;
  }
  bool accept(Tok k) {
    if (!at(k))
      return false;
    take();
    return true;
  }
  static std::string describe(const Token &t) {
    if (t.kind == Tok::Ident)
      return "'" + t.text + "'";
    if (t.kind == Tok::Int || t.kind == Tok::Float)
      return "'" + t.text + "'";
    return tokName(t.kind).str();
  }
  void errorHere(const std::string &msg) {
    // One error per position: recovery can revisit a token.
    if (cur().kind == Tok::Error)
      return; // the lexer already reported it
    if (lastErrorPos_ == pos_ && reportedAny_)
      return;
    lastErrorPos_ = pos_;
    reportedAny_ = true;
    diag_.error(cur().loc, msg);
  }
  bool expect(Tok k, const char *context) {
    if (accept(k))
      return true;
    errorHere("expected " + tokName(k).str() + " " + context + ", got " +
              describe(cur()));
    return false;
  }
  bool expectIdent(std::string &name, Loc &loc, const char *what) {
    if (!at(Tok::Ident)) {
      errorHere(std::string("expected ") + what + ", got " + describe(cur()));
      return false;
    }
    loc = cur().loc;
    name = take().text;
    return true;
  }
  void skipNewlines() {
    while (at(Tok::Newline) || at(Tok::Semicolon))
      take();
  }
  bool atStmtEnd() const {
    return at(Tok::Newline) || at(Tok::Semicolon) || at(Tok::RBrace) ||
           at(Tok::Eof);
  }
  bool expectStmtEnd() {
    if (atStmtEnd())
      return true;
    errorHere("expected end of statement, got " + describe(cur()));
    return false;
  }

  // Skips the rest of a bad statement: up to a newline or ';' at this brace
  // level, or up to (not past) the '}' that closes the enclosing body.
  void skipStmt() {
    int braces = 0;
    while (!at(Tok::Eof)) {
      if (braces == 0 && (at(Tok::Newline) || at(Tok::Semicolon)))
        return;
      if (at(Tok::LBrace))
        ++braces;
      if (at(Tok::RBrace)) {
        if (braces == 0)
          return;
        --braces;
      }
      take();
    }
  }
  // Skips to the next line that starts with a top-level keyword.
  void skipToTopLevel() {
    while (!at(Tok::Eof)) {
      bool lineStart = pos_ == 0 || toks_[pos_ - 1].kind == Tok::Newline;
      if (lineStart && (at(Tok::KwConst) || at(Tok::KwBlock) ||
                        at(Tok::KwModel) || at(Tok::KwTrain)))
        return;
      take();
    }
  }

  // ---- Declarations ----
  bool parseConst(FileAST &file) {
    take(); // const
    do {
      skipNewlinesInList();
      ConstDecl c;
      if (!expectIdent(c.name, c.loc, "a constant name"))
        return false;
      if (!expect(Tok::Equal, "after the constant name"))
        return false;
      c.value = parseExpr();
      if (!c.value)
        return false;
      file.consts.push_back(std::move(c));
    } while (accept(Tok::Comma));
    return expectStmtEnd();
  }
  // `const A = 1,` may continue on the next line.
  void skipNewlinesInList() {
    while (at(Tok::Newline))
      take();
  }

  bool parseType(TypeExpr &type) {
    if (!at(Tok::Ident)) {
      errorHere("expected a tensor type such as f32[B, D], got " +
                describe(cur()));
      return false;
    }
    type.loc = cur().loc;
    type.dtype = take().text;
    if (!expect(Tok::LBracket, "after the element type (a scalar is f32[])"))
      return false;
    if (accept(Tok::RBracket))
      return true;
    do {
      if (at(Tok::RBracket))
        break;
      ExprPtr d = parseExpr();
      if (!d)
        return false;
      type.dims.push_back(std::move(d));
    } while (accept(Tok::Comma));
    return expect(Tok::RBracket, "to close the shape");
  }

  bool parseBlock(BlockDecl &block) {
    take(); // block
    if (!expectIdent(block.name, block.loc, "a block name"))
      return false;
    if (!expect(Tok::LParen, "after the block name"))
      return false;
    if (!at(Tok::RParen)) {
      do {
        BlockArg arg;
        arg.isConst = accept(Tok::KwConst);
        if (!expectIdent(arg.name, arg.loc,
                         arg.isConst ? "a constant name" : "an argument name"))
          return false;
        if (arg.isConst) {
          if (accept(Tok::Equal) && !(arg.defaultValue = parseExpr()))
            return false;
        } else {
          if (!expect(Tok::Colon, "after the argument name"))
            return false;
          if (!parseType(arg.type))
            return false;
        }
        block.args.push_back(std::move(arg));
      } while (accept(Tok::Comma));
    }
    if (!expect(Tok::RParen, "after the block arguments"))
      return false;
    if (accept(Tok::Arrow)) {
      if (!parseType(block.resultType))
        return false;
      block.hasResultType = true;
    }
    return parseBody(block.body, &block.endLoc);
  }

  bool parseModel(ModelDecl &model) {
    take(); // model
    if (!expectIdent(model.name, model.loc, "a model name"))
      return false;
    return parseBody(model.body, nullptr);
  }

  bool parseBody(std::vector<Stmt> &body, Loc *endLoc) {
    skipNewlines();
    if (!expect(Tok::LBrace, "to open the body"))
      return false;
    while (true) {
      skipNewlines();
      if (at(Tok::RBrace)) {
        if (endLoc)
          *endLoc = cur().loc;
        take();
        return true;
      }
      if (at(Tok::Eof)) {
        errorHere("expected '}' to close the body, got end of file");
        return false;
      }
      size_t before = pos_;
      if (!parseStmt(body) || !expectStmtEnd())
        skipStmt();
      if (pos_ == before) // never loop without progress
        take();
    }
  }

  bool parseStmt(std::vector<Stmt> &body) {
    Loc loc = cur().loc;
    switch (cur().kind) {
    case Tok::KwInput:
    case Tok::KwParam:
    case Tok::KwBuffer: {
      bool isBuffer = at(Tok::KwBuffer);
      bool isParam = isBuffer || at(Tok::KwParam);
      take();
      Stmt s(isParam ? StmtKind::Param : StmtKind::Input, loc);
      s.buffer = s.frozen = isBuffer;
      if (!expectIdent(s.name, s.nameLoc,
                       isBuffer  ? "a buffer name"
                       : isParam ? "a parameter name"
                                 : "an input name"))
        return false;
      if (!expect(Tok::Colon, "after the name"))
        return false;
      if (!parseType(s.type))
        return false;
      if (isParam && accept(Tok::Equal)) {
        s.init = parseExpr();
        if (!s.init)
          return false;
      }
      // `frozen` after a parameter: a word, not a keyword (names may be
      // `frozen` elsewhere).
      if (isParam && !isBuffer && at(Tok::Ident) && cur().text == "frozen") {
        take();
        s.frozen = true;
      }
      body.push_back(std::move(s));
      return true;
    }
    case Tok::KwOutput: {
      take();
      Stmt s(StmtKind::Output, loc);
      if (!expectIdent(s.name, s.nameLoc, "an output name"))
        return false;
      if (accept(Tok::Equal)) {
        s.value = parseExpr();
        if (!s.value)
          return false;
      }
      body.push_back(std::move(s));
      return true;
    }
    case Tok::KwLoss: {
      take();
      Stmt s(StmtKind::Loss, loc);
      s.name = "loss";
      s.nameLoc = loc;
      if (at(Tok::Ident))
        expectIdent(s.name, s.nameLoc, "");
      if (!expect(Tok::Equal, "after 'loss'"))
        return false;
      s.value = parseExpr();
      if (!s.value)
        return false;
      body.push_back(std::move(s));
      return true;
    }
    case Tok::KwReturn: {
      take();
      Stmt s(StmtKind::Return, loc);
      s.value = parseExpr();
      if (!s.value)
        return false;
      body.push_back(std::move(s));
      return true;
    }
    case Tok::Ident: {
      // `shard(NAME, AXIS=PLACEMENT, ...)` at the start of a statement is a
      // placement hint (no statement is a bare call, so nothing clashes).
      if (cur().text == "shard" && peekTok().kind == Tok::LParen) {
        Stmt s(StmtKind::Shard, loc);
        s.name = "shard";
        s.nameLoc = loc;
        s.value = parseCall();
        if (!s.value)
          return false;
        body.push_back(std::move(s));
        return true;
      }
      if (peekTok().kind != Tok::Equal)
        break;
      Stmt s(StmtKind::Assign, loc);
      s.nameLoc = loc;
      s.name = take().text;
      take(); // =
      if (at(Tok::KwRepeat)) {
        s.kind = StmtKind::Repeat;
        take();
        s.count = parseExpr();
        if (!s.count)
          return false;
        if (!expectIdent(s.repeatName, s.repeatNameLoc,
                         "a name for the copies after the repeat count "
                         "(repeat L blocks { ... })"))
          return false;
        if (!expect(Tok::LBrace, "to open the repeated body"))
          return false;
        skipNewlines();
        s.value = parseExpr();
        if (!s.value)
          return false;
        skipNewlines();
        if (!expect(Tok::RBrace,
                    "to close the repeated body (it holds one expression)"))
          return false;
      } else {
        s.value = parseExpr();
        if (!s.value)
          return false;
      }
      body.push_back(std::move(s));
      return true;
    }
    default:
      break;
    }
    errorHere("expected a statement (input, param, output, loss, return or "
              "NAME = expression), got " +
              describe(cur()));
    return false;
  }

  bool parseTrain(TrainDecl &train) {
    train.loc = take().loc; // train
    skipNewlines();
    if (!expect(Tok::LBrace, "to open the train section"))
      return false;
    while (true) {
      skipNewlines();
      if (accept(Tok::RBrace))
        return true;
      if (at(Tok::Eof)) {
        errorHere("expected '}' to close the train section, got end of file");
        return false;
      }
      size_t before = pos_;
      TrainItem item;
      bool ok = expectIdent(item.name, item.loc, "a setting name") &&
                expect(Tok::Equal, "after the setting name");
      if (ok) {
        item.value = parseExpr();
        ok = item.value && expectStmtEnd();
      }
      if (ok)
        train.items.push_back(std::move(item));
      else
        skipStmt();
      if (pos_ == before)
        take();
    }
  }

  // ---- Expressions ----
  // Nesting guard: every recursion of the parser passes through parseExpr
  // or a sign, and both count, so no input can exhaust the stack.
  struct DepthGuard {
    Parser &p;
    explicit DepthGuard(Parser &p) : p(p) { ++p.nesting_; }
    ~DepthGuard() { --p.nesting_; }
  };
  bool tooDeep() {
    if (nesting_ <= kMaxNesting)
      return false;
    errorHere("expression is nested too deeply (more than " +
              std::to_string(kMaxNesting) + " levels)");
    return true;
  }

  static unsigned depthOf(const ExprPtr &e) { return e ? e->depth : 0; }

  ExprPtr makeBinary(char op, Loc loc, ExprPtr lhs, ExprPtr rhs) {
    auto e = std::make_unique<Expr>(ExprKind::Binary, loc);
    e->op = op;
    e->depth = 1 + std::max(depthOf(lhs), depthOf(rhs));
    e->args.push_back(std::move(lhs));
    e->args.push_back(std::move(rhs));
    if (e->depth > kMaxExprDepth) {
      diag_.error(loc, "expression is too long (more than " +
                           std::to_string(kMaxExprDepth) +
                           " operators in a chain)");
      return nullptr;
    }
    return e;
  }

  ExprPtr parseExpr() {
    DepthGuard g(*this);
    if (tooDeep())
      return nullptr;
    ExprPtr lhs = parseTerm();
    while (lhs && (at(Tok::Plus) || at(Tok::Minus))) {
      char op = at(Tok::Plus) ? '+' : '-';
      Loc loc = take().loc;
      skipNewlines(); // an operator at the end of a line continues it
      ExprPtr rhs = parseTerm();
      if (!rhs)
        return nullptr;
      lhs = makeBinary(op, loc, std::move(lhs), std::move(rhs));
    }
    return lhs;
  }

  ExprPtr parseTerm() {
    ExprPtr lhs = parseUnary();
    while (lhs && (at(Tok::Star) || at(Tok::Slash) || at(Tok::At))) {
      char op = at(Tok::Star) ? '*' : at(Tok::Slash) ? '/' : '@';
      Loc loc = take().loc;
      skipNewlines();
      ExprPtr rhs = parseUnary();
      if (!rhs)
        return nullptr;
      lhs = makeBinary(op, loc, std::move(lhs), std::move(rhs));
    }
    return lhs;
  }

  // A level of nesting is what the user writes: a parenthesis, a list, a
  // call's arguments (each a parseExpr) or a sign. parseExpr counts the
  // first three; a sign counts here.
  ExprPtr parseUnary() {
    if (at(Tok::Minus) || at(Tok::Plus)) {
      DepthGuard g(*this);
      if (tooDeep())
        return nullptr;
      bool minus = at(Tok::Minus);
      Loc loc = take().loc;
      ExprPtr operand = parseUnary();
      if (!operand)
        return nullptr;
      if (!minus)
        return operand;
      auto e = std::make_unique<Expr>(ExprKind::Unary, loc);
      e->op = '-';
      e->depth = 1 + operand->depth;
      e->args.push_back(std::move(operand));
      return e;
    }
    return parsePrimary();
  }

  ExprPtr parsePrimary() {
    const Token &t = cur();
    switch (t.kind) {
    case Tok::Int: {
      auto e = std::make_unique<Expr>(ExprKind::Int, t.loc);
      e->intValue = t.intValue;
      take();
      return e;
    }
    case Tok::Float: {
      auto e = std::make_unique<Expr>(ExprKind::Float, t.loc);
      e->floatValue = t.floatValue;
      take();
      return e;
    }
    case Tok::KwTrue:
    case Tok::KwFalse: {
      auto e = std::make_unique<Expr>(ExprKind::Bool, t.loc);
      e->boolValue = t.kind == Tok::KwTrue;
      take();
      return e;
    }
    case Tok::Ident: {
      if (peekTok().kind == Tok::LParen)
        return parseCall();
      auto e = std::make_unique<Expr>(ExprKind::Name, t.loc);
      e->name = t.text;
      take();
      return e;
    }
    case Tok::LParen: {
      take();
      ExprPtr inner = parseExpr();
      if (!inner)
        return nullptr;
      if (!expect(Tok::RParen, "to close the parenthesis"))
        return nullptr;
      return inner;
    }
    case Tok::LBracket: {
      auto e = std::make_unique<Expr>(ExprKind::List, t.loc);
      take();
      while (!at(Tok::RBracket)) {
        ExprPtr item = parseExpr();
        if (!item)
          return nullptr;
        e->depth = std::max(e->depth, 1 + item->depth);
        e->args.push_back(std::move(item));
        if (!accept(Tok::Comma))
          break;
      }
      if (!expect(Tok::RBracket, "to close the list"))
        return nullptr;
      return e;
    }
    default:
      errorHere("expected an expression, got " + describe(t));
      return nullptr;
    }
  }

  ExprPtr parseCall() {
    auto e = std::make_unique<Expr>(ExprKind::Call, cur().loc);
    e->name = take().text;
    Loc open = cur().loc;
    take(); // (
    while (!at(Tok::RParen)) {
      if (at(Tok::Ident) && peekTok().kind == Tok::Equal) {
        KeywordArg kw;
        kw.loc = cur().loc;
        kw.name = take().text;
        take(); // =
        kw.value = parseExpr();
        if (!kw.value)
          return nullptr;
        e->depth = std::max(e->depth, 1 + kw.value->depth);
        e->kwargs.push_back(std::move(kw));
      } else {
        Loc argLoc = cur().loc;
        ExprPtr arg = parseExpr();
        if (!arg)
          return nullptr;
        if (!e->kwargs.empty()) {
          diag_.error(argLoc, "positional argument after a keyword argument");
          return nullptr;
        }
        e->depth = std::max(e->depth, 1 + arg->depth);
        e->args.push_back(std::move(arg));
      }
      if (!accept(Tok::Comma))
        break;
    }
    if (!expect(Tok::RParen, "to close the argument list")) {
      diag_.note(open, "the '(' it would close is here");
      return nullptr;
    }
    // `as NAME` names a block instance: a word, not a keyword (an
    // identifier cannot follow a call otherwise).
    if (at(Tok::Ident) && cur().text == "as") {
      take();
      if (!expectIdent(e->instanceName, e->instanceLoc,
                       "a name for the block instance after 'as'"))
        return nullptr;
    }
    return e;
  }

  const std::vector<Token> &toks_;
  DiagnosticEngine &diag_;
  size_t pos_ = 0;
  unsigned nesting_ = 0;
  size_t lastErrorPos_ = 0;
  bool reportedAny_ = false;
};

} // namespace

FileAST parse(const std::vector<Token> &tokens, DiagnosticEngine &diag) {
  return Parser(tokens, diag).run();
}

FileAST parseSource(const char *fileName, llvm::StringRef text,
                    DiagnosticEngine &diag) {
  std::vector<Token> tokens = lex(fileName, text, diag);
  return parse(tokens, diag);
}

} // namespace mgc::frontend
