#include "runtime/SafeTensors.h"

#include "support/AtomicFile.h"
#include "support/InputFile.h"
#include "support/Json.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace mgc::runtime {

// Tensor storage is written and read as is: the format is little-endian.
// (The compiler's macro rather than std::endian: this file also builds as
// C++17, see fuzz/CMakeLists.txt.)
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors I/O assumes a little-endian host");

// The reference implementation refuses larger headers; so do we, so that a
// corrupted length cannot make us parse gigabytes of tensor data as JSON.
static constexpr uint64_t kMaxHeaderBytes = 100'000'000;

llvm::StringRef safeTensorsDTypeName(ir::DType dtype) {
  switch (dtype) {
  case ir::DType::F32:
    return "F32";
  case ir::DType::BF16:
    return "BF16";
  case ir::DType::F16:
    return "F16";
  case ir::DType::F64:
    return "F64";
  case ir::DType::I32:
    return "I32";
  case ir::DType::I64:
    return "I64";
  }
  return "?";
}

std::optional<ir::DType> parseSafeTensorsDType(llvm::StringRef name) {
  for (ir::DType d : {ir::DType::F32, ir::DType::BF16, ir::DType::F16,
                      ir::DType::F64, ir::DType::I32, ir::DType::I64})
    if (safeTensorsDTypeName(d) == name)
      return d;
  return std::nullopt;
}

static llvm::Error makeError(const llvm::Twine &msg) {
  return llvm::createStringError(std::errc::invalid_argument, "%s",
                                 msg.str().c_str());
}

llvm::Expected<std::string> encodeSafeTensorsHeader(const TensorMap &tensors,
                                                    const StringMap &metadata) {
  for (const auto &[key, value] : metadata)
    if (!llvm::json::isUTF8(key) || !llvm::json::isUTF8(value))
      return makeError("metadata key or value '" + key +
                       "' is not valid UTF-8");
  for (const auto &[name, tensor] : tensors) {
    if (name.empty() || name == "__metadata__")
      return makeError("'" + name + "' cannot name a tensor");
    if (!llvm::json::isUTF8(name))
      return makeError("tensor name '" + name + "' is not valid UTF-8");
  }
  std::string header;
  {
    llvm::raw_string_ostream os(header);
    llvm::json::OStream json(os);
    json.objectBegin();
    if (!metadata.empty()) {
      json.attributeObject("__metadata__", [&] {
        for (const auto &[key, value] : metadata)
          json.attribute(key, value);
      });
    }
    uint64_t offset = 0;
    for (const auto &entry : tensors) {
      const Tensor &tensor = entry.second;
      json.attributeObject(entry.first, [&] {
        json.attribute("dtype", safeTensorsDTypeName(tensor.dtype()));
        json.attributeArray("shape", [&] {
          for (int64_t d : tensor.shape())
            json.value(d);
        });
        json.attributeArray("data_offsets", [&] {
          json.value(static_cast<int64_t>(offset));
          offset += tensor.nbytes();
          json.value(static_cast<int64_t>(offset));
        });
      });
    }
    json.objectEnd();
  }
  // Pad with spaces (valid JSON whitespace) so the data starts 8-aligned.
  header.append((8 - header.size() % 8) % 8, ' ');
  return header;
}

static std::string lengthPrefix(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i)
    s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

llvm::Expected<std::string> encodeSafeTensors(const TensorMap &tensors,
                                              const StringMap &metadata) {
  llvm::Expected<std::string> header =
      encodeSafeTensorsHeader(tensors, metadata);
  if (!header)
    return header.takeError();
  std::string out = lengthPrefix(header->size()) + *header;
  for (const auto &entry : tensors)
    if (entry.second.nbytes())
      out.append(reinterpret_cast<const char *>(entry.second.data()),
                 entry.second.nbytes());
  return out;
}

llvm::Error saveSafeTensors(llvm::StringRef path, const TensorMap &tensors,
                            const StringMap &metadata) {
  llvm::Expected<std::string> header =
      encodeSafeTensorsHeader(tensors, metadata);
  if (!header)
    return llvm::createStringError(std::errc::invalid_argument,
                                   "cannot write '%s': %s", path.str().c_str(),
                                   llvm::toString(header.takeError()).c_str());
  return writeFileAtomically(path, [&](FileSink &sink) -> llvm::Error {
    if (llvm::Error err = sink.write(lengthPrefix(header->size())))
      return err;
    if (llvm::Error err = sink.write(*header))
      return err;
    for (const auto &entry : tensors)
      if (llvm::Error err = sink.write(llvm::StringRef(
              reinterpret_cast<const char *>(entry.second.data()),
              entry.second.nbytes())))
        return err;
    return llvm::Error::success();
  });
}

namespace {

struct Entry {
  std::string name;
  ir::DType dtype;
  ir::Shape shape;
  uint64_t begin, end;
};

// Validates one file, then reads each tensor's bytes straight into it; every
// error message starts with the file name.
class Decoder {
public:
  explicit Decoder(const InputFile &file)
      : file_(file), fileName_(file.path()) {}

