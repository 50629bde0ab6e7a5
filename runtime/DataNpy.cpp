#include "runtime/DataNpy.h"

#include "support/AtomicFile.h"

#include "llvm/ADT/StringExtras.h"

#include <bit>
#include <cstring>
#include <map>
#include <type_traits>
#include <vector>

namespace mgc::runtime {

static_assert(std::endian::native == std::endian::little,
              ".npy I/O assumes a little-endian host");

static constexpr NpyDType kAllNpyTypes[] = {
    NpyDType::F16, NpyDType::F32, NpyDType::F64, NpyDType::I32,
    NpyDType::I64, NpyDType::U8,  NpyDType::U16};

llvm::StringRef npyDescr(NpyDType dtype) {
  switch (dtype) {
  case NpyDType::F16:
    return "<f2";
  case NpyDType::F32:
    return "<f4";
  case NpyDType::F64:
    return "<f8";
  case NpyDType::I32:
    return "<i4";
  case NpyDType::I64:
    return "<i8";
  case NpyDType::U8:
    return "|u1";
  case NpyDType::U16:
    return "<u2";
  }
  return "?";
}

llvm::StringRef npyTypeName(NpyDType dtype) {
  switch (dtype) {
  case NpyDType::F16:
    return "f16";
  case NpyDType::F32:
    return "f32";
  case NpyDType::F64:
    return "f64";
  case NpyDType::I32:
    return "i32";
  case NpyDType::I64:
    return "i64";
  case NpyDType::U8:
    return "u8";
  case NpyDType::U16:
    return "u16";
  }
  return "?";
}

unsigned npyItemBytes(NpyDType dtype) {
  switch (dtype) {
  case NpyDType::U8:
    return 1;
  case NpyDType::F16:
  case NpyDType::U16:
    return 2;
  case NpyDType::F32:
  case NpyDType::I32:
    return 4;
  case NpyDType::F64:
  case NpyDType::I64:
    return 8;
  }
  return 1;
}

std::optional<NpyDType> parseNpyDescr(llvm::StringRef descr) {
  if (descr == "<u1") // one byte has no order: both spellings occur
    return NpyDType::U8;
  for (NpyDType d : kAllNpyTypes)
    if (npyDescr(d) == descr)
      return d;
  return std::nullopt;
}

std::optional<NpyDType> npyDTypeOf(ir::DType dtype) {
  switch (dtype) {
  case ir::DType::F32:
    return NpyDType::F32;
  case ir::DType::F16:
    return NpyDType::F16;
  case ir::DType::F64:
    return NpyDType::F64;
  case ir::DType::I32:
    return NpyDType::I32;
  case ir::DType::I64:
    return NpyDType::I64;
  case ir::DType::BF16:
    return std::nullopt;
  }
  return std::nullopt;
}

bool npyConvertsExactly(NpyDType from, ir::DType to) {
  using D = ir::DType;
  switch (from) {
  case NpyDType::F16:
    return to == D::F16 || to == D::F32 || to == D::F64;
  case NpyDType::F32:
    return to == D::F32 || to == D::F64;
  case NpyDType::F64:
    return to == D::F64;
  case NpyDType::I32:
    return to == D::I32 || to == D::I64;
  case NpyDType::I64:
    return to == D::I64;
  case NpyDType::U8:
  case NpyDType::U16:
    return to == D::I32 || to == D::I64;
  }
  return false;
}

std::string NpyArray::typeStr() const {
  return npyTypeName(dtype).str() + ir::shapeStr(shape);
}

namespace {

// The header is a Python dict literal:
//   {'descr': '<f4', 'fortran_order': False, 'shape': (100, 784), }
// with only strings, booleans and tuples of integers as values.
struct HeaderValue {
  enum Kind { String, Bool, Tuple } kind = String;
  std::string str;
  bool boolean = false;
  ir::Shape tuple;
};

class HeaderParser {
public:
  explicit HeaderParser(llvm::StringRef text) : text_(text) {}

