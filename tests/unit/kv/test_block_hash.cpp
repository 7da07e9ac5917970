// Chained block hashes: deterministic, sensitive to parent, tokens and salt.
#include "pagoda/kv/block_hash.h"

#include <gtest/gtest.h>

#include <vector>

namespace pagoda {
namespace {

TEST(BlockHash, DeterministicAndTokenSensitive) {
  const std::vector<TokenId> a = {1, 2, 3, 4};
  const std::vector<TokenId> b = {1, 2, 3, 5};
  EXPECT_EQ(hash_block(std::nullopt, a, ""), hash_block(std::nullopt, a, ""));
  EXPECT_NE(hash_block(std::nullopt, a, ""), hash_block(std::nullopt, b, ""));
}

TEST(BlockHash, ParentIsChained) {
  const std::vector<TokenId> tokens = {7, 8, 9, 10};
  const BlockHash p1 = hash_block(std::nullopt, std::vector<TokenId>{1, 1, 1, 1}, "");
  const BlockHash p2 = hash_block(std::nullopt, std::vector<TokenId>{2, 2, 2, 2}, "");
  EXPECT_NE(hash_block(p1, tokens, ""), hash_block(p2, tokens, ""));
  EXPECT_NE(hash_block(p1, tokens, ""), hash_block(std::nullopt, tokens, ""));
}

TEST(BlockHash, SaltSeparatesFirstBlocksAndTheirChains) {
  const std::vector<TokenId> tokens = {1, 2, 3, 4};
  const BlockHash none = hash_block(std::nullopt, tokens, "");
  const BlockHash t1 = hash_block(std::nullopt, tokens, "tenant-1");
  const BlockHash t2 = hash_block(std::nullopt, tokens, "tenant-2");
  EXPECT_NE(none, t1);
  EXPECT_NE(t1, t2);
  EXPECT_NE(hash_block(t1, tokens, ""), hash_block(t2, tokens, ""));
  // Only the first block folds in the salt; chained blocks depend on it through the parent.
  EXPECT_EQ(hash_block(t1, tokens, "ignored"), hash_block(t1, tokens, ""));
}

TEST(BlockHash, SaltKey) {
  EXPECT_EQ(salt_key(""), 0u);
  EXPECT_NE(salt_key("a"), salt_key("b"));
}

}  // namespace
}  // namespace pagoda
