#include "DataTestSupport.h"

#include "runtime/Checkpoint.h"
#include "support/AtomicFile.h"
#include "llvm/Support/FileSystem.h"

#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace mgc;
using namespace mgc::runtime;
using namespace mgc::testing;

namespace {

Checkpoint sampleCheckpoint(int64_t step, double scale, int64_t size = 6) {
  Checkpoint c;
  c.info.step = step;
  c.info.optimizer = "adamw";
  c.info.seed = 18446744073709551615ull;
  c.info.rngState = "counter:123";
  c.info.sourceHash = hashModelSource("model m {}");
  c.info.extra["lr_schedule"] = "cosine";
  c.tensors["w"] =
      makeTensor(ir::DType::F32, {size}, [&](int64_t i) { return i * scale; });
  c.tensors["opt.m.w"] =
      makeTensor(ir::DType::F32, {size}, [&](int64_t i) { return -i * scale; });
  c.tensors["opt.step"] =
      makeTensor(ir::DType::I64, {}, [&](int64_t) { return step; });
  return c;
}

void checkEqual(const Checkpoint &a, const Checkpoint &b) {
  CHECK(a.info.step == b.info.step);
  CHECK(a.info.optimizer == b.info.optimizer);
  CHECK(a.info.seed == b.info.seed);
  CHECK(a.info.rngState == b.info.rngState);
  CHECK(a.info.sourceHash == b.info.sourceHash);
  CHECK(a.info.extra == b.info.extra);
  REQUIRE(a.tensors.size() == b.tensors.size());
  for (const auto &[name, t] : a.tensors) {
    REQUIRE(b.tensors.count(name));
    CHECK(sameBytes(t, b.tensors.at(name)));
  }
}

// Files in `dir` whose name contains `part`.
int countFiles(const std::string &dir, llvm::StringRef part) {
  std::error_code ec;
  int n = 0;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec))
    n += llvm::StringRef(it->path()).contains(part);
  return n;
}

} // namespace

TEST_CASE("checkpoint: round trip with training metadata as strings") {
  TempDir dir;
  std::string path = dir.file("ckpt.safetensors");
  Checkpoint saved = sampleCheckpoint(10, 0.25);
  REQUIRE(errorText(saveCheckpoint(path, saved)) == "");
  llvm::Expected<Checkpoint> loaded = loadCheckpoint(path);
  REQUIRE(errorText(loaded) == "");
  checkEqual(saved, *loaded);

  // The raw metadata holds every key as a string.
  llvm::Expected<SafeTensorsContents> raw = loadSafeTensors(path);
  REQUIRE(raw);
  CHECK(raw->metadata.at("format") == "mgc");
  CHECK(raw->metadata.at("format_version") == "1");
  CHECK(raw->metadata.at("step") == "10");
  CHECK(raw->metadata.at("seed") == "18446744073709551615");
  CHECK(raw->metadata.at("optimizer") == "adamw");
  CHECK(raw->metadata.at("rng_state") == "counter:123");
  CHECK(raw->metadata.at("lr_schedule") == "cosine");
  CHECK(raw->metadata.at("source_hash").size() == 64);

  // Saving again replaces the file and leaves no temporary behind.
  REQUIRE(errorText(saveCheckpoint(path, sampleCheckpoint(20, 1))) == "");
  CHECK(loadCheckpoint(path)->info.step == 20);
  CHECK(countFiles(dir.path(), ".tmp-") == 0);
}

TEST_CASE("checkpoint: malformed metadata and reserved keys are refused") {
  TempDir dir;
  std::string path = dir.file("c.safetensors");
  Checkpoint c = sampleCheckpoint(1, 1);
  c.info.extra["step"] = "5";
  CHECK(errorText(saveCheckpoint(path, c)).find("reserved") !=
        std::string::npos);

  auto loadWith = [&](StringMap meta) {
    REQUIRE(errorText(saveSafeTensors(path, {}, meta)) == "");
    llvm::Expected<Checkpoint> r = loadCheckpoint(path);
    return errorText(r);
  };
  CHECK(loadWith({{"step", "ten"}}).find("\"step\" 'ten'") !=
        std::string::npos);
  CHECK(loadWith({{"step", "-1"}}) != "");
  CHECK(loadWith({{"seed", "1x"}}) != "");
  // Another writer's file (torch's "pt") is tensors only: its metadata,
  // even a "step" that would be malformed in ours, is not read.
  CHECK(loadWith({{"format", "pt"}, {"step", "ten"}}) == "");
  llvm::Expected<Checkpoint> foreign = loadCheckpoint(path);
  REQUIRE(foreign);
  CHECK(foreign->info.foreignFormat == "pt");
  CHECK(foreign->info.step == 0);
  CHECK(foreign->info.extra.empty());
  std::string newer = loadWith({{"format_version", "2"}});
  CHECK(newer.find("newer") != std::string::npos);
  CHECK(newer.find("c.safetensors") != std::string::npos);
  // A plain safetensors file without training metadata loads.
  CHECK(loadWith({}) == "");
  CHECK(loadWith({{"other_tool", "x"}}) == "");
}

