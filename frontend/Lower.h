// Checks a parsed .mg file and lowers it to an ir::Module: constants are
// folded, shapes are computed by the op table's rules, NumPy broadcasting
// becomes explicit `broadcast` ops, and blocks are instantiated with
// hierarchical parameter names and scopes.
#pragma once

#include "frontend/AST.h"
#include "frontend/ConstEval.h"
#include "frontend/Frontend.h"
#include "ir/Builder.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace mgc::frontend {

// Limits that keep any input from exhausting time or memory.
constexpr int64_t kMaxRepeat = 4096;
constexpr int64_t kMaxElements = int64_t(1) << 40; // per tensor
constexpr size_t kMaxOps = 2'000'000;
constexpr size_t kMaxInstances = 200'000; // block instances per model
constexpr size_t kMaxBlockDepth = 64;     // nested block calls

// A value during lowering: a tensor, or a compile-time number, bool or list.
struct Val {
  enum Kind : uint8_t { Poison, Tensor, Num, Bool, List } kind = Poison;
  ir::Value *tensor = nullptr;
  Number num;
  bool b = false;
  std::vector<Val> list;

  static Val poison() { return Val{}; }
  static Val ofTensor(ir::Value *v) {
    Val r;
    r.kind = v ? Tensor : Poison;
    r.tensor = v;
    return r;
  }
  static Val ofNum(Number n) {
    Val r;
    r.kind = Num;
    r.num = n;
    return r;
  }
  bool isPoison() const { return kind == Poison; }
};

enum class BindingKind : uint8_t { Arg, Input, Param, Local };

struct Binding {
  Val val;
  Loc loc; // where the name got this value
  BindingKind kind;
};

// The names visible in a model body or in one block instance.
struct Frame {
  std::string path; // "" for the model, "blocks.3.attn" for an instance
  const BlockDecl *block = nullptr;
  const std::vector<Stmt> *body = nullptr; // the statements being lowered
  std::map<std::string, Binding> names;
  std::map<std::string, int> instanceCounts; // block name -> calls so far
  bool returned = false;
  Val result;
};

class Lowerer {
public:
  Lowerer(const char *fileName, const CompileOptions &options,
          DiagnosticEngine &diag);
  std::unique_ptr<ir::Module> run(const FileAST &file);

  // ---- Reporting (Lower.cpp) ----
  // Reports once per (location, message): a bad line inside a block is not
  // repeated for every copy. Returns whether it was printed; notes follow
  // only printed errors.
  bool error(Loc loc, const std::string &msg);
  void note(Loc loc, const std::string &msg);
  // Whether a did-you-mean search is worth its cost: the next error is
  // printed. (Each search scans every name; with N unknown names searching
  // for all of them would be quadratic.)
  bool wantHints() const { return diag_.printsErrors(); }
  // "; did you mean 'x'?" or "".
  static std::string suggest(llvm::StringRef name,
                             const std::vector<std::string> &candidates);

private:
  // ---- Constants, types, initialisers (LowerDecls.cpp) ----
  void lowerConsts(const FileAST &file);
  // Adds --batch-size's define to `defines`, or reports why the batch
  // cannot be sized.
  void defineBatchSize(const FileAST &file, ConstOverrides &defines);
  std::optional<Number> evalConst(const Expr &e);
  std::optional<ir::TensorType> evalType(const TypeExpr &t);
  // The initialiser of a parameter of type `type` (kaiming_* need its fans).
  std::optional<ir::Init> evalInit(const Expr *e, const ir::TensorType &type);
  bool checkSize(const ir::TensorType &t, Loc loc);

  // ---- Blocks, statements, train section, warnings (Lower.cpp) ----
  void collectBlocks(const FileAST &file);
  void checkRecursion();
  void lowerTrain(const FileAST &file);
  void lowerStmts(const std::vector<Stmt> &stmts, Frame &frame);
  void lowerStmt(const Stmt &s, Frame &frame);
  void lowerRepeat(const Stmt &s, Frame &frame);
  bool checkNewName(const std::string &name, Loc loc, Frame &frame);
  void warnUnused();
  std::string qualify(const Frame &frame, const std::string &name) const {
    return frame.path.empty() ? name : frame.path + "." + name;
  }

  // ---- Placement hints: shard(w, tp=S1) (LowerShard.cpp) ----
  void lowerShard(const Stmt &s, Frame &frame);
  // The argument a hint names, or null after reporting why there is none.
  ir::Value *hintTarget(const Expr &nameExpr, Frame &frame);
  std::optional<ir::Placement> hintPlacement(const Expr &e,
                                             const ir::Value &target,
                                             const std::string &what);

