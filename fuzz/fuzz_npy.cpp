// libFuzzer target: any bytes as a .npy file; whatever parses has every
// element read into a tensor of each type it converts to exactly. Errors
// are fine; crashes, reads beyond the bytes and leaks are not.
#include "runtime/DataNpy.h"

#include <cstdlib>

using namespace mgc;
using namespace mgc::runtime;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  llvm::Expected<NpyArray> array = parseNpy(bytes, "fuzz.npy");
  if (!array) {
    llvm::consumeError(array.takeError());
    return 0;
  }
  // Parsing checked that the data fills the file: small enough to read.
  int64_t n = array->numel();
  if (n > (int64_t(1) << 20))
    return 0;
  for (ir::DType to : {ir::DType::F32, ir::DType::F64, ir::DType::I32,
                       ir::DType::I64, ir::DType::F16, ir::DType::BF16}) {
    if (!npyConvertsExactly(array->dtype, to))
      continue;
    Tensor t(ir::TensorType(to, {n}));
    if (llvm::Error err = copyNpyElements(*array, 0, n, t, 0))
      std::abort(); // the bytes were all there
  }
  return 0;
}
