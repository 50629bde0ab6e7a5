// Input files: what is not a regular file of sane size is refused before it
// is read, and a file cut short under a running job is an error naming it,
// never a signal. JSON from files is refused past a nesting depth before the
// recursive parser sees it.
#include "DataTestSupport.h"

#include "runtime/DataArrays.h"
#include "runtime/DataNpy.h"
#include "runtime/DataTokens.h"
#include "runtime/SafeTensors.h"
#include "support/InputFile.h"
#include "support/Json.h"

#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

using namespace mgc;
using namespace mgc::runtime;
using namespace mgc::testing;

TEST_CASE("input files: devices, pipes, folders and oversized files are "
          "refused with their kind") {
  TempDir dir;
  CHECK(errorText(InputFile::open("/dev/zero", "model file")) ==
        "cannot read model file '/dev/zero': it is a character device, not a "
        "regular file");
  CHECK(errorText(InputFile::open("/dev/urandom", "token file")) ==
        "cannot read token file '/dev/urandom': it is a character device, "
        "not a regular file");
  CHECK(errorText(InputFile::open(dir.path(), "checkpoint")) ==
        "cannot read checkpoint '" + dir.path() +
            "': it is a directory, not a regular file");
  // A FIFO with no writer: refused at once, not waited on.
  std::string fifo = dir.file("fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(errorText(InputFile::open(fifo, "data file")) ==
        "cannot read data file '" + fifo +
            "': it is a pipe, not a regular file");
  CHECK(errorText(readInputFile("/dev/zero", "input file", kMaxTextInputBytes))
            .find("character device") != std::string::npos);

  writeBytes(dir.file("big"), std::string(3 * 1024 * 1024 + 1, 'x'));
  CHECK(errorText(InputFile::open(dir.file("big"), "cluster description",
                                  3 * kMiB)) ==
        "cannot read cluster description '" + dir.file("big") +
            "': it is 3145729 bytes, more than the 3 MiB such a file may hold");
  CHECK(errorText(InputFile::open(dir.file("missing"), "model file")) ==
        "cannot read model file '" + dir.file("missing") +
            "': No such file or directory");

  writeBytes(dir.file("ok"), "hello");
  llvm::Expected<std::string> ok =
      readInputFile(dir.file("ok"), "model file", 5);
  REQUIRE(ok);
  CHECK(*ok == "hello");
}

TEST_CASE("input files: reads beyond the end and files truncated after they "
          "were opened are errors naming the file") {
  TempDir dir;
  std::string path = dir.file("data");
  writeBytes(path, std::string(100, 'a'));
  llvm::Expected<InputFile> file = InputFile::open(path, "token file");
  REQUIRE(file);
  char buf[16];
  CHECK(errorText(file->read(90, 16, buf)) ==
        "cannot read token file '" + path +
            "': 16 bytes at offset 90 lie beyond its 100 bytes");
  CHECK(errorText(file->read(84, 16, buf)) == "");
  REQUIRE(::truncate(path.c_str(), 40) == 0);
  CHECK(errorText(file->read(32, 16, buf)) ==
        "cannot read token file '" + path +
            "': it holds 40 bytes but held 100 when it was opened: it was "
            "truncated while the job ran");

  InputFile memory = InputFile::fromBytes("abc", "a.bin", "data file");
  CHECK(memory.size() == 3);
  CHECK(errorText(memory.read(1, 2, buf)) == "");
  CHECK(llvm::StringRef(buf, 2) == "bc");
  CHECK(errorText(memory.read(2, 2, buf)).find("lie beyond its 3 bytes") !=
        std::string::npos);
}

TEST_CASE("input files: a data set truncated under a running job stops the "
          "batch that reads past its end, naming the file") {
  TempDir dir;
  // Token windows of 9 tokens; 20 windows, read in order.
  std::string tokens = dir.file("tokens.txt");
  writeBytes(tokens, std::string(181, 'a'));
  TokenSourceOptions options;
  options.path = tokens;
  options.shuffle = false;
  auto source = makeTokenSource(
      {InputSpec{"idx", ir::TensorType(ir::DType::I32, {2, 8})},
       InputSpec{"targets", ir::TensorType(ir::DType::I32, {2, 8})}},
      options);
  REQUIRE(source);
  Batch batch;
  CHECK(errorText((*source)->next(batch)) == "");
  REQUIRE(::truncate(tokens.c_str(), 20) == 0);
  CHECK(errorText((*source)->next(batch))
            .find("it holds 20 bytes but held 181") != std::string::npos);
  CHECK((*source)->position() == 1);

  // The same for .npy arrays.
  std::string x = dir.file("x.npy");
  REQUIRE(
      errorText(writeNpy(x, makeTensor(ir::DType::F32, {8, 4}, [](int64_t i) {
                           return double(i);
                         }))) == "");
  auto arrays =
      makeArraySource({InputSpec{"x", ir::TensorType(ir::DType::F32, {2, 4})}},
                      {{"x", x}}, ArraySourceOptions{0, false});
  REQUIRE(arrays);
  CHECK(errorText((*arrays)->next(batch)) == "");
  REQUIRE(::truncate(x.c_str(), 140) == 0);
  std::string err = errorText((*arrays)->next(batch));
  CHECK(err.find("cannot read .npy file '" + x +
                 "': it holds 140 bytes but held 256") != std::string::npos);
}

TEST_CASE("json: nesting past the limit is refused before parsing") {
  std::string deep(50000, '[');
  deep += std::string(50000, ']');
  CHECK(errorText(parseJson(deep)) ==
        "nesting deeper than 64 levels at byte 64");
  std::string justEnough = std::string(64, '[') + std::string(64, ']');
  CHECK(errorText(parseJson(justEnough)) == "");
  // Brackets in strings, escaped quotes included, do not nest.
  std::string inString = "{\"a\\\"" + std::string(1000, '[') + "\": 1}";
  CHECK(errorText(parseJson(inString)) == "");
  CHECK(errorText(parseJson("{\"a\": ")) != "");
  CHECK(!llvm::errorToBool(parseJson("{\"a\": [1, {\"b\": 2}]}").takeError()));

  // A safetensors header of deep JSON: refused naming the file.
  std::string header = "{\"x\":" + std::string(50000, '[') + "}";
  header.resize((header.size() + 7) / 8 * 8, ' ');
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i)
    file[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  file += header;
  CHECK(errorText(decodeSafeTensors(file, "deep.safetensors")) ==
        "invalid safetensors file 'deep.safetensors': the header is not valid "
        "JSON: nesting deeper than 64 levels at byte 68");
}