  // On failure returns false and sets error.
  bool parse(std::map<std::string, HeaderValue> &out, std::string &error) {
    skipSpace();
    if (!consume('{'))
      return fail("the header is not a dictionary", error);
    while (true) {
      skipSpace();
      if (consume('}'))
        break;
      std::string key;
      if (!parseString(key))
        return fail("a header key is not a quoted string", error);
      skipSpace();
      if (!consume(':'))
        return fail("expected ':' after header key '" + key + "'", error);
      skipSpace();
      HeaderValue value;
      if (!parseValue(value))
        return fail("the value of header key '" + key +
                        "' is not a string, a boolean or a tuple of integers",
                    error);
      if (!out.emplace(key, std::move(value)).second)
        return fail("header key '" + key + "' appears twice", error);
      skipSpace();
      if (consume(','))
        continue;
      skipSpace();
      if (consume('}'))
        break;
      return fail("expected ',' or '}' in the header", error);
    }
    skipSpace();
    if (!text_.empty())
      return fail("unexpected text after the header dictionary", error);
    return true;
  }

private:
  bool fail(const std::string &msg, std::string &error) {
    error = msg;
    return false;
  }
  void skipSpace() { text_ = text_.ltrim(" \t\r\n"); }
  bool consume(char c) {
    if (text_.empty() || text_.front() != c)
      return false;
    text_ = text_.drop_front();
    return true;
  }
  bool parseString(std::string &out) {
    if (text_.empty() || (text_.front() != '\'' && text_.front() != '"'))
      return false;
    char quote = text_.front();
    size_t end = text_.find(quote, 1);
    if (end == llvm::StringRef::npos)
      return false;
    llvm::StringRef body = text_.slice(1, end);
    if (body.contains('\\'))
      return false; // no key or descr we accept needs escapes
    out = body.str();
    text_ = text_.drop_front(end + 1);
    return true;
  }
  bool parseValue(HeaderValue &v) {
    if (text_.startswith("True") || text_.startswith("False")) {
      v.kind = HeaderValue::Bool;
      v.boolean = text_.startswith("True");
      text_ = text_.drop_front(v.boolean ? 4 : 5);
      return true;
    }
    if (consume('(')) {
      v.kind = HeaderValue::Tuple;
      while (true) {
        skipSpace();
        if (consume(')'))
          return true;
        size_t digits = 0;
        while (digits < text_.size() && llvm::isDigit(text_[digits]))
          ++digits;
        int64_t dim;
        if (digits == 0 || digits > 18 ||
            text_.take_front(digits).getAsInteger(10, dim))
          return false;
        text_ = text_.drop_front(digits);
        consume('L'); // Python 2 long literals
        v.tuple.push_back(dim);
        skipSpace();
        if (consume(','))
          continue;
        skipSpace();
        if (consume(')'))
          return true;
        return false;
      }
    }
    v.kind = HeaderValue::String;
    return parseString(v.str);
  }

