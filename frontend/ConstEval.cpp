#include "frontend/ConstEval.h"

#include "ir/Attrs.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace mgc::frontend {

std::optional<int64_t> Number::asInt() const {
  if (isInt)
    return i;
  // 2^63 is exactly representable; anything at or above it does not fit.
  if (std::isfinite(f) && f == std::floor(f) && f >= -9.2233720368547758e18 &&
      f < 9.2233720368547758e18)
    return static_cast<int64_t>(f);
  return std::nullopt;
}

std::string Number::str() const {
  return isInt ? std::to_string(i) : ir::formatDouble(f);
}

namespace {

NumberOrError ok(Number n) { return NumberOrError{n, {}}; }
NumberOrError fail(std::string msg) {
  return NumberOrError{std::nullopt, std::move(msg)};
}

NumberOrError checkFloat(double v, char op, Number a, Number b) {
  if (!std::isfinite(v))
    return fail("constant arithmetic " + a.str() + " " + op + " " + b.str() +
                " overflows");
  return ok(Number::ofFloat(v));
}

} // namespace

NumberOrError applyBinary(char op, Number a, Number b) {
  if (op == '/' && b.asDouble() == 0)
    return fail("division by zero in constant expression " + a.str() + " / " +
                b.str());
  if (a.isInt && b.isInt) {
    int64_t r = 0;
    bool overflow = false;
    switch (op) {
    case '+':
      overflow = __builtin_add_overflow(a.i, b.i, &r);
      break;
    case '-':
      overflow = __builtin_sub_overflow(a.i, b.i, &r);
      break;
    case '*':
      overflow = __builtin_mul_overflow(a.i, b.i, &r);
      break;
    case '/':
      // INT64_MIN / -1 is the one integer division that overflows.
      if (a.i == std::numeric_limits<int64_t>::min() && b.i == -1) {
        overflow = true;
        break;
      }
      if (a.i % b.i == 0)
        return ok(Number::ofInt(a.i / b.i));
      return ok(Number::ofFloat(double(a.i) / double(b.i)));
    default:
      return fail(std::string("operator '") + op +
                  "' is not allowed in a constant expression");
    }
    if (overflow)
      return fail("constant arithmetic " + a.str() + " " + op + " " + b.str() +
                  " overflows 64-bit integers");
    return ok(Number::ofInt(r));
  }
  double x = a.asDouble(), y = b.asDouble();
  switch (op) {
  case '+':
    return checkFloat(x + y, op, a, b);
  case '-':
    return checkFloat(x - y, op, a, b);
  case '*':
    return checkFloat(x * y, op, a, b);
  case '/':
    return checkFloat(x / y, op, a, b);
  default:
    return fail(std::string("operator '") + op +
                "' is not allowed in a constant expression");
  }
}

NumberOrError applyNeg(Number a) {
  if (a.isInt) {
    if (a.i == std::numeric_limits<int64_t>::min())
      return fail("negating " + a.str() + " overflows 64-bit integers");
    return ok(Number::ofInt(-a.i));
  }
  return ok(Number::ofFloat(-a.f));
}

std::optional<Number> parseNumberText(llvm::StringRef text) {
  text = text.trim();
  bool negative = text.consume_front("-");
  if (!negative)
    text.consume_front("+");
  if (text.empty() ||
      !(std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '.'))
    return std::nullopt;
  std::string s = text.str();
  bool isInt = s.find_first_not_of("0123456789") == std::string::npos;
  errno = 0;
  char *end = nullptr;
  if (isInt) {
    unsigned long long v = std::strtoull(s.c_str(), &end, 10);
    if (errno == ERANGE || *end != '\0' ||
        v > static_cast<unsigned long long>(INT64_MAX))
      return std::nullopt;
    int64_t i = static_cast<int64_t>(v);
    return Number::ofInt(negative ? -i : i);
  }
  double d = std::strtod(s.c_str(), &end);
  if (*end != '\0' || !std::isfinite(d) ||
      s.find_first_of("xXpP") != std::string::npos)
    return std::nullopt;
  return Number::ofFloat(negative ? -d : d);
}

} // namespace mgc::frontend