TEST_CASE("checkpoint: a truncated or corrupted file is refused by name") {
  TempDir dir;
  std::string path = dir.file("c.safetensors");
  REQUIRE(errorText(saveCheckpoint(path, sampleCheckpoint(3, 2))) == "");
  std::string bytes = readBytes(path);
  for (size_t cut : {size_t(0), size_t(5), size_t(20), bytes.size() - 1}) {
    writeBytes(path, bytes.substr(0, cut));
    llvm::Expected<Checkpoint> r = loadCheckpoint(path);
    std::string err = errorText(r);
    CHECK(err.find("c.safetensors") != std::string::npos);
  }
}

TEST_CASE("checkpoint: a flipped bit in any tensor's data is refused, "
          "naming the tensor") {
  TempDir dir;
  std::string path = dir.file("c.safetensors");
  Checkpoint saved = sampleCheckpoint(3, 2);
  REQUIRE(errorText(saveCheckpoint(path, saved)) == "");
  llvm::Expected<SafeTensorsContents> raw = loadSafeTensors(path);
  REQUIRE(raw);
  // Every tensor has its XXH64, and loading hides the keys again.
  for (const auto &[name, t] : saved.tensors)
    CHECK(raw->metadata.at("xxh64." + name).size() == 16);
  CHECK(raw->metadata.at("xxh64.w") != raw->metadata.at("xxh64.opt.m.w"));
  CHECK(loadCheckpoint(path)->info.extra.count("xxh64.w") == 0);

  std::string bytes = readBytes(path);
  uint64_t headerLen = 0;
  for (int i = 7; i >= 0; --i)
    headerLen = headerLen << 8 | static_cast<uint8_t>(bytes[i]);
  // The data is laid out by name: opt.m.w (24 bytes), opt.step (8), w (24).
  struct Flip {
    size_t offset;
    const char *tensor;
  };
  for (Flip f : {Flip{0, "opt.m.w"}, Flip{23, "opt.m.w"}, Flip{24, "opt.step"},
                 Flip{40, "w"}, Flip{55, "w"}}) {
    CAPTURE(f.offset);
    std::string flipped = bytes;
    flipped[8 + headerLen + f.offset] ^= 0x10;
    writeBytes(path, flipped);
    CHECK(errorText(loadCheckpoint(path))
              .find("invalid checkpoint '" + path + "': tensor '" + f.tensor +
                    "' does not match its checksum (xxh64 ") !=
          std::string::npos);
  }
  writeBytes(path, bytes);
  CHECK(errorText(loadCheckpoint(path)) == "");

  // A checksum of a tensor the file lacks, or a tensor without one when the
  // others have theirs, is refused; a file without any loads (written by
  // another tool).
  StringMap meta = raw->metadata;
  meta["xxh64.ghost"] = "0123456789abcdef";
  REQUIRE(errorText(saveSafeTensors(path, raw->tensors, meta)) == "");
  CHECK(errorText(loadCheckpoint(path))
            .find("the checksum of a tensor "
                  "'ghost'") != std::string::npos);
  meta = raw->metadata;
  meta.erase("xxh64.w");
  REQUIRE(errorText(saveSafeTensors(path, raw->tensors, meta)) == "");
  CHECK(errorText(loadCheckpoint(path)).find("tensor 'w' has no checksum") !=
        std::string::npos);
  REQUIRE(errorText(saveSafeTensors(path, raw->tensors, {})) == "");
  CHECK(errorText(loadCheckpoint(path)) == "");
}

