// The lexer, the parser and constant arithmetic.
#include "frontend/ConstEval.h"
#include "frontend/Lexer.h"
#include "frontend/Parser.h"

#include "llvm/Support/raw_ostream.h"

#include <doctest/doctest.h>

#include <string>

using namespace mgc;
using namespace mgc::frontend;

namespace {

struct Lexed {
  std::vector<Token> tokens;
  std::string diags;
};

Lexed lexText(const std::string &text) {
  Lexed r;
  llvm::raw_string_ostream os(r.diags);
  DiagnosticEngine diag(os);
  diag.addSource("t.mg", text);
  r.tokens = lex(internFileName("t.mg"), text, diag);
  os.flush();
  return r;
}

std::vector<Tok> kinds(const std::vector<Token> &tokens) {
  std::vector<Tok> k;
  for (const Token &t : tokens)
    k.push_back(t.kind);
  return k;
}

struct Parsed {
  FileAST ast;
  std::string diags;
  unsigned errors = 0;
};

Parsed parseText(const std::string &text) {
  Parsed r;
  llvm::raw_string_ostream os(r.diags);
  DiagnosticEngine diag(os);
  diag.addSource("t.mg", text);
  r.ast = parseSource(internFileName("t.mg"), text, diag);
  os.flush();
  r.errors = diag.errorCount();
  return r;
}

} // namespace

TEST_CASE("frontend lexer: tokens, numbers, keywords and positions") {
  Lexed l = lexText("const D = 3e-4 // comment\nx @ w -> 1.5 .5 12");
  CHECK(l.diags.empty());
  CHECK(kinds(l.tokens) ==
        std::vector<Tok>{Tok::KwConst, Tok::Ident, Tok::Equal, Tok::Float,
                         Tok::Newline, Tok::Ident, Tok::At, Tok::Ident,
                         Tok::Arrow, Tok::Float, Tok::Float, Tok::Int,
                         Tok::Newline, Tok::Eof});
  CHECK(l.tokens[3].floatValue == doctest::Approx(3e-4));
  CHECK(l.tokens[11].intValue == 12);
  CHECK(l.tokens[5].loc.line == 2);
  CHECK(l.tokens[5].loc.col == 1);
  CHECK(l.tokens[6].loc.col == 3);
}

TEST_CASE("frontend lexer: newlines inside brackets do not end statements") {
  Lexed l = lexText("f(a,\n  b)\n[1,\n2]\n{\n}");
  CHECK(kinds(l.tokens) ==
        std::vector<Tok>{Tok::Ident, Tok::LParen, Tok::Ident, Tok::Comma,
                         Tok::Ident, Tok::RParen, Tok::Newline, Tok::LBracket,
                         Tok::Int, Tok::Comma, Tok::Int, Tok::RBracket,
                         Tok::Newline, Tok::LBrace, Tok::Newline, Tok::RBrace,
                         Tok::Newline, Tok::Eof});
}

TEST_CASE("frontend lexer: bad characters and numbers are reported") {
  Lexed l = lexText("x $ 99999999999999999999 1e999 2x");
  CHECK(l.diags.find("t.mg:1:3: error: unexpected character '$'") !=
        std::string::npos);
  CHECK(l.diags.find("is too large") != std::string::npos);
  CHECK(l.diags.find("out of range") != std::string::npos);
  CHECK(l.diags.find("malformed number '2x'") != std::string::npos);
  CHECK(l.tokens.back().kind == Tok::Eof);
}

TEST_CASE("frontend parser: precedence and associativity") {
  Parsed p = parseText("const A = 1 - 2 - 3 * 4 / -5\n");
  REQUIRE(p.errors == 0);
  REQUIRE(p.ast.consts.size() == 1);
  const Expr &e = *p.ast.consts[0].value;
  // ((1 - 2) - ((3 * 4) / (-5)))
  REQUIRE(e.kind == ExprKind::Binary);
  CHECK(e.op == '-');
  CHECK(e.args[0]->kind == ExprKind::Binary);
  CHECK(e.args[0]->op == '-');
  CHECK(e.args[1]->op == '/');
  CHECK(e.args[1]->args[0]->op == '*');
  CHECK(e.args[1]->args[1]->kind == ExprKind::Unary);
}

