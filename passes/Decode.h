// The incremental decoding program of a language model (mgc generate):
// from an inference program that maps tokens[..., T] to logits[..., T, V],
// a program that computes the logits of one new position from that
// position's token and a cache of every attention's keys and values at the
// positions before it. Each new token then costs one position of every
// position-wise op (matmuls, norms, the MLP) and one query row of each
// attention, instead of the whole context (docs/generate.md).
#pragma once

#include "ir/Graph.h"
#include "support/Diagnostics.h"
#include "support/Result.h"

#include <memory>
#include <string>
#include <vector>

namespace mgc::passes {

// What the program is made from: the integer input holding the tokens
// (its last axis is the sequence), an optional integer input [T] holding
// the positions 0..T-1, and the output holding the logits.
struct DecodeSpec {
  std::string tokens = "tokens";
  std::string positions;
  std::string logits = "logits";
};

// The names of the decoding program's own arguments and outputs.
// position: i32[1], the position being decoded (replaces the positions
// input and every arange(T) that rope or an embedding reads).
inline constexpr const char *kDecodePosition = "decode.position";
// mask: [1, T + 1] in the attention's element type, added to the scores of
// the keys [cache 0..T-1, the new position]: 0 for the cache's positions
// before the decoded one and for the new key, -inf for the rest.
inline constexpr const char *kDecodeMask = "decode.mask";

// One attention's cache: inputs `keys`/`values` [..., Hkv, T, Dh] (the
// cached keys and values, written by the caller) and outputs
// `newKeys`/`newValues` [..., Hkv, 1, Dh] (the decoded position's, which
// the caller writes into the cache at that position).
struct DecodeCache {
  std::string keys, values, newKeys, newValues;
  ir::TensorType type; // of the cache inputs
};

struct DecodeProgram {
  std::unique_ptr<ir::Module> module;
  int64_t context = 0; // T: the positions the cache holds
  std::vector<DecodeCache> caches;
};

// Builds the decoding program of `forward` (an inference program before
// fusion: eval-mode, mixed-precision, canonicalize, cse, dce). The tokens
// input becomes [..., 1]; every op on the way to the logits that keeps
// positions apart is rebuilt for one position, and each causal attention
// reads its cache. Reports, at the op's source line, an op that mixes
// positions other than a causal attention (a hand-written attention, a sum
// over the sequence), a non-causal or masked attention, and a missing or
// mistyped tokens, positions or logits argument; fails then.
FailureOr<DecodeProgram> buildDecodeProgram(const ir::Module &forward,
                                            const DecodeSpec &spec,
                                            DiagnosticEngine &diag);

} // namespace mgc::passes
