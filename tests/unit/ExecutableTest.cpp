// Executables: build, serialise, read back (same module text, order and
// plan), atomic writes, and refusal of truncated or corrupted files.
#include "CpuTestSupport.h"
#include "SourcePath.h"

#include "frontend/Frontend.h"

#include "llvm/ADT/StringExtras.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

namespace mgc::backend::testing {
namespace {

std::unique_ptr<Executable> tinyGpt() {
  DiagnosticEngine diag;
  frontend::CompileOptions options;
  options.defines = {{"V", "64"}, {"T", "8"}, {"D", "16"},
                     {"H", "2"},  {"L", "2"}, {"B", "2"}};
  auto m = frontend::compileModelFile(
      mgc::test::sourceDir() + "/samples/gpt.mg", options, diag);
  REQUIRE(m);
  return buildExecutable(std::move(m), cpu::scratchBytes);
}

std::string parseError(llvm::StringRef contents) {
  std::string text;
  llvm::raw_string_ostream os(text);
  DiagnosticEngine diag(os);
  CHECK(parseExecutable("model.mgx", contents, diag) == nullptr);
  return os.str();
}

TEST_CASE("Executable: round trip through the text form") {
  auto exe = tinyGpt();
  std::string text = serializeExecutable(*exe);
  CHECK(llvm::StringRef(text).startswith("mgx 1\n"));
  DiagnosticEngine diag;
  auto back = parseExecutable("model.mgx", text, diag);
  REQUIRE(back);
  CHECK(ir::printModuleToString(*back->module) ==
        ir::printModuleToString(*exe->module));
  CHECK(back->order == exe->order);
  CHECK(back->plan.peak == exe->plan.peak);
  REQUIRE(back->plan.slots.size() == exe->plan.slots.size());
  for (size_t i = 0; i < exe->plan.slots.size(); ++i) {
    CHECK(back->plan.slots[i].offset == exe->plan.slots[i].offset);
    CHECK(back->plan.slots[i].size == exe->plan.slots[i].size);
  }
  CHECK(serializeExecutable(*back) == text);
}

TEST_CASE("Executable: truncated and corrupted files are refused") {
  std::string text = serializeExecutable(*tinyGpt());
  for (size_t cut : {size_t(0), size_t(3), text.size() / 2, text.size() - 5})
    CHECK(parseError(llvm::StringRef(text).take_front(cut))
              .find("'model.mgx' is not a valid mgc executable") !=
          std::string::npos);
  std::string flipped = text;
  flipped[text.size() / 2] ^= 1;
  CHECK(parseError(flipped).find("checksum mismatch") != std::string::npos);
  std::string version = text;
  version[4] = '7';
  CHECK(parseError(version).find("checksum") != std::string::npos);
  // A well-formed file of another format version: refused by its version.
  std::string body = "mgx 2" + text.substr(5, text.rfind("checksum ") - 5);
  std::string sum = llvm::utohexstr(hashName(body), /*LowerCase=*/true);
  std::string v2 =
      body + "checksum " + std::string(16 - sum.size(), '0') + sum + "\n";
  CHECK(parseError(v2).find("format version 2 is not supported") !=
        std::string::npos);
}

// Mutations behind a valid checksum (what a buggy writer could produce)
// are refused or accepted, never a crash; an accepted one still checks.
TEST_CASE("Executable: mutated contents with a valid checksum never crash") {
  std::string text = serializeExecutable(*tinyGpt());
  std::string body = text.substr(0, text.rfind("checksum "));
  size_t order = body.find("section order");
  for (uint64_t i = 0; i < 300; ++i) {
    std::string mutated = body;
    size_t pos = order + randomBits(17, 1, i) % (body.size() - order);
    const char digits[] = "0123456789 \n-x";
    mutated[pos] = digits[randomBits(17, 2, i) % (sizeof(digits) - 1)];
    std::string sum = llvm::utohexstr(hashName(mutated), true);
    mutated += "checksum " + std::string(16 - sum.size(), '0') + sum + "\n";
    std::string err;
    llvm::raw_string_ostream os(err);
    DiagnosticEngine diag(os);
    auto exe = parseExecutable("m.mgx", mutated, diag);
    if (exe) {
      DiagnosticEngine quiet(os);
      CHECK(succeeded(checkExecutable(*exe, "m.mgx", quiet)));
    } else {
      CHECK(os.str().find("'m.mgx' is not a valid mgc executable") !=
            std::string::npos);
    }
  }
}

TEST_CASE("Executable: a plan that overlaps live buffers is refused") {
  auto exe = tinyGpt();
  for (OpSlot &s : exe->plan.slots)
    s.offset = 0; // everything in the same bytes
  std::string text;
  llvm::raw_string_ostream os(text);
  DiagnosticEngine diag(os);
  CHECK(failed(checkExecutable(*exe, "x.mgx", diag)));
  CHECK(os.str().find("overlaps") != std::string::npos);
}

TEST_CASE("Executable: written atomically and read back from a file") {
  llvm::SmallString<128> dir;
  REQUIRE(!llvm::sys::fs::createUniqueDirectory("mgc-exe-test", dir));
  llvm::SmallString<128> path(dir);
  llvm::sys::path::append(path, "model.mgx");
  auto exe = tinyGpt();
  DiagnosticEngine diag;
  REQUIRE(succeeded(writeExecutableFile(*exe, path, diag)));
  // Overwriting leaves exactly one file (no temporaries behind).
  REQUIRE(succeeded(writeExecutableFile(*exe, path, diag)));
  std::error_code ec;
  int files = 0;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec))
    ++files;
  CHECK(files == 1);
  auto back = readExecutableFile(path, diag);
  REQUIRE(back);
  CHECK(serializeExecutable(*back) == serializeExecutable(*exe));

  // The executable read back runs like the one built in memory.
  ir::TensorMap args = randomArguments(*exe->module, 9, 8);
  auto a = cpu::CpuExecutor::create(*exe, {}, diag);
  auto b = cpu::CpuExecutor::create(*back, {}, diag);
  REQUIRE(a);
  REQUIRE(b);
  auto ra = a->run(toTensors(args), diag), rb = b->run(toTensors(args), diag);
  REQUIRE(ra.succeeded());
  REQUIRE(rb.succeeded());
  for (const auto &[name, t] : ra->outputs)
    CHECK(bitIdentical(t, rb->outputs.at(name)));

  // A truncated file names the file.
  {
    std::string text = serializeExecutable(*exe);
    std::error_code wec;
    llvm::raw_fd_ostream out(path, wec);
    out << text.substr(0, text.size() / 3);
  }
  std::string err;
  llvm::raw_string_ostream os(err);
  DiagnosticEngine diag2(os);
  CHECK(readExecutableFile(path, diag2) == nullptr);
  CHECK(os.str().find(std::string(path.str())) != std::string::npos);
  llvm::sys::fs::remove_directories(dir);
}

} // namespace
} // namespace mgc::backend::testing