  llvm::StringRef text_;
};

} // namespace

static llvm::Error npyError(llvm::StringRef fileName, const llvm::Twine &msg) {
  return llvm::createStringError(
      std::errc::invalid_argument, "%s",
      ("invalid .npy file '" + fileName + "': " + msg).str().c_str());
}

llvm::Expected<NpyArray> parseNpy(InputFile file) {
  llvm::StringRef fileName = file.path();
  // The magic string, the version and the header length come first: at
  // most 12 bytes.
  char prefixBytes[12];
  size_t prefixSize = static_cast<size_t>(std::min<uint64_t>(file.size(), 12));
  if (llvm::Error err = file.read(0, prefixSize, prefixBytes))
    return err;
  llvm::StringRef bytes(prefixBytes, prefixSize);
  if (bytes.size() < 10 || !bytes.startswith("\x93NUMPY"))
    return npyError(fileName,
                    bytes.size() < 10 &&
                            llvm::StringRef("\x93NUMPY").startswith(bytes)
                        ? "the file is truncated inside the magic "
                          "string and version"
                        : "the file does not start with the .npy "
                          "magic string \\x93NUMPY");
  unsigned major = static_cast<uint8_t>(bytes[6]);
  unsigned minor = static_cast<uint8_t>(bytes[7]);
  if (major < 1 || major > 3 || minor != 0)
    return npyError(fileName, "format version " + llvm::Twine(major) + "." +
                                  llvm::Twine(minor) +
                                  " is not supported (1.0, 2.0, 3.0 are)");
  size_t lenBytes = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + lenBytes)
    return npyError(fileName, "the file is truncated inside the header length");
  uint64_t headerLen = 0;
  for (size_t i = 0; i < lenBytes; ++i)
    headerLen |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[8 + i]))
                 << (8 * i);
  size_t headerStart = 8 + lenBytes;
  if (headerLen > file.size() - headerStart)
    return npyError(fileName, "the header length " + llvm::Twine(headerLen) +
                                  " exceeds the file (truncated?)");
  std::string headerBytes(headerLen, '\0');
  if (llvm::Error err = file.read(headerStart, headerLen, headerBytes.data()))
    return err;
  llvm::StringRef header = headerBytes;

  std::map<std::string, HeaderValue> dict;
  std::string error;
  if (!HeaderParser(header).parse(dict, error))
    return npyError(fileName, error);
  for (const auto &entry : dict)
    if (entry.first != "descr" && entry.first != "fortran_order" &&
        entry.first != "shape")
      return npyError(fileName, "unknown header key '" + entry.first + "'");
  auto descr = dict.find("descr");
  auto fortran = dict.find("fortran_order");
  auto shape = dict.find("shape");
  if (descr == dict.end() || fortran == dict.end() || shape == dict.end())
    return npyError(fileName, "the header lacks one of 'descr', "
                              "'fortran_order' and 'shape'");
  if (descr->second.kind != HeaderValue::String)
    return npyError(fileName, "'descr' is not a simple type string "
                              "(structured arrays are not supported)");
  if (fortran->second.kind != HeaderValue::Bool)
    return npyError(fileName, "'fortran_order' is not True or False");
  if (shape->second.kind != HeaderValue::Tuple)
    return npyError(fileName, "'shape' is not a tuple of integers");
  std::optional<NpyDType> dtype = parseNpyDescr(descr->second.str);
  if (!dtype)
    return npyError(fileName,
                    "dtype '" + descr->second.str +
                        "' is not supported (supported: <f2 <f4 <f8 <i4 <i8 "
                        "|u1 <u2, little-endian)");
  if (fortran->second.boolean)
    return npyError(fileName, "the array is in Fortran (column-major) order; "
                              "only C order is supported (save it with "
                              "numpy.ascontiguousarray)");

  NpyArray array;
  array.dtype = *dtype;
  array.shape = shape->second.tuple;
  auto numel = ir::numElements(array.shape);
  if (!numel ||
      static_cast<uint64_t>(*numel) > std::numeric_limits<uint64_t>::max() / 8)
    return npyError(fileName,
                    "shape " + ir::shapeStr(array.shape) + " overflows");
  array.dataOffset = headerStart + headerLen;
  uint64_t expected = static_cast<uint64_t>(*numel) * npyItemBytes(*dtype);
  uint64_t actual = file.size() - array.dataOffset;
  if (actual != expected)
    return npyError(fileName,
                    array.typeStr() + " needs " + llvm::Twine(expected) +
                        " data bytes but the file has " + llvm::Twine(actual) +
                        (actual < expected ? " (truncated)" : ""));
  array.file = std::move(file);
  return array;
}

llvm::Expected<NpyArray> parseNpy(llvm::StringRef bytes,
                                  llvm::StringRef fileName) {
  return parseNpy(InputFile::fromBytes(bytes.str(), fileName, ".npy file"));
}

llvm::Expected<NpyArray> readNpy(llvm::StringRef path) {
  llvm::Expected<InputFile> file = InputFile::open(path, ".npy file");
  if (!file)
    return file.takeError();
  return parseNpy(std::move(*file));
}

template <typename Src>
static void convertInto(const Src *src, int64_t count, Tensor &dst,
                        int64_t dstFirst) {
  auto load = [&](int64_t i) { return src[i]; };
  switch (dst.dtype()) {
  case ir::DType::F32:
    for (int64_t i = 0; i < count; ++i)
      dst.as<float>()[dstFirst + i] = static_cast<float>(load(i));
    break;
  case ir::DType::F64:
    for (int64_t i = 0; i < count; ++i)
      dst.as<double>()[dstFirst + i] = static_cast<double>(load(i));
    break;
  case ir::DType::I32:
    for (int64_t i = 0; i < count; ++i)
      dst.as<int32_t>()[dstFirst + i] = static_cast<int32_t>(load(i));
    break;
  case ir::DType::I64:
    for (int64_t i = 0; i < count; ++i)
      dst.as<int64_t>()[dstFirst + i] = static_cast<int64_t>(load(i));
    break;
  case ir::DType::F16:
    for (int64_t i = 0; i < count; ++i)
      dst.as<uint16_t>()[dstFirst + i] =
          floatToF16(static_cast<float>(load(i)));
    break;
  case ir::DType::BF16:
    for (int64_t i = 0; i < count; ++i)
      dst.as<uint16_t>()[dstFirst + i] =
          floatToBF16(static_cast<float>(load(i)));
    break;
  }
}

