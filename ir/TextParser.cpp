// Recursive descent over the tokens of TextLexer; the grammar is in
// docs/ir.md. Each syntax error is reported at the offending token; parsing
// then resumes at the next line, so one file can show several errors. A value
// whose definition failed is "poisoned": its uses fail quietly instead of
// adding "undefined value" errors that only repeat the first one.
#include "ir/TextParser.h"

#include "ir/TextLexer.h"
#include "ir/Verifier.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace mgc::ir {

namespace {

class TextParser {
public:
  TextParser(llvm::StringRef fileName, llvm::StringRef text,
             DiagnosticEngine &diag)
      : file_(internFileName(fileName)), lexer_(text), diag_(diag) {
    consume();
  }

  std::unique_ptr<Module> parse();

private:
  void consume() { tok_ = lexer_.next(); }
  Loc locOf(const Token &tok) const { return Loc{file_, tok.line, tok.col}; }
  LogicalResult errorAt(const Token &tok, const llvm::Twine &msg) {
    diag_.error(locOf(tok), msg);
    return failure();
  }
  // Reports that the current token is not what was expected; a lexer error
  // token reports its own message instead.
  LogicalResult unexpected(const llvm::Twine &expected) {
    if (tok_.is(TokenKind::Error))
      return errorAt(tok_, tok_.value);
    return errorAt(tok_,
                   "expected " + expected + ", found " + describeToken(tok_));
  }
  LogicalResult expect(TokenKind kind, const llvm::Twine &expected) {
    if (!tok_.is(kind))
      return unexpected(expected);
    consume();
    return success();
  }
  bool consumeIf(TokenKind kind) {
    if (!tok_.is(kind))
      return false;
    consume();
    return true;
  }

  LogicalResult parseModuleHeader();
  LogicalResult parseItem();
  LogicalResult parseArgument(ValueKind kind);
  LogicalResult parseInit(Init &init);
  LogicalResult parseOp();
  LogicalResult parseOutput();
  LogicalResult parseUpdate();
  LogicalResult parseValueRef(Value *&value);
  LogicalResult parseType(TensorType &type, const llvm::Twine &context);
  // {AXIS=PLACEMENT, ...}: placements R, P or S<dim>.
  LogicalResult parseSharding(Sharding &sharding);
  LogicalResult parseAttrDict(Attrs &attrs, const OpInfo *info);
  LogicalResult parseAttrValue(AttrValue &value, const AttrSpec *spec);
  LogicalResult parseInt(int64_t &value);
  LogicalResult parseNumber(double &value, const llvm::Twine &context);
  // An optional trailing loc(...); `loc` keeps its value when there is none.
  LogicalResult parseOptionalLoc(Loc &loc);
  // Checks that a value name is free and reserves it for this item.
  LogicalResult declareName(const Token &nameTok);
  void define(Value *value);

