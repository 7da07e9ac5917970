// The host KV tier: HostKvTier's slots, pins and recorded copies, the BlockManager's offload of evicted
// blocks and its host hits, and a property test over random traces in which every block "holds" the hash of
// the tokens written into it, copies move those values as a backend would (all offloads, then all loads,
// then the step's writes), and every sequence must see exactly its own tokens' blocks.
#include "pagoda/kv/block_manager.h"
#include "pagoda/kv/host_tier.h"

#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <random>
#include <vector>

namespace pagoda {
namespace {

BlockHash hash_of_int(uint64_t i) { return BlockHash{i * 0x9e3779b97f4a7c15ULL + 1, i}; }

std::vector<TokenId> iota_tokens(int n, TokenId first = 0) {
  std::vector<TokenId> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

std::span<const TokenId> all_but_last(const std::vector<TokenId>& t) { return std::span(t).first(t.size() - 1); }

TEST(HostKvTier, OffloadsIntoFreeSlotsThenEvictsTheLeastRecent) {
  HostKvTier tier(2, EvictionPolicyKind::kLru);
  tier.offload(7, hash_of_int(1), {});
  tier.offload(8, hash_of_int(2), {});
  EXPECT_EQ(tier.num_used(), 2);
  EXPECT_EQ(tier.lookup(hash_of_int(1)), 0);
  EXPECT_EQ(tier.lookup(hash_of_int(2)), 1);
  KvTransfers t = tier.take_transfers();
  EXPECT_EQ(t.to_host, (std::vector<KvBlockCopy>{{7, 0}, {8, 1}}));
  EXPECT_TRUE(t.to_device.empty());
  EXPECT_TRUE(tier.take_transfers().empty());

  tier.offload(9, hash_of_int(1), {});  // already on the host: an access, no copy
  EXPECT_TRUE(tier.take_transfers().empty());
  EXPECT_EQ(tier.stats().offloads_skipped, 1u);
  tier.offload(10, hash_of_int(3), {});  // full: hash 2 was used least recently
  EXPECT_FALSE(tier.lookup(hash_of_int(2)));
  EXPECT_EQ(tier.lookup(hash_of_int(3)), 1);
  EXPECT_EQ(tier.take_transfers().to_host, (std::vector<KvBlockCopy>{{10, 1}}));
  EXPECT_EQ(tier.stats().evicted, 1u);
  EXPECT_EQ(tier.check_invariants(), "");
}

TEST(HostKvTier, APinnedSlotIsNeverReusedBeforeTheStepTakesItsCopies) {
  HostKvTier tier(2, EvictionPolicyKind::kLru);
  tier.offload(1, hash_of_int(1), {});
  tier.offload(2, hash_of_int(2), {});
  (void)tier.take_transfers();
  tier.load(0, 5);  // hash 1 goes back to device block 5 this step
  tier.offload(3, hash_of_int(3), {});  // must take slot 1, not the pinned slot 0
  EXPECT_EQ(tier.lookup(hash_of_int(1)), 0);
  EXPECT_EQ(tier.lookup(hash_of_int(3)), 1);
  tier.offload(4, hash_of_int(4), {});  // slot 1 is not pinned: reused (hash 3 is gone)
  EXPECT_EQ(tier.lookup(hash_of_int(4)), 1);
  tier.load(1, 6);
  tier.offload(11, hash_of_int(5), {});  // both pinned now: dropped
  EXPECT_FALSE(tier.lookup(hash_of_int(5)));
  EXPECT_EQ(tier.stats().offloads_dropped, 1u);
  EXPECT_EQ(tier.check_invariants(), "");
  const KvTransfers t = tier.take_transfers();
  EXPECT_EQ(t.to_host, (std::vector<KvBlockCopy>{{3, 1}, {4, 1}}));
  EXPECT_EQ(t.to_device, (std::vector<KvBlockCopy>{{5, 0}, {6, 1}}));
  EXPECT_EQ(tier.clear(), 2);  // unpinned again
  EXPECT_EQ(tier.num_used(), 0);
  EXPECT_EQ(tier.check_invariants(), "");
}

TEST(HostKvTier, WithoutSlotsItDoesNothing) {
  HostKvTier tier(0, EvictionPolicyKind::kLruK);
  tier.offload(1, hash_of_int(1), {});
  EXPECT_FALSE(tier.enabled());
  EXPECT_FALSE(tier.lookup(hash_of_int(1)));
  EXPECT_TRUE(tier.take_transfers().empty());
}

class HostTierManagerTest : public ::testing::Test {
 protected:
  void make(int num_blocks, int num_host_blocks, EvictionPolicyKind kind = EvictionPolicyKind::kLru) {
    BlockManagerOptions o{.num_blocks = num_blocks, .block_size = 4, .enable_prefix_caching = true,
                          .eviction_policy = kind, .num_host_blocks = num_host_blocks};
    bm_ = std::make_unique<BlockManager>(o);
  }
  // Allocates and publishes a whole prompt, as the scheduler does when it admits it.
  void admit(SequenceBlocks& seq, const std::vector<TokenId>& tokens) {
    const PrefixHit hit = bm_->match_prefix(all_but_last(tokens), seq.salt());
    ASSERT_TRUE(bm_->allocate(seq, static_cast<int>(tokens.size()), hit));
    bm_->publish_full_blocks(seq, tokens, static_cast<int>(tokens.size()));
  }
  std::unique_ptr<BlockManager> bm_;
};

TEST_F(HostTierManagerTest, EvictedBlocksGoToTheHostAndComeBackOnAHit) {
  make(4, 8);
  const std::vector<TokenId> a = iota_tokens(13);  // 3 full blocks + 1 token
  SequenceBlocks sa;
  admit(sa, a);
  const std::vector<BlockId> a_blocks(sa.block_table().begin(), sa.block_table().end());
  bm_->free(sa);  // cached, evictable
  EXPECT_TRUE(bm_->take_transfers().empty());

  SequenceBlocks sb;
  admit(sb, iota_tokens(16, 1000));  // takes all 4 blocks: the 3 cached ones are evicted to the host
  const KvTransfers out = bm_->take_transfers();
  ASSERT_EQ(out.to_host.size(), 3u);
  EXPECT_TRUE(out.to_device.empty());
  for (const KvBlockCopy& c : out.to_host)
    EXPECT_NE(std::find(a_blocks.begin(), a_blocks.end(), c.block), a_blocks.end());
  EXPECT_EQ(bm_->host_tier().num_used(), 3);
  bm_->free(sb);

  SequenceBlocks sc;
  const PrefixHit hit = bm_->match_prefix(all_but_last(a), "");
  ASSERT_EQ(hit.blocks.size(), 3u);
  EXPECT_EQ(hit.num_host_blocks(), 3);
  EXPECT_EQ(hit.num_tokens, 12);
  ASSERT_TRUE(bm_->allocate(sc, 13, hit));
  const KvTransfers back = bm_->take_transfers();
  ASSERT_EQ(back.to_device.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(back.to_device[i].block, sc.block_table()[i]);  // chain order
    EXPECT_EQ(back.to_device[i].slot, hit.host_slots[i]);
  }
  // The loaded blocks are device-cached again (the step runs the load before its forward).
  const PrefixHit again = bm_->match_prefix(all_but_last(a), "");
  EXPECT_EQ(again.num_host_blocks(), 0);
  EXPECT_EQ(again.num_tokens, 12);
  const std::vector<const SequenceBlocks*> seqs{&sc};
  EXPECT_EQ(bm_->check_invariants(seqs), "");
}

TEST_F(HostTierManagerTest, ABlockBackFromTheHostKeepsItsLruKHistory) {
  // K = 2, every access an entry. A prompt block seen twice goes to the host and comes back on a hit: it must
  // still be hot, so a one-off block published after it is the next victim. (Before its history travelled,
  // the block came back with one access, older than the one-off's, and went first.)
  BlockManagerOptions o{.num_blocks = 2, .block_size = 4, .enable_prefix_caching = true,
                        .eviction_policy = EvictionPolicyKind::kLruK,
                        .lru_k = LruKOptions{.k = 2, .correlated_period_seconds = 0}, .num_host_blocks = 8};
  bm_ = std::make_unique<BlockManager>(o);
  const std::vector<TokenId> p = iota_tokens(5);  // one full block and a token
  for (int i = 0; i < 2; ++i) {  // published, then a hit: two entries
    SequenceBlocks s;
    admit(s, p);
    bm_->free(s);
  }
  SequenceBlocks q;
  admit(q, iota_tokens(8, 1000));  // both blocks: p's goes to the host with its history
  ASSERT_EQ(bm_->take_transfers().to_host.size(), 1u);
  bm_->free(q);
  SequenceBlocks back;
  const PrefixHit hit = bm_->match_prefix(all_but_last(p), "");
  ASSERT_EQ(hit.num_host_blocks(), 1);
  ASSERT_TRUE(bm_->allocate(back, 5, hit));
  bm_->publish_full_blocks(back, p, 5);
  const BlockId p_block = back.block_table()[0];
  (void)bm_->take_transfers();
  bm_->free(back);
  SequenceBlocks once;
  admit(once, iota_tokens(4, 2000));  // one full block, one access
  const BlockId once_block = once.block_table()[0];
  bm_->free(once);
  SequenceBlocks next;
  admit(next, iota_tokens(4, 3000));  // needs one block: a cached one must go
  const KvTransfers out = bm_->take_transfers();
  ASSERT_EQ(out.to_host.size(), 1u);
  EXPECT_EQ(out.to_host[0].block, once_block);
  EXPECT_NE(out.to_host[0].block, p_block);
  EXPECT_EQ(bm_->match_prefix(all_but_last(p), "").num_host_blocks(), 0);  // p is still on the device
  const std::vector<const SequenceBlocks*> seqs{&next};
  EXPECT_EQ(bm_->check_invariants(seqs), "");
}

TEST_F(HostTierManagerTest, AHitMixesDeviceAndHostBlocksInChainOrder) {
  make(6, 8, EvictionPolicyKind::kLru);
  const std::vector<TokenId> a = iota_tokens(17);  // 4 full blocks
  SequenceBlocks sa;
  admit(sa, a);
  bm_->free(sa);  // freed last block first: LRU evicts blocks 3, 2, 1, 0 in that order
  (void)bm_->take_transfers();
  SequenceBlocks sb;
  admit(sb, iota_tokens(16, 500));  // 4 blocks: 2 free + 2 evicted (the tail of a)
  EXPECT_EQ(bm_->take_transfers().to_host.size(), 2u);
  const PrefixHit hit = bm_->match_prefix(all_but_last(a), "");
  ASSERT_EQ(hit.blocks.size(), 4u);
  EXPECT_FALSE(hit.on_host(0));
  EXPECT_FALSE(hit.on_host(1));
  EXPECT_TRUE(hit.on_host(2));
  EXPECT_TRUE(hit.on_host(3));
  SequenceBlocks sc;
  EXPECT_EQ(bm_->num_new_blocks_needed(sc, 17, hit), 3);  // two host blocks and the last token's
  EXPECT_FALSE(bm_->can_allocate(sc, 17, hit));  // 2 free + 0 evictable besides the hit's own
  bm_->free(sb);
  ASSERT_TRUE(bm_->allocate(sc, 17, hit));
  const KvTransfers t = bm_->take_transfers();
  ASSERT_EQ(t.to_device.size(), 2u);
  EXPECT_EQ(t.to_device[0].block, sc.block_table()[2]);
  EXPECT_EQ(t.to_device[1].block, sc.block_table()[3]);
  // Loading into blocks that held sb's cached blocks offloaded those first, in the same step.
  EXPECT_EQ(t.to_host.size(), 3u);
  const std::vector<const SequenceBlocks*> seqs{&sc};
  EXPECT_EQ(bm_->check_invariants(seqs), "");
}

TEST_F(HostTierManagerTest, SaltsStaySeparateOnTheHost) {
  make(3, 8);
  const std::vector<TokenId> a = iota_tokens(9);
  SequenceBlocks s1("tenant-a");
  admit(s1, a);
  bm_->free(s1);
  SequenceBlocks filler;
  admit(filler, iota_tokens(12, 900));
  bm_->free(filler);
  EXPECT_EQ(bm_->host_tier().num_used(), 2);
  EXPECT_EQ(bm_->match_prefix(all_but_last(a), "tenant-b").num_tokens, 0);
  EXPECT_EQ(bm_->match_prefix(all_but_last(a), "tenant-a").num_tokens, 8);
}

TEST_F(HostTierManagerTest, CountsEvictionsAndHostBlocksPerTenant) {
  make(3, 8);
  SequenceBlocks a("a");
  a.set_tenant(1);
  admit(a, iota_tokens(9));  // 2 full blocks cached under tenant 1
  bm_->free(a);
  SequenceBlocks filler;     // no tenant
  admit(filler, iota_tokens(12, 100));
  bm_->free(filler);
  std::vector<TenantBlockCounts> counts = bm_->tenant_block_counts();
  ASSERT_EQ(counts.size(), 2u);
  EXPECT_EQ(counts[1].evicted, 2u);
  EXPECT_EQ(counts[1].host_blocks, 2);
  EXPECT_EQ(counts[0].evicted, 0u);
  bm_->reset_prefix_cache();
  EXPECT_EQ(bm_->tenant_block_counts()[1].host_blocks, 0);
  EXPECT_EQ(bm_->tenant_block_counts()[1].evicted, 2u);
}

TEST_F(HostTierManagerTest, ResetForgetsTheHostTierToo) {
  make(3, 4);
  SequenceBlocks s;
  admit(s, iota_tokens(9));
  bm_->free(s);
  SequenceBlocks filler;
  admit(filler, iota_tokens(12, 100));
  bm_->free(filler);
  EXPECT_GT(bm_->host_tier().num_used(), 0);
  bm_->reset_prefix_cache();
  EXPECT_EQ(bm_->host_tier().num_used(), 0);
  EXPECT_EQ(bm_->match_prefix(all_but_last(iota_tokens(9)), "").num_tokens, 0);
}

// Random traces against a model of the KV contents: every block and slot "holds" the hash of the tokens
// last written into it. A step admits and frees sequences, runs its copies as a backend does (offloads,
// then loads), then writes the blocks it computes. Every live sequence's hashed blocks must then hold the
// hashes of its own tokens: a block is never evicted or offloaded while referenced and no slot is stale.
// The same trace without a host tier gives the same contents and fewer hits.
struct TraceResult {
  uint64_t hit_tokens = 0;
  uint64_t host_hit_tokens = 0;
};

TraceResult run_trace(uint64_t seed, int num_host_blocks, EvictionPolicyKind kind) {
  constexpr int kBlockSize = 4;
  BlockManagerOptions o{.num_blocks = 24, .block_size = kBlockSize, .enable_prefix_caching = true,
                        .eviction_policy = kind, .num_host_blocks = num_host_blocks};
  BlockManager bm(o);
  std::mt19937_64 rng(seed);
  std::vector<BlockHash> device(o.num_blocks), host(std::max(num_host_blocks, 1));
  struct Live {
    std::unique_ptr<SequenceBlocks> blocks;
    std::vector<TokenId> tokens;
    std::vector<BlockHash> expected;  // chain hashes of its full blocks
  };
  std::vector<Live> live;
  TraceResult result;
  for (int step = 0; step < 400; ++step) {
    // Plan: free some, admit some (prompts from 6 families sharing 2-4 leading blocks).
    std::vector<std::pair<size_t, int>> computed;  // (live index, first block it computes)
    for (size_t i = 0; i < live.size();) {
      if (rng() % 3 == 0) {
        bm.free(*live[i].blocks);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
    for (int n = static_cast<int>(rng() % 3); n > 0; --n) {
      const int family = static_cast<int>(rng() % 6);
      const int shared = 2 + family % 3;
      std::vector<TokenId> tokens = iota_tokens(shared * kBlockSize, family * 1000);
      const int extra = static_cast<int>(rng() % 9);
      for (int e = 0; e < extra; ++e) tokens.push_back(static_cast<TokenId>(50000 + rng() % 4));
      tokens.push_back(7);
      Live l{std::make_unique<SequenceBlocks>(family % 2 ? "odd" : ""), tokens, {}};
      const PrefixHit hit = bm.match_prefix(all_but_last(tokens), l.blocks->salt());
      if (!bm.allocate(*l.blocks, static_cast<int>(tokens.size()), hit)) continue;
      bm.record_prefix_lookup(static_cast<int>(tokens.size()), hit.num_tokens, hit.num_host_blocks() * kBlockSize);
      bm.publish_full_blocks(*l.blocks, tokens, static_cast<int>(tokens.size()));
      std::optional<BlockHash> parent;
      for (size_t b = 0; b + 1 <= tokens.size() / kBlockSize; ++b) {
        parent = hash_block(parent, std::span(tokens).subspan(b * kBlockSize, kBlockSize), l.blocks->salt());
        l.expected.push_back(*parent);
      }
      computed.emplace_back(live.size(), static_cast<int>(hit.blocks.size()));
      live.push_back(std::move(l));
    }
    // Run: copies first, then the step's writes.
    const KvTransfers t = bm.take_transfers();
    EXPECT_TRUE(num_host_blocks > 0 || t.empty());
    for (const KvBlockCopy& c : t.to_host) host[c.slot] = device[c.block];
    for (const KvBlockCopy& c : t.to_device) device[c.block] = host[c.slot];
    for (const auto& [index, first] : computed) {
      const Live& l = live[index];
      for (size_t b = static_cast<size_t>(first); b < l.expected.size(); ++b)
        device[l.blocks->block_table()[b]] = l.expected[b];
    }
    std::vector<const SequenceBlocks*> tables;
    for (const Live& l : live) {
      tables.push_back(l.blocks.get());
      for (size_t b = 0; b < l.expected.size(); ++b) {
        EXPECT_EQ(device[l.blocks->block_table()[b]], l.expected[b]) << "seed " << seed << " step " << step << " block " << b;
      }
    }
    const std::string problem = bm.check_invariants(tables);
    EXPECT_EQ(problem, "") << "seed " << seed << " step " << step;
    if (!problem.empty() || ::testing::Test::HasFailure()) break;
  }
  result.hit_tokens = bm.prefix_cache_stats().num_hit_tokens;
  result.host_hit_tokens = bm.prefix_cache_stats().num_host_hit_tokens;
  return result;
}

TEST(HostTierTrace, EverySequenceSeesItsOwnBlocksWithEachPolicy) {
  for (EvictionPolicyKind kind : {EvictionPolicyKind::kLru, EvictionPolicyKind::kLruK}) {
    uint64_t hits_without = 0, hits_with = 0, host_hits = 0;
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      const TraceResult without = run_trace(seed, 0, kind);
      const TraceResult with = run_trace(seed, 12, kind);
      EXPECT_EQ(without.host_hit_tokens, 0u);
      hits_without += without.hit_tokens;
      hits_with += with.hit_tokens;
      host_hits += with.host_hit_tokens;
    }
    // The traces differ once hits differ (allocation sizes change), so compare totals.
    EXPECT_GT(host_hits, 0u);
    EXPECT_GT(hits_with, hits_without);
  }
}

}  // namespace
}  // namespace pagoda
