// Op attributes: a small, ordered set of named constants (axis = -1,
// perm = [0, 2, 1, 3], eps = 1e-5). Which attributes an op takes, and of
// which type, is declared once in OpKinds.def.
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace mgc::ir {

enum class AttrType : uint8_t { Bool, Int, Float, String, Ints };
llvm::StringRef attrTypeName(AttrType type); // "bool", "int", ...

using AttrValue =
    std::variant<bool, int64_t, double, std::string, std::vector<int64_t>>;
AttrType attrTypeOf(const AttrValue &value);

// Attributes kept sorted by name, so that printing and comparing them is
// canonical whatever order they were set in.
class Attrs {
public:
  using Entry = std::pair<std::string, AttrValue>;

  Attrs() = default;
  Attrs(std::initializer_list<Entry> entries) {
    for (const Entry &e : entries)
      set(e.first, e.second);
  }

  void set(llvm::StringRef name, AttrValue value);
  const AttrValue *find(llvm::StringRef name) const;
  bool has(llvm::StringRef name) const { return find(name) != nullptr; }
  bool erase(llvm::StringRef name);

  // Typed accessors; they assume the verifier has checked the attribute.
  bool getBool(llvm::StringRef name) const;
  int64_t getInt(llvm::StringRef name) const;
  double getFloat(llvm::StringRef name) const;
  const std::string &getString(llvm::StringRef name) const;
  const std::vector<int64_t> &getInts(llvm::StringRef name) const;

  llvm::ArrayRef<Entry> entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }

  friend bool operator==(const Attrs &a, const Attrs &b) {
    return a.entries_ == b.entries_;
  }

private:
  llvm::SmallVector<Entry, 2> entries_;
};

// How an attribute value prints in IR text and in messages: 3, 0.5, true,
// "f32", [0, 2, 1]. Floats print with the fewest digits that read back to the
// same double, so the text form round-trips exactly.
std::string formatAttrValue(const AttrValue &value);
std::string formatDouble(double value);

} // namespace mgc::ir