  const char *file_; // interned
  TextLexer lexer_;
  DiagnosticEngine &diag_;
  Token tok_;
  std::unique_ptr<Module> module_;
  llvm::StringMap<Value *> values_;
  llvm::StringSet<> poisoned_;
  std::string pendingName_; // the name the current item defines
};

std::unique_ptr<Module> TextParser::parse() {
  unsigned errorsBefore = diag_.errorCount();
  module_ = std::make_unique<Module>();
  if (failed(parseModuleHeader()))
    return nullptr;
  while (!tok_.is(TokenKind::RBrace) && !tok_.is(TokenKind::Eof)) {
    uint32_t itemLine = tok_.line;
    pendingName_.clear();
    if (succeeded(parseItem()))
      continue;
    if (!pendingName_.empty() && !values_.count(pendingName_))
      poisoned_.insert(pendingName_);
    // Resume at the first token of a later line (always makes progress:
    // the current token is on itemLine or after it).
    while (!tok_.is(TokenKind::Eof) && tok_.line <= itemLine)
      consume();
  }
  bool hadErrors = diag_.errorCount() != errorsBefore;
  if (tok_.is(TokenKind::Eof)) {
    // After an error the closing brace may have been skipped: do not pile
    // a second message on the first.
    if (!hadErrors)
      (void)unexpected("'}' at the end of the module");
    return nullptr;
  }
  consume(); // '}'
  if (!tok_.is(TokenKind::Eof) && !hadErrors) {
    (void)unexpected("end of file after the module");
    return nullptr;
  }
  if (diag_.errorCount() != errorsBefore)
    return nullptr;
  if (failed(verify(*module_, diag_)))
    return nullptr;
  return std::move(module_);
}

LogicalResult TextParser::parseModuleHeader() {
  if (!tok_.isIdent("module"))
    return unexpected("'module'");
  consume();
  if (!tok_.is(TokenKind::ModuleName))
    return unexpected("module name '@name' after 'module'");
  module_->setName(tok_.value);
  consume();
  if (tok_.isIdent("attributes")) {
    consume();
    if (!tok_.is(TokenKind::LBrace))
      return unexpected("'{' after 'attributes'");
    if (failed(parseAttrDict(module_->attrs(), nullptr)))
      return failure();
  }
  return expect(TokenKind::LBrace, "'{' to begin the module body");
}

LogicalResult TextParser::parseItem() {
  if (tok_.isIdent("input"))
    return parseArgument(ValueKind::Input);
  if (tok_.isIdent("param"))
    return parseArgument(ValueKind::Param);
  if (tok_.isIdent("state"))
    return parseArgument(ValueKind::State);
  if (tok_.isIdent("output"))
    return parseOutput();
  if (tok_.isIdent("update"))
    return parseUpdate();
  if (tok_.is(TokenKind::ValueName))
    return parseOp();
  return unexpected("'input', 'param', 'state', 'output', 'update', an op "
                    "('%name = ...') or '}'");
}

LogicalResult TextParser::declareName(const Token &nameTok) {
  if (values_.count(nameTok.value))
    return errorAt(nameTok, "redefinition of value " + describeToken(nameTok));
  pendingName_ = nameTok.value;
  return success();
}

void TextParser::define(Value *value) {
  values_[pendingName_] = value;
  pendingName_.clear();
}

LogicalResult TextParser::parseArgument(ValueKind kind) {
  bool persistent = kind != ValueKind::Input;
  Token keyword = tok_;
  consume();
  if (!tok_.is(TokenKind::ValueName))
    return unexpected(llvm::Twine("argument name '%name' after '") +
                      keyword.spelling + "'");
  Token nameTok = tok_;
  if (failed(declareName(nameTok)))
    return failure();
  consume();
  if (failed(expect(TokenKind::Colon, "':' after the argument name")))
    return failure();
  TensorType type;
  if (failed(parseType(type, "argument type after ':'")))
    return failure();
  Sharding sharding;
  if (tok_.is(TokenKind::LBrace) && failed(parseSharding(sharding)))
    return failure();
  Init init;
  if (persistent) {
    if (failed(expect(TokenKind::Equal,
                      llvm::Twine("'=' and an initialiser after the ") +
                          (kind == ValueKind::Param ? "parameter" : "state") +
                          " type")))
      return failure();
    if (failed(parseInit(init)))
      return failure();
  }
  bool frozen = kind == ValueKind::Param && tok_.is(TokenKind::Ident) &&
                tok_.spelling == "frozen";
  if (frozen)
    consume();
  Loc loc = locOf(keyword);
  if (failed(parseOptionalLoc(loc)))
    return failure();
  Graph &g = module_->graph();
  Value *arg = kind == ValueKind::Param ? g.addParam(nameTok.value, type, init, loc)
               : kind == ValueKind::State
                   ? g.addState(nameTok.value, type, init, loc)
                   : g.addInput(nameTok.value, type, loc);
  arg->setSharding(std::move(sharding));
  arg->setFrozen(frozen);
  define(arg);
  return success();
}

LogicalResult TextParser::parseInit(Init &init) {
  if (!tok_.is(TokenKind::Ident))
    return unexpected("initialiser (zeros, ones, xavier, normal(mean, std) "
                      "or uniform(low, high))");
  Token kindTok = tok_;
  llvm::StringRef word = kindTok.spelling;
  if (word == "zeros" || word == "ones" || word == "xavier") {
    init.kind = word == "zeros"  ? InitKind::Zeros
                : word == "ones" ? InitKind::Ones
                                 : InitKind::Xavier;
    consume();
    return success();
  }
  if (word != "normal" && word != "uniform" && word != "trunc_normal")
    return errorAt(kindTok, "unknown initialiser " + describeToken(kindTok) +
                                " (expected zeros, ones, xavier, normal, "
                                "uniform or trunc_normal)");
  init.kind = word == "normal"    ? InitKind::Normal
              : word == "uniform" ? InitKind::Uniform
                                  : InitKind::TruncNormal;
  consume();
  if (failed(expect(TokenKind::LParen, "'(' after '" + word + "'")) ||
      failed(parseNumber(init.a, "a number")) ||
      failed(expect(TokenKind::Comma,
                    "',' between the two numbers of '" + word + "'")) ||
      failed(parseNumber(init.b, "a number")) ||
      failed(expect(TokenKind::RParen,
                    "')' after the two numbers of '" + word + "'")))
    return failure();
  return success();
}

LogicalResult TextParser::parseOp() {
  Token resultTok = tok_;
  if (failed(declareName(resultTok)))
    return failure();
  consume();
  if (failed(expect(TokenKind::Equal, "'=' after the result name")))
    return failure();
  if (!tok_.is(TokenKind::Ident))
    return unexpected("op name");
  Token opTok = tok_;
  std::optional<OpKind> kind = lookupOpKind(opTok.spelling);
  if (!kind)
    return errorAt(opTok, "unknown op " + describeToken(opTok));
  consume();
  if (failed(expect(TokenKind::LParen,
                    "'(' after the op name '" + opTok.spelling + "'")))
    return failure();
  llvm::SmallVector<Value *, 3> operands;
  if (!tok_.is(TokenKind::RParen)) {
    do {
      Value *v = nullptr;
      if (failed(parseValueRef(v)))
        return failure();
      operands.push_back(v);
    } while (consumeIf(TokenKind::Comma));
  }
  if (failed(expect(TokenKind::RParen, "')' or ',' in the operand list")))
    return failure();
  Attrs attrs;
  bool hasAttrs = tok_.is(TokenKind::LBrace);
  if (hasAttrs && failed(parseAttrDict(attrs, &opInfo(*kind))))
    return failure();
  if (failed(expect(TokenKind::Colon, hasAttrs ? "':' after attributes"
                                               : "':' after operand list")))
    return failure();
  TensorType type;
  if (failed(parseType(type, "result type after ':'")))
    return failure();
  Sharding sharding;
  if (tok_.is(TokenKind::LBrace) && failed(parseSharding(sharding)))
    return failure();
  std::string scope;
  if (tok_.isIdent("scope")) {
    consume();
    if (!tok_.is(TokenKind::String))
      return unexpected("scope string after 'scope'");
    scope = tok_.value;
    consume();
  }
  Loc loc = locOf(resultTok);
  if (failed(parseOptionalLoc(loc)))
    return failure();
  // The declared type is kept as written: the verifier checks it against the
  // op's shape rule, so a wrong type is reported rather than fixed.
  Op *op = module_->graph().createOp(*kind, operands, std::move(attrs), type,
                                     loc, std::move(scope));
  op->result()->setSharding(std::move(sharding));
  define(op->result());
  return success();
}

LogicalResult TextParser::parseOutput() {
  Token keyword = tok_;
  consume();
  if (!tok_.is(TokenKind::Ident) && !tok_.is(TokenKind::String))
    return unexpected("output name after 'output'");
  std::string name =
      tok_.is(TokenKind::Ident) ? tok_.spelling.str() : tok_.value;
  consume();
  if (failed(expect(TokenKind::Equal, "'=' after the output name")))
    return failure();
  Value *value = nullptr;
  if (failed(parseValueRef(value)))
    return failure();
  bool isLoss = false;
  if (consumeIf(TokenKind::LBracket)) {
    if (!tok_.isIdent("loss"))
      return unexpected("'loss' in '[loss]'");
    consume();
    if (failed(expect(TokenKind::RBracket, "']' after 'loss'")))
      return failure();
    isLoss = true;
  }
  Loc loc = locOf(keyword);
  if (failed(parseOptionalLoc(loc)))
    return failure();
  module_->graph().addOutput(name, value, isLoss, loc);
  return success();
}

// update %target = %value: whether the target is a parameter or state and
// the types agree is the verifier's business.
LogicalResult TextParser::parseUpdate() {
  Token keyword = tok_;
  consume();
  if (!tok_.is(TokenKind::ValueName))
    return unexpected("the updated argument '%name' after 'update'");
  Value *target = nullptr;
  if (failed(parseValueRef(target)))
    return failure();
  if (failed(expect(TokenKind::Equal, "'=' after the updated argument")))
    return failure();
  Value *value = nullptr;
  if (failed(parseValueRef(value)))
    return failure();
  Loc loc = locOf(keyword);
  if (failed(parseOptionalLoc(loc)))
    return failure();
  module_->graph().addUpdate(target, value, loc);
  return success();
}

LogicalResult TextParser::parseValueRef(Value *&value) {
  if (!tok_.is(TokenKind::ValueName))
    return unexpected("value name '%name'");
  auto it = values_.find(tok_.value);
  if (it == values_.end()) {
    if (poisoned_.count(tok_.value))
      return failure(); // already reported where it was defined
    return errorAt(tok_, "use of undefined value " + describeToken(tok_));
  }
  value = it->second;
  consume();
  return success();
}

LogicalResult TextParser::parseSharding(Sharding &sharding) {
  if (failed(expect(TokenKind::LBrace, "'{' to begin a sharding")))
    return failure();
  do {
    if (!tok_.is(TokenKind::Ident))
      return unexpected("mesh axis name in the sharding, such as dp");
    Token axisTok = tok_;
    consume();
    if (sharding.find(axisTok.spelling))
      return errorAt(axisTok, "mesh axis '" + axisTok.spelling.str() +
                                  "' appears twice in the sharding");
    if (failed(expect(TokenKind::Equal, "'=' after the mesh axis")))
      return failure();
    std::optional<Placement> p;
    if (tok_.is(TokenKind::Ident))
      p = Placement::parse(tok_.spelling);
    if (!p)
      return unexpected("placement R, P or S<dim> (such as S0)");
    consume();
    sharding.set(axisTok.spelling, *p);
  } while (consumeIf(TokenKind::Comma));
  return expect(TokenKind::RBrace, "',' or '}' in the sharding");
}

LogicalResult TextParser::parseType(TensorType &type,
                                    const llvm::Twine &context) {
  if (!tok_.is(TokenKind::Ident))
    return unexpected(context);
  std::optional<DType> dtype = parseDType(tok_.spelling);
  if (!dtype)
    return errorAt(tok_, "unknown dtype " + describeToken(tok_));
  type.dtype = *dtype;
  type.shape.clear();
  consume();
  if (failed(expect(TokenKind::LBracket,
                    "'[' after the dtype (a scalar is written f32[])")))
    return failure();
  if (consumeIf(TokenKind::RBracket))
    return success();
  do {
    if (!tok_.is(TokenKind::Integer))
      return unexpected("dimension size");
    Token dimTok = tok_;
    int64_t dim = 0;
    if (failed(parseInt(dim)))
      return failure();
    if (dim < 0)
      return errorAt(dimTok, "dimension size must not be negative, found " +
                                 describeToken(dimTok));
    type.shape.push_back(dim);
  } while (consumeIf(TokenKind::Comma));
  return expect(TokenKind::RBracket, "',' or ']' in the shape");
}

LogicalResult TextParser::parseAttrDict(Attrs &attrs, const OpInfo *info) {
  consume(); // '{'
  if (consumeIf(TokenKind::RBrace))
    return success();
  do {
    if (!tok_.is(TokenKind::Ident) && !tok_.is(TokenKind::String))
      return unexpected("attribute name");
    Token nameTok = tok_;
    std::string name =
        nameTok.is(TokenKind::Ident) ? nameTok.spelling.str() : nameTok.value;
    if (attrs.has(name))
      return errorAt(nameTok, "duplicate attribute " + describeToken(nameTok));
    consume();
    if (failed(expect(TokenKind::Equal, "'=' after the attribute name")))
      return failure();
    AttrValue value;
    if (failed(parseAttrValue(value, info ? info->findAttr(name) : nullptr)))
      return failure();
    attrs.set(name, std::move(value));
  } while (consumeIf(TokenKind::Comma));
  return expect(TokenKind::RBrace, "',' or '}' in the attribute dictionary");
}

LogicalResult TextParser::parseAttrValue(AttrValue &value,
                                         const AttrSpec *spec) {
  switch (tok_.kind) {
  case TokenKind::Ident:
    if (tok_.isIdent("true") || tok_.isIdent("false")) {
      value = tok_.isIdent("true");
      consume();
      return success();
    }
    if (tok_.isIdent("nan") || tok_.isIdent("inf"))
      break;
    return unexpected("attribute value");
  case TokenKind::String:
    value = tok_.value;
    consume();
    return success();
  case TokenKind::Integer: {
    int64_t v = 0;
    if (failed(parseInt(v)))
      return failure();
    // An integer literal is a float where the op table wants a float.
    if (spec && spec->type == AttrType::Float)
      value = static_cast<double>(v);
    else
      value = v;
    return success();
  }
  case TokenKind::Float:
    break;
  case TokenKind::LBracket: {
    consume();
    std::vector<int64_t> list;
    if (!tok_.is(TokenKind::RBracket)) {
      do {
        if (!tok_.is(TokenKind::Integer))
          return unexpected("integer in the list");
        int64_t v = 0;
        if (failed(parseInt(v)))
          return failure();
        list.push_back(v);
      } while (consumeIf(TokenKind::Comma));
    }
    if (failed(expect(TokenKind::RBracket, "',' or ']' in the list")))
      return failure();
    value = std::move(list);
    return success();
  }
  default:
    return unexpected("attribute value");
  }
  double d = 0;
  if (failed(parseNumber(d, "attribute value")))
    return failure();
  value = d;
  return success();
}

LogicalResult TextParser::parseInt(int64_t &value) {
  llvm::StringRef s = tok_.spelling;
  auto [ptr, ec] = std::from_chars(s.begin(), s.end(), value);
  if (ec != std::errc() || ptr != s.end())
    return errorAt(tok_, "integer out of range: " + describeToken(tok_));
  consume();
  return success();
}

LogicalResult TextParser::parseNumber(double &value,
                                      const llvm::Twine &context) {
  if (tok_.isIdent("nan") || tok_.isIdent("inf")) {
    value = tok_.isIdent("nan") ? std::numeric_limits<double>::quiet_NaN()
                                : std::numeric_limits<double>::infinity();
    consume();
    return success();
  }
  if (!tok_.is(TokenKind::Integer) && !tok_.is(TokenKind::Float))
    return unexpected(context);
  llvm::StringRef s = tok_.spelling;
  if (s == "-inf") {
    value = -std::numeric_limits<double>::infinity();
    consume();
    return success();
  }
  auto [ptr, ec] = std::from_chars(s.begin(), s.end(), value);
  if (ec == std::errc::result_out_of_range) {
    // from_chars also refuses values that underflow to a subnormal; only
    // those that overflow are out of range for us. strtod decides (the
    // lexeme holds only digits, sign, '.', and 'e', so the locale does not
    // matter beyond the decimal point, which C programs keep as '.').
    std::string copy = s.str();
    double d = std::strtod(copy.c_str(), nullptr);
    if (std::isinf(d))
      return errorAt(tok_, "number out of range: " + describeToken(tok_));
    value = d;
  } else if (ec != std::errc() || ptr != s.end()) {
    return errorAt(tok_, "invalid number " + describeToken(tok_));
  }
  consume();
  return success();
}

LogicalResult TextParser::parseOptionalLoc(Loc &loc) {
  if (!tok_.isIdent("loc"))
    return success();
  consume();
  if (failed(expect(TokenKind::LParen, "'(' after 'loc'")))
    return failure();
  if (tok_.isIdent("unknown")) {
    consume();
    loc = Loc{};
    return expect(TokenKind::RParen, "')' after 'unknown'");
  }
  if (!tok_.is(TokenKind::String))
    return unexpected("file name string or 'unknown' in loc(...)");
  std::string fileName = tok_.value;
  consume();
  int64_t line = 0, col = 0;
  if (failed(expect(TokenKind::Colon, "':' after the file name")))
    return failure();
  if (!tok_.is(TokenKind::Integer))
    return unexpected("line number");
  Token lineTok = tok_;
  if (failed(parseInt(line)))
    return failure();
  if (line < 1 || line > std::numeric_limits<uint32_t>::max())
    return errorAt(lineTok,
                   "line number out of range: " + describeToken(lineTok));
  if (failed(expect(TokenKind::Colon, "':' after the line number")))
    return failure();
  if (!tok_.is(TokenKind::Integer))
    return unexpected("column number");
  Token colTok = tok_;
  if (failed(parseInt(col)))
    return failure();
  if (col < 0 || col > std::numeric_limits<uint32_t>::max())
    return errorAt(colTok,
                   "column number out of range: " + describeToken(colTok));
  if (failed(expect(TokenKind::RParen, "')' to close loc(...)")))
    return failure();
  loc = Loc::make(fileName, static_cast<uint32_t>(line),
                  static_cast<uint32_t>(col));
  return success();
}

} // namespace

std::unique_ptr<Module> parseModuleText(llvm::StringRef fileName,
                                        llvm::StringRef text,
                                        DiagnosticEngine &diag) {
  // Register the text so that diagnostics show the line and a caret.
  if (diag.sourceText(fileName).empty())
    diag.addSource(fileName, text);
  return TextParser(fileName, text, diag).parse();
}

} // namespace mgc::ir