  // ---- Calls of built-ins and blocks (LowerCall.cpp) ----
  Val lowerCall(const Expr &e, Frame &frame);
  Val lowerBuiltinCall(const Expr &e, const struct Builtin &b, Frame &frame);
  // The built-ins written with other ops (BuiltinForm::Composite) and
  // where (BuiltinForm::Select).
  Val lowerComposite(const Expr &e, const struct Builtin &b, Frame &frame);
  Val lowerSelect(const Expr &e, std::vector<Val> pos, Frame &frame);
  // batch_norm (BuiltinForm::BatchNorm, LowerBatchNorm.cpp).
  Val lowerBatchNorm(const Expr &e, Frame &frame);
  Val callBlock(const Expr &e, const BlockDecl &block, std::string path,
                Frame &frame);
  Val instantiate(const BlockDecl &block, std::vector<Val> args,
                  const std::map<std::string, std::pair<Number, Loc>> &given,
                  const Expr &call, std::string path);

  // ---- Expressions (LowerExpr.cpp) ----
  Val lowerExpr(const Expr &e, Frame &frame);
  Val lowerName(const Expr &e, Frame &frame);
  Val lowerBinary(char op, Loc loc, const Val &a, const Val &b, const Expr *ea,
                  const Expr *eb, Frame &frame);
  Val lowerElementwise(ir::OpKind kind, Loc loc, Val a, Val b, const Expr *ea,
                       const Expr *eb, Frame &frame, bool fromOperator = false);
  Val lowerMatmul(Loc loc, const Val &a, const Val &b, const Expr *ea,
                  const Expr *eb, Frame &frame);
  // Creates an op at `loc`; reports the shape rule's message there.
  Val create(ir::OpKind kind, llvm::ArrayRef<ir::Value *> operands,
             ir::Attrs attrs, Loc loc,
             llvm::ArrayRef<const Expr *> operandExprs, Frame &frame);
  ir::Value *toTensor(const Val &v, ir::DType dtype, Loc loc);
  ir::Value *broadcastTo(ir::Value *v, llvm::ArrayRef<int64_t> shape, Loc loc);
  // Notes saying where the operands named in `exprs` got their types.
  void noteOperands(llvm::ArrayRef<const Expr *> exprs, Frame &frame);
  bool overLimits(Loc loc);

  const char *file_;
  const CompileOptions &options_;
  DiagnosticEngine &diag_;
  std::unique_ptr<ir::Module> module_;
  std::unique_ptr<ir::Builder> builder_;

  struct ConstInfo {
    Number value;
    Loc loc;
  };
  // The constants in scope: the file's (globalConsts_), and inside a block
  // instance its constant parameters too.
  std::map<std::string, ConstInfo> consts_;
  std::map<std::string, ConstInfo> globalConsts_;
  std::optional<Number> evalConstCall(const Expr &e);
  bool bindBlockConstants(
      const BlockDecl &block, llvm::ArrayRef<Val> args,
      const std::map<std::string, std::pair<Number, Loc>> &given,
      const Expr &call, std::map<std::string, ConstInfo> &out);
  // Constants whose definition (or -D override) had an error, reported
  // there: their uses are not reported again as unknown.
  std::set<std::string> badConsts_;
  std::map<std::string, const BlockDecl *> blocks_;
  std::set<const BlockDecl *> badBlocks_;  // recursive: never instantiated
  std::set<std::string> argumentNames_;    // inputs and parameters so far
  // How the first input's leading dimension is written (a constant's name
  // or a number): the batch, which every input written the same way shares
  // (markBatch). Unset before the first input of rank >= 1.
  std::optional<std::string> batchDim_;
  std::set<const ir::Value *> updatedBuffers_; // by a batch_norm
  void markBatch(const TypeExpr &type, ir::Value *input);
  std::map<std::string, Loc> repeatNames_; // qualified repeat prefixes
  // Paths of the block instances so far, given by `as NAME` or made from
  // the block's name, and where each was made.
  std::map<std::string, Loc> instancePaths_;
  std::set<const BlockDecl *> missingReturnReported_;
  // Constants reported as a non-integer element of a list of integers.
  std::set<std::string> nonIntegerConstsReported_;
  std::vector<const BlockDecl *> callStack_;
  std::set<std::pair<std::string, std::string>> reported_; // (loc, message)
  bool lastPrinted_ = true;
  bool aborted_ = false; // a size limit was hit: stop lowering
  size_t instances_ = 0;
  int64_t dropoutSeed_ = 0;
  const Stmt *lossStmt_ = nullptr;
  std::map<std::string, Loc> outputLocs_;
  // Where each argument got its hint on each mesh axis.
  std::map<const ir::Value *, std::map<std::string, Loc>> hintLocs_;
};

} // namespace mgc::frontend
