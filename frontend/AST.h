// The syntax tree of a .mg file, as written (no types, no constants folded).
#pragma once

#include "support/Loc.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mgc::frontend {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind : uint8_t {
  Int,    // 42
  Float,  // 3e-4
  Bool,   // true, false
  Name,   // x
  List,   // [a, b, c]
  Unary,  // -x
  Binary, // a + b, a @ b
  Call,   // f(a, b, key = c)
};

struct KeywordArg {
  std::string name;
  Loc loc;
  ExprPtr value;
};

struct Expr {
  ExprKind kind;
  Loc loc; // operators: the operator; calls: the callee name
  int64_t intValue = 0;
  double floatValue = 0;
  bool boolValue = false;
  std::string name; // Name, Call (callee)
  char op = 0;      // Unary: '-'; Binary: '+', '-', '*', '/', '@'
  // Unary: [operand]; Binary: [lhs, rhs]; List: elements; Call: positional.
  std::vector<ExprPtr> args;
  std::vector<KeywordArg> kwargs; // Call only
  // Call of a block only: `block(x) as NAME` names the instance.
  std::string instanceName;
  Loc instanceLoc;
  unsigned depth = 1;             // height of the tree below (bounded)

  Expr(ExprKind kind, Loc loc) : kind(kind), loc(loc) {}
};

// Where the text of an expression begins (the loc of a binary expression is
// its operator).
inline Loc startLoc(const Expr &e) {
  const Expr *x = &e;
  while (x->kind == ExprKind::Binary && x->args[0])
    x = x->args[0].get();
  return x->loc;
}

// f32[B, 4*D]
struct TypeExpr {
  Loc loc;
  std::string dtype;
  std::vector<ExprPtr> dims;
};

enum class StmtKind : uint8_t {
  Input,  // input x: f32[B, D]
  Param,  // param w: f32[D, H] = normal(0, 0.02) [frozen]
          // | buffer m: f32[C] = zeros
  Assign, // h = expr
  Repeat, // h = repeat L blocks { body }
  Output, // output name = expr  |  output name
  Loss,   // loss = expr  |  loss name = expr
  Return, // return expr
  Shard,  // shard(w, tp=S1): a placement hint; value is the call
};

struct Stmt {
  StmtKind kind;
  Loc loc; // the statement's first token
  std::string name;
  Loc nameLoc;
  TypeExpr type;          // Input, Param
  ExprPtr init;           // Param: the initialiser (Name or Call), may be null
  bool frozen = false;    // Param: not trained (`frozen`, or a buffer)
  bool buffer = false;    // Param: declared with `buffer`
  ExprPtr value;          // Assign/Output/Loss/Return value; Repeat body
  ExprPtr count;          // Repeat: the number of copies
  std::string repeatName; // Repeat: the name prefix of the copies
  Loc repeatNameLoc;

  Stmt(StmtKind kind, Loc loc) : kind(kind), loc(loc) {}
};

struct ConstDecl {
  std::string name;
  Loc loc;
  ExprPtr value;
};

// A tensor argument `x: f32[B, C, H, W]`, or a constant parameter
// `const C [= default]`: a number given by the call (`C = 64`), taken from
// a tensor argument whose type names it as a dimension, or its default.
struct BlockArg {
  std::string name;
  Loc loc;
  TypeExpr type;             // tensor arguments
  bool isConst = false;
  ExprPtr defaultValue;      // constant parameters, may be null
};

struct BlockDecl {
  std::string name;
  Loc loc;
  std::vector<BlockArg> args;
  TypeExpr resultType;
  bool hasResultType = false;
  std::vector<Stmt> body;
  Loc endLoc; // the closing brace
};

struct ModelDecl {
  std::string name;
  Loc loc;
  std::vector<Stmt> body;
};

struct TrainItem {
  std::string name;
  Loc loc;
  ExprPtr value; // a number, a name, or a call with keyword arguments
};

struct TrainDecl {
  Loc loc;
  std::vector<TrainItem> items;
};

struct FileAST {
  std::vector<ConstDecl> consts; // in order: a constant may use earlier ones
  std::vector<BlockDecl> blocks;
  std::vector<ModelDecl> models;
  std::vector<TrainDecl> trains;
};

} // namespace mgc::frontend
