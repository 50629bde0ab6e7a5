// The safetensors file format (https://github.com/huggingface/safetensors):
// an 8-byte little-endian header length N, N bytes of JSON describing every
// tensor (dtype, shape, byte range) plus an optional "__metadata__" map of
// strings, padded with spaces to a multiple of 8, then the raw little-endian
// tensor bytes. Files written here load with the Python `safetensors`
// package; files it writes load here.
#pragma once

#include "runtime/Tensor.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <map>
#include <optional>
#include <string>

namespace mgc::runtime {

// Sorted by name: the order tensors are laid out in a file.
using TensorMap = std::map<std::string, Tensor>;
using StringMap = std::map<std::string, std::string>;

struct SafeTensorsContents {
  TensorMap tensors;
  StringMap metadata; // "__metadata__"; empty when the file has none
};

// "F32", "BF16", "F16", "F64", "I32", "I64".
llvm::StringRef safeTensorsDTypeName(ir::DType dtype);
std::optional<ir::DType> parseSafeTensorsDType(llvm::StringRef name);

// The JSON header, padded with spaces to a multiple of 8 bytes, without the
// length prefix. Tensors appear in name order, their bytes back to back in
// the same order; "__metadata__" comes first and is left out when empty.
// Fails if a name or metadata string is not valid UTF-8, or a tensor name is
// empty or "__metadata__".
llvm::Expected<std::string> encodeSafeTensorsHeader(const TensorMap &tensors,
                                                    const StringMap &metadata);

// The whole file as bytes (for small files and tests; saveSafeTensors streams).
llvm::Expected<std::string> encodeSafeTensors(const TensorMap &tensors,
                                              const StringMap &metadata);

// Parses and validates a whole file held in memory. `fileName` only names
// the file in error messages. Refused, with the reason: a header length that
// does not fit the file, a header that is not a JSON object of the expected
// form, unknown dtypes, negative or overflowing shapes, byte ranges that are
// out of range, overlap, leave gaps or do not match shape * dtype size, data
// left over after the last tensor.
llvm::Expected<SafeTensorsContents> decodeSafeTensors(llvm::StringRef bytes,
                                                      llvm::StringRef fileName);

// Writes a file atomically (see AtomicFile.h).
llvm::Error saveSafeTensors(llvm::StringRef path, const TensorMap &tensors,
                            const StringMap &metadata);

// Reads and validates a file; `what` names its role in errors.
llvm::Expected<SafeTensorsContents>
loadSafeTensors(llvm::StringRef path,
                llvm::StringRef what = "safetensors file");

// Reads and validates the header alone: the "__metadata__" strings of a
// file, without its tensors.
llvm::Expected<StringMap>
loadSafeTensorsMetadata(llvm::StringRef path,
                        llvm::StringRef what = "safetensors file");

} // namespace mgc::runtime
