#include "backend/FaultInjection.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdlib>

namespace mgc::backend {

std::optional<Fault> faultFromEnvironment(std::string &error) {
  const char *value = std::getenv("MGC_FAULT");
  if (!value || !*value)
    return std::nullopt;
  llvm::SmallVector<llvm::StringRef, 3> parts;
  llvm::StringRef(value).split(parts, ':');
  Fault f;
  long long step = 0;
  if (parts.size() == 3 && !parts[0].getAsInteger(10, f.rank) &&
      !parts[1].getAsInteger(10, step) && f.rank >= 0 && step >= 1) {
    f.step = step;
    if (parts[2] == "hang")
      return f;
    f.kind = Fault::Kind::Exit;
    if (parts[2] == "exit")
      return f;
    f.kind = Fault::Kind::Corrupt;
    if (parts[2] == "corrupt")
      return f;
  }
  error = "MGC_FAULT='" + std::string(value) +
          "': expected RANK:STEP:KIND with KIND hang, exit or corrupt "
          "(for example 1:3:hang)";
  return std::nullopt;
}

std::atomic<bool> &corruptNextMessage() {
  static std::atomic<bool> flag{false};
  return flag;
}

} // namespace mgc::backend
