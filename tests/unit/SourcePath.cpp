#include "SourcePath.h"

#include <cstdlib>
#include <filesystem>

namespace mgc::test {

const std::string &sourceDir() {
  static const std::string dir = [] {
    if (const char *env = std::getenv("MGC_SOURCE_DIR"); env && *env)
      return std::string(env);
    std::error_code ec;
    if (std::filesystem::exists(MGC_BUILT_FROM_DIR "/samples", ec))
      return std::string(MGC_BUILT_FROM_DIR);
    return std::filesystem::current_path(ec).string();
  }();
  return dir;
}

} // namespace mgc::test
