// Tests for llama.cpp's perplexity convention: which tokens form the chunks, which are scored, and the
// statistics against values worked out by hand.
#include "pagoda/eval/perplexity.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

namespace pagoda {
namespace {

std::vector<TokenId> iota_tokens(int n) {
  std::vector<TokenId> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), 100);
  return t;
}

TEST(PerplexityChunks, ConsecutiveChunksWithBosFirstAndTheRemainderDropped) {
  const std::vector<TokenId> tokens = iota_tokens(10);
  const auto chunks = perplexity_chunks(tokens, 4, 0, TokenId{1});
  ASSERT_EQ(chunks.size(), 2u);  // tokens 8 and 9 are a partial chunk
  EXPECT_EQ(chunks[0], (std::vector<TokenId>{1, 101, 102, 103}));
  EXPECT_EQ(chunks[1], (std::vector<TokenId>{1, 105, 106, 107}));
}

TEST(PerplexityChunks, MaxChunksLimitsAndNoBosKeepsTheFirstToken) {
  const std::vector<TokenId> tokens = iota_tokens(12);
  const auto chunks = perplexity_chunks(tokens, 4, 2, std::nullopt);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[1], (std::vector<TokenId>{104, 105, 106, 107}));
  EXPECT_EQ(perplexity_chunks(tokens, 4, 10, std::nullopt).size(), 3u);  // more asked than there are
}

TEST(PerplexityChunks, FewerTokensThanOneChunkGiveNone) {
  const std::vector<TokenId> tokens = iota_tokens(511);
  EXPECT_TRUE(perplexity_chunks(tokens, 512, 0, TokenId{1}).empty());
}

TEST(PerplexityScoring, SecondHalfAsLlamaCpp) {
  // llama.cpp: first = n_ctx/2; the logits at rows first .. n_ctx-2 score tokens first+1 .. n_ctx-1.
  EXPECT_EQ(first_scored_position(512), 257);
  EXPECT_EQ(tokens_scored_per_chunk(512), 255);
  EXPECT_EQ(first_scored_position(512) + tokens_scored_per_chunk(512), 512);  // through the chunk's last token
  EXPECT_EQ(first_scored_position(5), 3);
  EXPECT_EQ(tokens_scored_per_chunk(5), 2);  // tokens 3 and 4
  EXPECT_EQ(tokens_scored_per_chunk(3), 1);
  EXPECT_EQ(tokens_scored_per_chunk(2), 0);
}

TEST(NllAccumulator, MeanPerplexityAndLlamaCppStandardError) {
  NllAccumulator acc;
  for (double nll : {1.0, 2.0, 3.0, 4.0}) acc.add(nll);
  const PerplexityStats s = acc.stats();
  EXPECT_EQ(s.tokens_scored, 4);
  EXPECT_DOUBLE_EQ(s.nll_mean, 2.5);
  // mean(nll^2) = 7.5; variance = 7.5 - 6.25 = 1.25; stderr = sqrt(1.25 / 3).
  EXPECT_NEAR(s.nll_stderr, std::sqrt(1.25 / 3.0), 1e-12);
  EXPECT_NEAR(s.perplexity, std::exp(2.5), 1e-9);
  EXPECT_NEAR(s.perplexity_stderr, std::exp(2.5) * std::sqrt(1.25 / 3.0), 1e-9);
}

TEST(NllAccumulator, OneTokenOrConstantNllsHaveNoError) {
  NllAccumulator one;
  one.add(0.5);
  EXPECT_EQ(one.stats().nll_stderr, 0.0);
  EXPECT_NEAR(one.stats().perplexity, std::exp(0.5), 1e-12);
  NllAccumulator constant;
  for (int i = 0; i < 10; ++i) constant.add(std::log(36.0));
  EXPECT_NEAR(constant.stats().perplexity, 36.0, 1e-9);
  EXPECT_EQ(constant.stats().perplexity_stderr, 0.0);
  EXPECT_EQ(NllAccumulator().stats().tokens_scored, 0);
}

}  // namespace
}  // namespace pagoda
