// Chunking and statistics of llama.cpp's perplexity.
#include "pagoda/eval/perplexity.h"

#include <algorithm>
#include <cmath>

#include "pagoda/core/check.h"

namespace pagoda {

int first_scored_position(int ctx_size) { return ctx_size / 2 + 1; }

int tokens_scored_per_chunk(int ctx_size) { return ctx_size - 1 - ctx_size / 2; }

std::vector<std::vector<TokenId>> perplexity_chunks(std::span<const TokenId> tokens, int ctx_size, int max_chunks,
                                                    std::optional<TokenId> bos) {
  PAGODA_CHECK(ctx_size >= 2, "perplexity chunks of {} tokens", ctx_size);
  const size_t size = static_cast<size_t>(ctx_size);
  size_t count = tokens.size() / size;
  if (max_chunks > 0) count = std::min(count, static_cast<size_t>(max_chunks));
  std::vector<std::vector<TokenId>> chunks;
  chunks.reserve(count);
  for (size_t c = 0; c < count; ++c) {
    const auto first = tokens.begin() + static_cast<std::ptrdiff_t>(c * size);
    std::vector<TokenId>& chunk = chunks.emplace_back(first, first + static_cast<std::ptrdiff_t>(size));
    if (bos) chunk.front() = *bos;
  }
  return chunks;
}

void NllAccumulator::add(double nll) {
  ++count_;
  sum_ += nll;
  sum_squares_ += nll * nll;
}

PerplexityStats NllAccumulator::stats() const {
  PerplexityStats s;
  s.tokens_scored = count_;
  if (count_ == 0) return s;
  const double n = static_cast<double>(count_);
  s.nll_mean = sum_ / n;
  const double variance = sum_squares_ / n - s.nll_mean * s.nll_mean;
  // As llama.cpp: a non-positive variance (one token, or rounding) leaves the error at 0.
  if (count_ > 1 && variance > 0) s.nll_stderr = std::sqrt(variance / (n - 1));
  s.perplexity = std::exp(s.nll_mean);
  s.perplexity_stderr = s.perplexity * s.nll_stderr;
  return s;
}

}  // namespace pagoda