  llvm::Expected<SafeTensorsContents> decode();
  // Only the "__metadata__" strings: the header is read, not the tensors.
  llvm::Expected<StringMap> decodeMetadata();

private:
  llvm::Error fail(const llvm::Twine &msg) {
    return makeError("invalid safetensors file '" + fileName_ + "': " + msg);
  }
  llvm::Error parseEntry(llvm::StringRef name, const llvm::json::Value &value,
                         uint64_t dataSize);
  llvm::Error parseMetadata(const llvm::json::Value &value,
                            SafeTensorsContents &out);
  // The header's JSON, and the length of the header in bytes.
  llvm::Expected<llvm::json::Value> readHeader(uint64_t &headerLen);

  const InputFile &file_;
  llvm::StringRef fileName_;
  std::vector<Entry> entries_;
};

} // namespace

llvm::Error Decoder::parseMetadata(const llvm::json::Value &value,
                                   SafeTensorsContents &out) {
  const llvm::json::Object *object = value.getAsObject();
  if (!object)
    return fail("\"__metadata__\" is not an object of strings");
  for (const auto &[key, v] : *object) {
    std::optional<llvm::StringRef> s;
    if (auto str = v.getAsString())
      s = *str;
    if (!s)
      return fail("metadata value of '" + key.str() + "' is not a string");
    out.metadata[key.str()] = s->str();
  }
  return llvm::Error::success();
}

llvm::Error Decoder::parseEntry(llvm::StringRef name,
                                const llvm::json::Value &value,
                                uint64_t dataSize) {
  const llvm::json::Object *object = value.getAsObject();
  if (!object)
    return fail("entry of tensor '" + name + "' is not an object");
  for (const auto &field : *object) {
    llvm::StringRef key = field.first;
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      return fail("tensor '" + name + "' has an unknown field '" + key + "'");
  }
  Entry entry;
  entry.name = name.str();

  auto dtypeName = object->getString("dtype");
  if (!dtypeName)
    return fail("tensor '" + name + "' has no string \"dtype\"");
  auto dtype = parseSafeTensorsDType(*dtypeName);
  if (!dtype)
    return fail("tensor '" + name + "' has unsupported dtype '" + *dtypeName +
                "' (supported: F32, BF16, F16, F64, I32, I64)");
  entry.dtype = *dtype;

  const llvm::json::Array *shape = object->getArray("shape");
  if (!shape)
    return fail("tensor '" + name + "' has no \"shape\" array");
  for (const llvm::json::Value &d : *shape) {
    auto dim = d.getAsInteger();
    if (!dim || *dim < 0)
      return fail("tensor '" + name +
                  "' has a shape entry that is not a non-negative integer");
    entry.shape.push_back(*dim);
  }
  auto numel = ir::numElements(entry.shape);
  uint64_t elemBytes = ir::dtypeBytes(entry.dtype);
  if (!numel || static_cast<uint64_t>(*numel) >
                    std::numeric_limits<uint64_t>::max() / elemBytes)
    return fail("tensor '" + name + "' has a shape " +
                ir::shapeStr(entry.shape) + " whose size overflows");

  const llvm::json::Array *offsets = object->getArray("data_offsets");
  if (!offsets || offsets->size() != 2)
    return fail("tensor '" + name + "' has no \"data_offsets\" pair");
  auto begin = (*offsets)[0].getAsInteger();
  auto end = (*offsets)[1].getAsInteger();
  if (!begin || !end || *begin < 0 || *end < 0)
    return fail("tensor '" + name +
                "' has data offsets that are not non-negative integers");
  entry.begin = static_cast<uint64_t>(*begin);
  entry.end = static_cast<uint64_t>(*end);
  if (entry.begin > entry.end)
    return fail("tensor '" + name + "' has data offsets [" +
                llvm::Twine(entry.begin) + ", " + llvm::Twine(entry.end) +
                ") that end before they begin");
  if (entry.end > dataSize)
    return fail("tensor '" + name + "' has data offsets [" +
                llvm::Twine(entry.begin) + ", " + llvm::Twine(entry.end) +
                ") beyond the " + llvm::Twine(dataSize) +
                " data bytes of the file (truncated?)");
  uint64_t expected = static_cast<uint64_t>(*numel) * elemBytes;
  if (entry.end - entry.begin != expected)
    return fail("tensor '" + name + "' is " + *dtypeName +
                ir::shapeStr(entry.shape) + ", " + llvm::Twine(expected) +
                " bytes, but its data offsets span " +
                llvm::Twine(entry.end - entry.begin) + " bytes");
  entries_.push_back(std::move(entry));
  return llvm::Error::success();
}