TEST_CASE("frontend parser: declarations and statements") {
  Parsed p = parseText(R"(
const B = 2, D = 4
block f(x: f32[B, D], y: f32[D]) -> f32[B, D] {
  param w: f32[D, D] = normal(0, 0.02)
  return x @ w + y
}
model m {
  input x: f32[B, D]
  h = repeat 3 layers { f(h, b) }
  output out = softmax(x, axis = -1)
  loss = mse(x, x)
}
train { optimizer = sgd(lr = 0.1) }
)");
  CHECK(p.diags == "");
  REQUIRE(p.ast.consts.size() == 2);
  REQUIRE(p.ast.blocks.size() == 1);
  const BlockDecl &b = p.ast.blocks[0];
  CHECK(b.args.size() == 2);
  CHECK(b.hasResultType);
  CHECK(b.body.size() == 2);
  CHECK(b.body[0].kind == StmtKind::Param);
  CHECK(b.body[0].init->name == "normal");
  REQUIRE(p.ast.models.size() == 1);
  const auto &body = p.ast.models[0].body;
  REQUIRE(body.size() == 4);
  CHECK(body[1].kind == StmtKind::Repeat);
  CHECK(body[1].repeatName == "layers");
  CHECK(body[2].kind == StmtKind::Output);
  CHECK(body[2].value->kwargs.size() == 1);
  CHECK(body[3].kind == StmtKind::Loss);
  CHECK(body[3].name == "loss");
  REQUIRE(p.ast.trains.size() == 1);
  CHECK(p.ast.trains[0].items[0].value->name == "sgd");
}

TEST_CASE("frontend parser: recovers at the next statement") {
  Parsed p = parseText("model m {\n  a = (1 + )\n  b = 2 2\n  c = 3\n}\n");
  CHECK(p.errors == 2);
  REQUIRE(p.ast.models.size() == 1);
  // `c = 3` survives both bad lines.
  bool sawC = false;
  for (const Stmt &s : p.ast.models[0].body)
    sawC |= s.name == "c";
  CHECK(sawC);
}

TEST_CASE("frontend parser: deep nesting is an error, not a crash") {
  std::string deep = "const A = " + std::string(100000, '(') + "1" +
                     std::string(100000, ')') + "\n";
  Parsed p = parseText(deep);
  CHECK(p.errors >= 1);
  CHECK(p.diags.find("nested too deeply") != std::string::npos);
  std::string chain = "const A = 1";
  for (int i = 0; i < 100000; ++i)
    chain += " + 1";
  Parsed q = parseText(chain + "\n");
  CHECK(q.diags.find("expression is too long") != std::string::npos);
  std::string minus = "const A = " + std::string(100000, '-') + "1\n";
  Parsed r = parseText(minus);
  CHECK(r.diags.find("nested too deeply") != std::string::npos);
}

TEST_CASE("frontend constants: checked arithmetic") {
  auto i = [](int64_t v) { return Number::ofInt(v); };
  CHECK(applyBinary('/', i(768), i(12)).value->isInt);
  CHECK(applyBinary('/', i(768), i(12)).value->i == 64);
  NumberOrError inexact = applyBinary('/', i(7), i(2));
  REQUIRE(inexact.value);
  CHECK(!inexact.value->isInt);
  CHECK(inexact.value->f == 3.5);
  CHECK(!applyBinary('/', i(1), i(0)).value);
  CHECK(applyBinary('/', i(1), i(0)).error.find("division by zero") !=
        std::string::npos);
  CHECK(!applyBinary('*', i(INT64_MAX / 2), i(3)).value);
  CHECK(!applyBinary('+', i(INT64_MAX), i(1)).value);
  CHECK(!applyBinary('-', i(INT64_MIN), i(1)).value);
  CHECK(!applyBinary('/', i(INT64_MIN), i(-1)).value);
  CHECK(!applyNeg(i(INT64_MIN)).value);
  CHECK(
      !applyBinary('*', Number::ofFloat(1e300), Number::ofFloat(1e300)).value);
  CHECK(applyBinary('+', i(1), Number::ofFloat(0.5)).value->f == 1.5);
}

TEST_CASE("frontend constants: -D values") {
  CHECK(parseNumberText("512")->i == 512);
  CHECK(parseNumberText("-3")->i == -3);
  CHECK(parseNumberText("3e-4")->f == doctest::Approx(3e-4));
  CHECK(!parseNumberText("3e-4")->isInt);
  CHECK(!parseNumberText("abc"));
  CHECK(!parseNumberText(""));
  CHECK(!parseNumberText("1x"));
  CHECK(!parseNumberText("inf"));
  CHECK(!parseNumberText("nan"));
  CHECK(!parseNumberText("0x10"));
  CHECK(!parseNumberText("99999999999999999999"));
}

TEST_CASE("frontend parser: a trailing operator continues the line") {
  Parsed p = parseText("const A = 1 +\n  2 *\n  3, B = [1, 2,]\n");
  CHECK(p.diags == "");
  REQUIRE(p.ast.consts.size() == 2);
  const Expr &a = *p.ast.consts[0].value;
  REQUIRE(a.kind == ExprKind::Binary);
  CHECK(a.op == '+');
  CHECK(a.args[1]->op == '*');
  CHECK(p.ast.consts[1].value->args.size() == 2);
  // Without the operator, the line ends the statement.
  Parsed q = parseText("const A = 1\n  + 2\n");
  CHECK(q.errors == 1);
}
