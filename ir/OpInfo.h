// What the IR knows about each op kind, generated from OpKinds.def.
#pragma once

#include "ir/Attrs.h"
#include "ir/Types.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>
#include <variant>

namespace mgc::ir {

enum class OpKind : uint16_t {
#define MGC_OP(Id, Name, Arity, AttrSpec, Rule, Traits, Summary) Id,
#include "ir/OpKinds.def"
};

enum OpTrait : unsigned {
  kNone = 0,
  kElementwise = 1u << 0, // result[i] depends on operand[i] only
  kCommutative = 1u << 1,
  kStochastic = 1u << 2, // depends on a seed (never merged by CSE unless equal)
  kReduction = 1u << 3,
  kInternal = 1u << 4,   // created by passes, not written in the language
  kCollective = 1u << 5, // communicates over a mesh axis (the comm queue)
  // Its result jumps or kinks where its operands cross a value (relu at 0,
  // max where two elements tie): an operand within rounding of that point
  // can take the other branch in another float order.
  kBranches = 1u << 6,
};

// The operands of an op as the shape rule sees them.
struct ShapeQuery {
  llvm::StringRef opName; // for messages
  llvm::ArrayRef<TensorType> operands;
  const Attrs &attrs;
};

// A result type, or a message that says what is wrong (no location: the
// caller knows where the op came from).
class TypeOrError {
public:
  TypeOrError(TensorType type) : value_(std::move(type)) {}
  static TypeOrError error(std::string message) {
    TypeOrError r;
    r.value_ = std::move(message);
    return r;
  }
  bool ok() const { return value_.index() == 0; }
  const TensorType &type() const { return std::get<0>(value_); }
  const std::string &message() const { return std::get<1>(value_); }

private:
  TypeOrError() = default;
  std::variant<TensorType, std::string> value_;
};

using ShapeRule = TypeOrError (*)(const ShapeQuery &query);

struct AttrSpec {
  std::string name;
  AttrType type;
  std::optional<AttrValue> defaultValue; // none: required
};

struct OpInfo {
  OpKind kind;
  llvm::StringRef name;
  int arity; // -1: variadic, at least one operand
  llvm::SmallVector<AttrSpec, 3> attrs;
  ShapeRule shapeRule;
  unsigned traits;
  llvm::StringRef summary;

  bool has(OpTrait t) const { return (traits & t) != 0; }
  const AttrSpec *findAttr(llvm::StringRef attrName) const;
};

const OpInfo &opInfo(OpKind kind);
std::optional<OpKind> lookupOpKind(llvm::StringRef name);
llvm::ArrayRef<OpInfo> allOpInfos();
inline llvm::StringRef opName(OpKind kind) { return opInfo(kind).name; }

// Checks arity and attributes against the table, then applies the shape rule.
// Missing attributes with defaults are NOT filled in here (see fillDefaults).
TypeOrError inferResultType(OpKind kind, llvm::ArrayRef<TensorType> operands,
                            const Attrs &attrs);
// Adds every missing attribute that has a default.
void fillDefaultAttrs(OpKind kind, Attrs &attrs);

} // namespace mgc::ir
