// libFuzzer target: any bytes as the body of an .mgx executable. The
// checksum line is appended here, computed as the writer does, so that the
// fuzzer reaches the sections, the module text and the plan instead of
// stopping at a checksum mismatch. Errors are fine; crashes are not, and
// whatever loads must serialize back to the same file.
#include "backend/Executable.h"
#include "support/Random.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <string>

using namespace mgc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string body(reinterpret_cast<const char *>(data), size);
  if (!body.empty() && body.back() != '\n')
    body += '\n';
  std::string file = body + "checksum " +
                     llvm::utohexstr(hashName(body), /*LowerCase=*/true,
                                     /*Width=*/16) +
                     "\n";
  llvm::raw_null_ostream sink;
  DiagnosticEngine diag(sink);
  std::unique_ptr<backend::Executable> exe =
      backend::parseExecutable("fuzz.mgx", file, diag);
  if (!exe)
    return 0;
  std::string again = backend::serializeExecutable(*exe);
  auto back = backend::parseExecutable("fuzz2.mgx", again, diag);
  if (!back || backend::serializeExecutable(*back) != again)
    std::abort();
  return 0;
}
