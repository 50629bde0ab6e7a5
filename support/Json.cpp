#include "support/Json.h"

namespace mgc {

llvm::Expected<llvm::json::Value> parseJson(llvm::StringRef text,
                                            unsigned maxDepth) {
  // Brackets inside strings do not nest; a backslash escapes the next
  // character, so "\"" does not end a string. Malformed text (an unclosed
  // string, unbalanced brackets) is left for the parser to describe.
  unsigned depth = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > maxDepth)
        return llvm::createStringError(
            std::errc::invalid_argument,
            "nesting deeper than %u levels at byte %zu", maxDepth, i);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return llvm::json::parse(text);
}

} // namespace mgc
