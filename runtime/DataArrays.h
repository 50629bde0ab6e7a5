// Batches from .npy files bound to inputs by name (--data x=train_x.npy):
// row r of every array is sample r; a batch of B rows is taken in order or,
// per epoch, in a seeded shuffled order. The last partial batch of an epoch
// is dropped.
#pragma once

#include "runtime/DataSource.h"

#include <map>
#include <memory>

namespace mgc::runtime {

struct ArrayBinding {
  std::string input; // model input name
  std::string path;  // .npy file
};

struct ArraySourceOptions {
  uint64_t seed = 0;
  bool shuffle = true;
  // Per integer input, the exclusive bound of its values (an embedding's
  // rows, a cross-entropy's classes): checkEveryValue() checks that every
  // element lies in [0, bound).
  std::map<std::string, int64_t> intRange;
};

// Reads and checks every file against its input: the array is [N, ...rest]
// where the input is [B, ...rest], its element type converts exactly to the
// input's, all arrays have the same N >= B, every input has exactly one
// array. Errors name the file and the input.
llvm::Expected<std::unique_ptr<BatchSource>>
makeArraySource(std::vector<InputSpec> inputs,
                std::vector<ArrayBinding> bindings, ArraySourceOptions options);

} // namespace mgc::runtime