// Reads `count` elements of type T (the file's) and converts them; the file
// bytes go through an aligned copy.
template <typename T>
static llvm::Error readConverted(const NpyArray &array, uint64_t offset,
                                 int64_t count, Tensor &dst, int64_t dstFirst) {
  std::vector<T> tmp(count);
  if (llvm::Error err = array.file.read(offset, count * sizeof(T), tmp.data()))
    return err;
  if constexpr (std::is_same_v<T, uint16_t>) {
    if (array.dtype == NpyDType::F16) {
      std::vector<float> widened(count);
      for (int64_t i = 0; i < count; ++i)
        widened[i] = f16ToFloat(tmp[i]);
      convertInto(widened.data(), count, dst, dstFirst);
      return llvm::Error::success();
    }
  }
  convertInto(tmp.data(), count, dst, dstFirst);
  return llvm::Error::success();
}

llvm::Error copyNpyElements(const NpyArray &array, int64_t first, int64_t count,
                            Tensor &dst, int64_t dstFirst) {
  if (count <= 0)
    return llvm::Error::success();
  unsigned item = npyItemBytes(array.dtype);
  uint64_t offset = array.dataOffset + static_cast<uint64_t>(first) * item;
  // Same storage: read straight into the tensor.
  if (npyDTypeOf(dst.dtype()) == array.dtype)
    return array.file.read(offset, static_cast<size_t>(count) * item,
                           dst.data() + dstFirst * item);
  switch (array.dtype) {
  case NpyDType::F16: // bits, widened by readConverted
  case NpyDType::U16:
    return readConverted<uint16_t>(array, offset, count, dst, dstFirst);
  case NpyDType::F32:
    return readConverted<float>(array, offset, count, dst, dstFirst);
  case NpyDType::F64:
    return readConverted<double>(array, offset, count, dst, dstFirst);
  case NpyDType::I32:
    return readConverted<int32_t>(array, offset, count, dst, dstFirst);
  case NpyDType::I64:
    return readConverted<int64_t>(array, offset, count, dst, dstFirst);
  case NpyDType::U8:
    return readConverted<uint8_t>(array, offset, count, dst, dstFirst);
  }
  return llvm::Error::success();
}

std::string encodeNpy(NpyDType dtype, llvm::ArrayRef<int64_t> shape,
                      llvm::StringRef data) {
  std::string dict = "{'descr': '" + npyDescr(dtype).str() +
                     "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i)
    dict += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1)
    dict += ","; // "(3,)": how Python writes a 1-tuple
  dict += "), }";
  // Pad with spaces and end with a newline so the data starts 64-aligned,
  // as NumPy does.
  auto build = [&](unsigned major) {
    size_t prefix = major == 1 ? 10 : 12;
    size_t total = prefix + dict.size() + 1;
    size_t padded = (total + 63) / 64 * 64;
    std::string header = dict + std::string(padded - total, ' ') + "\n";
    std::string out = "\x93NUMPY";
    out += static_cast<char>(major);
    out += '\0';
    size_t len = header.size();
    for (size_t i = 0; i < prefix - 8; ++i)
      out += static_cast<char>((len >> (8 * i)) & 0xff);
    return out + header;
  };
  std::string head = build(1);
  if (head.size() - 10 > 65535)
    head = build(2);
  return head + data.str();
}

llvm::Error writeNpy(llvm::StringRef path, NpyDType dtype,
                     llvm::ArrayRef<int64_t> shape, llvm::StringRef data) {
  std::string bytes = encodeNpy(dtype, shape, data);
  return writeFileAtomically(path,
                             [&](FileSink &sink) { return sink.write(bytes); });
}

llvm::Error writeNpy(llvm::StringRef path, const Tensor &tensor) {
  std::optional<NpyDType> dtype = npyDTypeOf(tensor.dtype());
  if (!dtype)
    return llvm::createStringError(
        std::errc::invalid_argument, "cannot write '%s': .npy has no %s type",
        path.str().c_str(), ir::dtypeName(tensor.dtype()).str().c_str());
  return writeNpy(path, *dtype, tensor.shape(),
                  llvm::StringRef(reinterpret_cast<const char *>(tensor.data()),
                                  tensor.nbytes()));
}

} // namespace mgc::runtime
