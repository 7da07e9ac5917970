// Chained XXH3-128 block hashes for prefix caching.
#include "pagoda/kv/block_hash.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack: no allocation per block
#include <xxhash.h>

#include "pagoda/core/check.h"

namespace pagoda {
namespace {
constexpr uint8_t kTagFirstBlock = 1;  // followed by the salt's length and bytes
constexpr uint8_t kTagChained = 2;     // followed by the parent hash
}  // namespace

BlockHash hash_block(const std::optional<BlockHash>& parent, std::span<const TokenId> tokens, std::string_view salt) {
  XXH3_state_t state;
  PAGODA_CHECK(XXH3_128bits_reset(&state) == XXH_OK);
  if (parent) {
    const uint8_t tag = kTagChained;
    const uint64_t words[2] = {parent->low, parent->high};
    XXH3_128bits_update(&state, &tag, 1);
    XXH3_128bits_update(&state, words, sizeof(words));
  } else {
    // The salt's length goes first so that (salt, tokens) splits are unambiguous.
    const uint8_t tag = kTagFirstBlock;
    const uint64_t salt_size = salt.size();
    XXH3_128bits_update(&state, &tag, 1);
    XXH3_128bits_update(&state, &salt_size, sizeof(salt_size));
    XXH3_128bits_update(&state, salt.data(), salt.size());
  }
  XXH3_128bits_update(&state, tokens.data(), tokens.size_bytes());
  const XXH128_hash_t h = XXH3_128bits_digest(&state);
  return BlockHash{h.low64, h.high64};
}

uint64_t salt_key(std::string_view salt) { return salt.empty() ? 0 : XXH3_64bits(salt.data(), salt.size()); }

}  // namespace pagoda
