// Compile-time numbers: constants, literals and the arithmetic between them
// (shapes like [B, T, H, D/H]), checked for overflow and division by zero.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include "llvm/ADT/StringRef.h"

namespace mgc::frontend {

struct Number {
  bool isInt = true;
  int64_t i = 0;
  double f = 0;

  static Number ofInt(int64_t v) { return Number{true, v, double(v)}; }
  static Number ofFloat(double v) { return Number{false, 0, v}; }
  double asDouble() const { return isInt ? double(i) : f; }
  // The integer value if this is an integer, or a float with an integral
  // value that fits in int64.
  std::optional<int64_t> asInt() const;
  std::string str() const; // "768", "0.02"
};

// The result of arithmetic on numbers, or why there is none.
struct NumberOrError {
  std::optional<Number> value;
  std::string error;
};

// Integers stay integers under + - * and under / when the division is exact;
// otherwise the result is a float (so D/H with D = 770, H = 12 is a float and
// is rejected where a dimension is needed).
NumberOrError applyBinary(char op, Number a, Number b);
NumberOrError applyNeg(Number a);

// Parses the text of a -D override: an integer or float literal, optionally
// negative. nullopt if it is not a number.
std::optional<Number> parseNumberText(llvm::StringRef text);

} // namespace mgc::frontend