llvm::Expected<llvm::json::Value> Decoder::readHeader(uint64_t &headerLen) {
  uint64_t fileSize = file_.size();
  if (fileSize < 8)
    return fail("the file is " + llvm::Twine(fileSize) +
                " bytes long, too short for the 8-byte header length");
  unsigned char prefix[8];
  if (llvm::Error err = file_.read(0, 8, prefix))
    return err;
  headerLen = 0;
  for (int i = 7; i >= 0; --i)
    headerLen = (headerLen << 8) | prefix[i];
  uint64_t rest = fileSize - 8;
  if (headerLen > rest)
    return fail("the header length " + llvm::Twine(headerLen) +
                " exceeds the " + llvm::Twine(rest) +
                " bytes that follow it (truncated or corrupted)");
  if (headerLen > kMaxHeaderBytes)
    return fail("the header length " + llvm::Twine(headerLen) +
                " exceeds the limit of " + llvm::Twine(kMaxHeaderBytes));
  std::string headerBytes(headerLen, '\0');
  if (llvm::Error err = file_.read(8, headerLen, headerBytes.data()))
    return err;
  llvm::StringRef header = headerBytes;
  if (header.empty() || header.front() != '{')
    return fail("the header does not start with '{'");
  llvm::Expected<llvm::json::Value> json = parseJson(header);
  if (!json)
    return fail("the header is not valid JSON: " +
                llvm::toString(json.takeError()));
  const llvm::json::Object *root = json->getAsObject();
  if (!root)
    return fail("the header is not a JSON object");
  return json;
}

llvm::Expected<StringMap> Decoder::decodeMetadata() {
  uint64_t headerLen = 0;
  llvm::Expected<llvm::json::Value> json = readHeader(headerLen);
  if (!json)
    return json.takeError();
  SafeTensorsContents out;
  if (const llvm::json::Value *meta = json->getAsObject()->get("__metadata__"))
    if (llvm::Error err = parseMetadata(*meta, out))
      return err;
  return out.metadata;
}

llvm::Expected<SafeTensorsContents> Decoder::decode() {
  uint64_t headerLen = 0;
  llvm::Expected<llvm::json::Value> json = readHeader(headerLen);
  if (!json)
    return json.takeError();
  const llvm::json::Object *root = json->getAsObject();
  uint64_t rest = file_.size() - 8;
  SafeTensorsContents out;
  uint64_t dataSize = rest - headerLen;
  for (const auto &[key, value] : *root) {
    if (key == "__metadata__") {
      if (llvm::Error err = parseMetadata(value, out))
        return err;
      continue;
    }
    if (llvm::Error err = parseEntry(key, value, dataSize))
      return err;
  }

  // The byte ranges must tile the data section exactly: sorted by start,
  // each begins where the previous one ended, the last ends at the end.
  std::sort(entries_.begin(), entries_.end(),
            [](const Entry &a, const Entry &b) {
              return std::tie(a.begin, a.end, a.name) <
                     std::tie(b.begin, b.end, b.name);
            });
  uint64_t cursor = 0;
  const Entry *previous = nullptr;
  for (const Entry &e : entries_) {
    if (e.begin < cursor)
      return fail(
          "tensors '" + previous->name + "' [" + llvm::Twine(previous->begin) +
          ", " + llvm::Twine(previous->end) + ") and '" + e.name + "' [" +
          llvm::Twine(e.begin) + ", " + llvm::Twine(e.end) + ") overlap");
    if (e.begin > cursor)
      return fail("bytes [" + llvm::Twine(cursor) + ", " +
                  llvm::Twine(e.begin) + ") before tensor '" + e.name +
                  "' belong to no tensor");
    cursor = e.end;
    previous = &e;
  }
  if (cursor != dataSize)
    return fail(llvm::Twine(dataSize - cursor) +
                " bytes after the last tensor belong to no tensor");

  uint64_t data = 8 + headerLen;
  for (const Entry &e : entries_) {
    Tensor tensor(ir::TensorType(e.dtype, e.shape));
    if (llvm::Error err =
            file_.read(data + e.begin, tensor.nbytes(), tensor.data()))
      return err;
    out.tensors.emplace(e.name, std::move(tensor));
  }
  return out;
}

llvm::Expected<SafeTensorsContents>
decodeSafeTensors(llvm::StringRef bytes, llvm::StringRef fileName) {
  InputFile file =
      InputFile::fromBytes(bytes.str(), fileName, "safetensors file");
  return Decoder(file).decode();
}

llvm::Expected<SafeTensorsContents> loadSafeTensors(llvm::StringRef path,
                                                    llvm::StringRef what) {
  llvm::Expected<InputFile> file = InputFile::open(path, what);
  if (!file)
    return file.takeError();
  return Decoder(*file).decode();
}

llvm::Expected<StringMap> loadSafeTensorsMetadata(llvm::StringRef path,
                                                  llvm::StringRef what) {
  llvm::Expected<InputFile> file = InputFile::open(path, what);
  if (!file)
    return file.takeError();
  return Decoder(*file).decodeMetadata();
}

} // namespace mgc::runtime
