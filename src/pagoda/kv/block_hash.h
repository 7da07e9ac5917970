// BlockHash: the 128-bit identity of a full KV block for prefix caching. A block's hash chains its
// parent block's hash and its own token ids; the first block of a sequence folds in the cache salt
// instead of a parent, so different salts (tenants, request cache_salt) never share blocks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "pagoda/core/types.h"

namespace pagoda {

struct BlockHash {
  uint64_t low = 0;
  uint64_t high = 0;

  friend bool operator==(const BlockHash&, const BlockHash&) = default;
};

// For unordered_map keys: the 128-bit hash is already uniformly distributed.
struct BlockHashHasher {
  size_t operator()(const BlockHash& h) const noexcept { return static_cast<size_t>(h.low ^ (h.high * 31)); }
};

// XXH3-128 over (parent hash, or the salt when there is no parent) and the block's token ids. Tagging
// the two cases keeps a salt from ever colliding with a parent hash of the same bytes.
BlockHash hash_block(const std::optional<BlockHash>& parent, std::span<const TokenId> tokens, std::string_view salt);

// A 64-bit key of a salt, for eviction policies that weigh tenants (0 for the empty salt).
uint64_t salt_key(std::string_view salt);

}  // namespace pagoda
