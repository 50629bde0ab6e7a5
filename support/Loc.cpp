#include "support/Loc.h"

#include <mutex>
#include <set>

namespace mgc {

const char *internFileName(llvm::StringRef name) {
  static std::mutex mutex;
  static std::set<std::string, std::less<>> names;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = names.find(std::string_view(name.data(), name.size()));
  if (it == names.end())
    it = names.insert(name.str()).first;
  return it->c_str();
}

Loc Loc::make(llvm::StringRef file, uint32_t line, uint32_t col) {
  return Loc{internFileName(file), line, col};
}

std::string Loc::str() const {
  if (!valid())
    return "<unknown>";
  return std::string(file) + ":" + std::to_string(line) + ":" +
         std::to_string(col);
}

} // namespace mgc
