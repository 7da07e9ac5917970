// Random token ids for benchmark prompts (bench throughput, bench latency): uniform over the vocabulary
// from id 300 up, avoiding the lowest ids where vocabularies keep their special tokens.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "pagoda/core/types.h"

namespace pagoda::cli {

class RandomTokens {
 public:
  RandomTokens(int vocab_size, uint64_t seed) : rng_(seed), dist_(std::min(vocab_size - 1, 300), vocab_size - 1) {}

  TokenId next() { return dist_(rng_); }
  // Appends n tokens to `ids`.
  void append(std::vector<TokenId>& ids, int n) {
    for (int i = 0; i < n; ++i) ids.push_back(next());
  }

 private:
  std::mt19937_64 rng_;
  std::uniform_int_distribution<TokenId> dist_;
};

}  // namespace pagoda::cli
