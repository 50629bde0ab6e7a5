// Choosing the next token from a language model's logits (mgc generate):
// greedy at temperature 0, else a draw from softmax(logits / temperature)
// over the top_k largest logits (all of them when top_k is 0), as
// Hugging Face's and llama.cpp's samplers do.
#pragma once

#include <cstdint>
#include <random>

namespace mgc::cli {

struct SamplingOptions {
  double temperature = 1.0;
  int64_t topK = 0;
};

// The token among the first `vocab` logits; ties go to the lowest id.
int64_t sampleToken(const float *logits, int64_t vocab,
                    const SamplingOptions &options, std::mt19937_64 &rng);

} // namespace mgc::cli
