// Synthetic batches: seeded random data in the shape of the model's inputs,
// the default source and what benchmarks use.
#pragma once

#include "runtime/DataSource.h"

#include <map>
#include <memory>

namespace mgc::runtime {

struct SyntheticOptions {
  uint64_t seed = 0;
  // Integer inputs hold uniform integers in [0, n), n given here per input
  // (the class count for labels, the vocabulary for tokens). Every integer
  // input needs an entry.
  std::map<std::string, int64_t> intRange;
  // Float inputs hold normal(0, stddev) values rounded to their type.
  double stddev = 1.0;
};

// Element i of batch k of input `name` is a function of (seed, name, k, i)
// only, so seek is free and any step can be reproduced on its own.
llvm::Expected<std::unique_ptr<BatchSource>>
makeSyntheticSource(std::vector<InputSpec> inputs, SyntheticOptions options);

} // namespace mgc::runtime
