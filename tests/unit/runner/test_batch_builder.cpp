// BatchBuilder with placeholder inputs (async scheduling): a chunk's last token may be a row of the
// previous step's samples; the batch marks it, and resolve_on_host() fills it in when the ids are known.
#include "pagoda/runner/batch_builder.h"

#include <gtest/gtest.h>

#include <vector>

namespace pagoda {
namespace {

std::vector<int32_t> values(const Tensor& t) {
  const auto* p = t.ptr<const int32_t>();
  return std::vector<int32_t>(p, p + t.numel());
}

TEST(BatchBuilder, PlaceholderInputsAreMarkedThenResolved) {
  const std::vector<TokenId> prompt = {10, 11, 12};
  const std::vector<int32_t> blocks_a = {3}, blocks_b = {5, 6};
  const std::vector<SequenceChunk> chunks = {
      // A decode whose input is row 1 of the previous samples: no known tokens.
      {std::span<const TokenId>(), 2, blocks_a, LogitsWanted::kLast, 1},
      // A prompt chunk, all known.
      {prompt, 0, blocks_b, LogitsWanted::kLast},
      // A decode whose input is row 0.
      {std::span<const TokenId>(), 5, blocks_b, LogitsWanted::kLast, 0},
  };
  BatchBuilder builder;
  const ForwardBatch& batch = builder.build(chunks, 4);
  EXPECT_EQ(batch.num_tokens, 5);
  EXPECT_EQ(values(batch.token_ids), (std::vector<int32_t>{0, 10, 11, 12, 0}));
  EXPECT_EQ(values(batch.token_from_prev_sample), (std::vector<int32_t>{1, -1, -1, -1, 0}));
  EXPECT_EQ(batch.num_tokens_from_prev_sample, 2);
  EXPECT_EQ(values(batch.positions), (std::vector<int32_t>{2, 0, 1, 2, 5}));
  EXPECT_EQ(values(batch.seq_lens), (std::vector<int32_t>{3, 3, 6}));
  EXPECT_EQ(values(batch.slot_mapping), (std::vector<int32_t>{14, 20, 21, 22, 25}));
  EXPECT_EQ(batch.num_leading_decodes, 1);

  const std::vector<TokenId> previous = {77, 88};
  const ForwardBatch& resolved = builder.resolve_on_host(previous);
  EXPECT_EQ(values(resolved.token_ids), (std::vector<int32_t>{88, 10, 11, 12, 77}));
  EXPECT_EQ(values(resolved.token_from_prev_sample), (std::vector<int32_t>(5, -1)));
  EXPECT_EQ(resolved.num_tokens_from_prev_sample, 0);
}

TEST(BatchBuilder, NoPlaceholdersMeansNothingToResolve) {
  const std::vector<TokenId> tokens = {4, 5};
  const std::vector<int32_t> blocks = {0};
  const SequenceChunk chunk{tokens, 0, blocks, LogitsWanted::kLast};
  BatchBuilder builder;
  const ForwardBatch& batch = builder.build(std::span(&chunk, 1), 16);
  EXPECT_EQ(batch.num_tokens_from_prev_sample, 0);
  EXPECT_EQ(values(batch.token_from_prev_sample), (std::vector<int32_t>{-1, -1}));
}

}  // namespace
}  // namespace pagoda
