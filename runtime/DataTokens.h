// Language-model data: a token stream cut into windows of T + 1 tokens;
// a window gives the inputs tokens[0:T] and the targets tokens[1:T+1].
// The stream is any text file read byte by byte (vocabulary 256) or a flat
// little-endian binary file of uint16 or int32 tokens.
#pragma once

#include "runtime/DataSource.h"

#include <memory>

namespace mgc::runtime {

enum class TokenFileFormat { TextBytes, U16, I32 };

struct TokenSourceOptions {
  std::string path;
  TokenFileFormat format = TokenFileFormat::TextBytes;
  // Inputs fed: tokens and targets are integer [B, T]; positions (optional,
  // "" for none) is integer [T] or [B, T] and holds 0, 1, ..., T - 1.
  std::string tokensInput = "idx";
  std::string targetsInput = "targets";
  std::string positionsInput;
  // When positive, every token must lie in [0, vocabSize); a token outside
  // is reported (naming the file and its position) by the batch holding it.
  // Text files have a vocabulary of 256 whatever this says.
  int64_t vocabSize = 0;
  uint64_t seed = 0;
  bool shuffle = true;
};

// Windows start at 0, T, 2T, ... (every token is a target once per epoch);
// their order is shuffled per epoch with the seed; each batch takes B of
// them, and the last partial batch of an epoch is dropped.
llvm::Expected<std::unique_ptr<BatchSource>>
makeTokenSource(std::vector<InputSpec> inputs, TokenSourceOptions options);

} // namespace mgc::runtime
