// NumPy .npy files (format versions 1.0, 2.0 and 3.0), C order, little-endian
// f2 f4 f8 i4 i8 u1 u2: reading them for data loaders, writing them for tests
// and tools.
#pragma once

#include "runtime/Tensor.h"
#include "support/InputFile.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <optional>
#include <string>

namespace mgc::runtime {

enum class NpyDType { F16, F32, F64, I32, I64, U8, U16 };

// "<f4", "|u1", ...
llvm::StringRef npyDescr(NpyDType dtype);
// "f32", "u8", ... (as types are written in messages: f64[100, 784])
llvm::StringRef npyTypeName(NpyDType dtype);
unsigned npyItemBytes(NpyDType dtype);
std::optional<NpyDType> parseNpyDescr(llvm::StringRef descr);
// The .npy element type that stores `dtype` exactly (none for bf16).
std::optional<NpyDType> npyDTypeOf(ir::DType dtype);
// Whether every value of `from` is exactly representable in `to`: the only
// conversions a data loader makes (u8 labels into an i32 input, f16 into
// f32; never f64 into f32).
bool npyConvertsExactly(NpyDType from, ir::DType to);

// A parsed array; the data stays in the file, read as it is needed (a data
// set may be larger than memory).
struct NpyArray {
  NpyDType dtype = NpyDType::F32;
  ir::Shape shape;
  InputFile file;
  uint64_t dataOffset = 0;
  int64_t numel() const { return ir::numElements(shape).value_or(0); }
  std::string typeStr() const; // "f64[100, 784]"
};

// Parses the header of `file` and checks that the data fills the rest.
llvm::Expected<NpyArray> parseNpy(InputFile file);
// The same for bytes in memory; `fileName` names them in errors.
llvm::Expected<NpyArray> parseNpy(llvm::StringRef bytes,
                                  llvm::StringRef fileName);
llvm::Expected<NpyArray> readNpy(llvm::StringRef path);

// Copies `count` elements starting at element `first` of `array` into `dst`
// from element `dstFirst` on, converting to dst's element type. The caller
// has checked npyConvertsExactly and the bounds; an error says the file was
// cut short since it was parsed.
[[nodiscard]] llvm::Error copyNpyElements(const NpyArray &array, int64_t first,
                                          int64_t count, Tensor &dst,
                                          int64_t dstFirst);

// The bytes of a .npy file (version 1.0, or 2.0 when the header needs it).
std::string encodeNpy(NpyDType dtype, llvm::ArrayRef<int64_t> shape,
                      llvm::StringRef data);
// Writes a file atomically. Writing a bf16 tensor fails (.npy has no bf16).
llvm::Error writeNpy(llvm::StringRef path, NpyDType dtype,
                     llvm::ArrayRef<int64_t> shape, llvm::StringRef data);
llvm::Error writeNpy(llvm::StringRef path, const Tensor &tensor);

} // namespace mgc::runtime