TEST_CASE("checkpoint: hash of the model source is SHA-256") {
  CHECK(hashModelSource("abc") ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(hashModelSource("") ==
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST_CASE("checkpoint: a save that fails part-way leaves the old file") {
  TempDir dir;
  std::string path = dir.file("c.safetensors");
  Checkpoint old = sampleCheckpoint(7, 3);
  REQUIRE(errorText(saveCheckpoint(path, old)) == "");
  std::string before = readBytes(path);

  // The writer fails after half its bytes, as a full disk would.
  llvm::Error err = writeFileAtomically(path, [&](FileSink &sink) {
    if (llvm::Error e = sink.write(llvm::StringRef(before).take_front(40)))
      return e;
    return llvm::createStringError(std::errc::no_space_on_device,
                                   "No space left on device");
  });
  std::string msg = errorText(std::move(err));
  CHECK(msg.find("c.safetensors") != std::string::npos);
  CHECK(msg.find("No space left") != std::string::npos);
  CHECK(readBytes(path) == before);
  CHECK(countFiles(dir.path(), ".tmp-") == 0);

  // A temporary file left by a crashed save is not the checkpoint.
  writeBytes(path + ".tmp-abc123", before.substr(0, 50));
  llvm::Expected<Checkpoint> loaded = loadCheckpoint(path);
  REQUIRE(errorText(loaded) == "");
  checkEqual(old, *loaded);

  // A folder that cannot be written to: the error names the target.
  CHECK(errorText(saveCheckpoint(dir.file("no/such/dir/c.safetensors"), old))
            .find("no/such/dir/c.safetensors") != std::string::npos);
}

TEST_CASE("checkpoint: a process killed while saving never leaves a torn "
          "file") {
  TempDir dir;
  std::string path = dir.file("c.safetensors");
  // Big enough that a save takes a while, so kills land mid-write.
  const int64_t size = 1 << 20;
  REQUIRE(errorText(saveCheckpoint(path, sampleCheckpoint(1, 1, size))) == "");
  for (int round = 0; round < 4; ++round) {
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      // Save new versions over and over until killed.
      for (int64_t step = 2;; ++step)
        if (saveCheckpoint(path, sampleCheckpoint(step, 1, size)))
          _exit(1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(30 + 37 * round));
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    llvm::Expected<Checkpoint> loaded = loadCheckpoint(path);
    REQUIRE(errorText(loaded) == "");
    int64_t step = loaded->info.step;
    CHECK(step >= 1);
    checkEqual(sampleCheckpoint(step, 1, size), *loaded);
  }
  // The next save removes what the killed writers left behind.
  REQUIRE(errorText(saveCheckpoint(path, sampleCheckpoint(99, 1, 8))) == "");
  CHECK(countFiles(dir.path(), ".tmp-") == 0);
}

TEST_CASE("checkpoint: a save removes only the temporary files of writers "
          "that are gone") {
  TempDir dir;
  std::string path = dir.file("c.safetensors");
  char host[256] = {};
  REQUIRE(gethostname(host, sizeof host - 1) == 0);
  for (char *c = host; *c; ++c)
    if (*c == '-' || *c == '/')
      *c = '_';
  std::string prefix = path + ".tmp-" + host + "-";
  // A child that has exited: its pid is gone once it is reaped.
  pid_t gone = fork();
  REQUIRE(gone >= 0);
  if (gone == 0)
    _exit(0);
  waitpid(gone, nullptr, 0);
  std::string abandoned = prefix + std::to_string(gone) + "-aaaaaa";
  std::string live = prefix + std::to_string(getpid()) + "-bbbbbb";
  std::string otherHost = path + ".tmp-elsewhere-1-cccccc";
  std::string otherTarget = dir.file("d.safetensors") + ".tmp-" + host + "-" +
                            std::to_string(gone) + "-dddddd";
  for (const std::string &file : {abandoned, live, otherHost, otherTarget})
    writeBytes(file, "partial");
  REQUIRE(errorText(saveCheckpoint(path, sampleCheckpoint(1, 1))) == "");
  CHECK(!llvm::sys::fs::exists(abandoned));
  CHECK(llvm::sys::fs::exists(live));
  CHECK(llvm::sys::fs::exists(otherHost));
  CHECK(llvm::sys::fs::exists(otherTarget));
}
