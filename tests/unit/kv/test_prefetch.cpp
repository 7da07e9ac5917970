// Prefetch from the host tier: PrefixHistory's rule (K accesses at intervals under the threshold make a
// prefix periodic; due from `lead` of the mean interval before the next expected access, once; bursts count
// once; the tracked prefix is what the accesses shared; bounded), and BlockManager::prefetch bringing a
// periodic prefix's host blocks back as cached, evictable device blocks that the next request hits.
#include "pagoda/kv/block_manager.h"
#include "pagoda/kv/prefix_history.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace pagoda {
namespace {

BlockHash h(uint64_t i) { return BlockHash{i * 0x9e3779b97f4a7c15ULL + 1, i}; }

PrefetchOptions options(double interval) {
  PrefetchOptions o;
  o.max_interval_seconds = interval;
  o.accesses = 3;
  o.lead = 0.5;
  return o;
}

TEST(PrefixHistory, PeriodicAfterKAccessesAndDueHalfAnIntervalAhead) {
  PrefixHistory history(options(1.0));
  const std::vector<BlockHash> chain{h(1), h(2), h(3)};
  history.record(chain, 10.0);
  history.record(chain, 10.8);
  EXPECT_TRUE(history.due(11.5).empty());  // two accesses are not a period yet
  history.record(chain, 11.6);              // mean interval 0.8: next expected at 12.4, due from 12.0
  EXPECT_TRUE(history.due(11.9).empty());
  const auto due = history.due(12.05);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0], chain);
  EXPECT_TRUE(history.due(12.3).empty());  // once per expected access
  history.record(chain, 12.4);
  EXPECT_EQ(history.due(12.8).size(), 1u);  // the next one
}

TEST(PrefixHistory, LongIntervalsAndBurstsAreNotPeriods) {
  PrefixHistory history(options(0.5));
  const std::vector<BlockHash> chain{h(1)};
  history.record(chain, 0.0);
  history.record(chain, 0.4);
  history.record(chain, 1.4);  // one interval of 1.0 > 0.5
  EXPECT_TRUE(history.due(100.0).empty());

  PrefixHistory bursty(options(0.5));
  bursty.record(chain, 0.0);
  bursty.record(chain, 0.001);  // the same burst
  bursty.record(chain, 0.002);
  EXPECT_TRUE(bursty.due(100.0).empty());
}

TEST(PrefixHistory, TracksTheBlocksEveryAccessShared) {
  PrefixHistory history(options(1.0));
  history.record(std::vector<BlockHash>{h(1), h(2), h(3), h(4)}, 0.0);
  history.record(std::vector<BlockHash>{h(1), h(2), h(9)}, 0.5);
  history.record(std::vector<BlockHash>{h(1), h(2), h(3)}, 1.0);
  const auto due = history.due(1.25);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0], (std::vector<BlockHash>{h(1), h(2)}));
}

TEST(PrefixHistory, BoundedDroppingTheLeastRecentlyUsed) {
  PrefetchOptions o = options(1.0);
  o.max_prefixes = 2;
  PrefixHistory history(o);
  history.record(std::vector<BlockHash>{h(1)}, 0.0);
  history.record(std::vector<BlockHash>{h(2)}, 1.0);
  history.record(std::vector<BlockHash>{h(1)}, 2.0);
  history.record(std::vector<BlockHash>{h(3)}, 3.0);  // drops h(2), used last at 1.0
  EXPECT_EQ(history.size(), 2);
  history.record(std::vector<BlockHash>{h(1)}, 2.5 + 0.5);  // h(1) kept its history: 0, 2, 3
  EXPECT_TRUE(history.due(3.4).empty());                     // interval 2.0 > 1.0: not periodic
}

std::vector<TokenId> iota_tokens(int n, TokenId first) {
  std::vector<TokenId> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

TEST(Prefetch, APeriodicPrefixComesBackFromTheHostBeforeItsNextRequest) {
  BlockManagerOptions o{.num_blocks = 6, .block_size = 4, .enable_prefix_caching = true, .num_host_blocks = 16,
                        .prefetch = options(1.0)};
  BlockManager bm(o);
  const std::vector<TokenId> periodic = iota_tokens(13, 0);  // 3 full blocks + 1
  auto request = [&](const std::vector<TokenId>& tokens, double now) {
    SequenceBlocks seq;
    const std::span<const TokenId> all_but_last = std::span(tokens).first(tokens.size() - 1);
    const PrefixHit hit = bm.match_prefix(all_but_last, "");
    EXPECT_TRUE(bm.allocate(seq, static_cast<int>(tokens.size()), hit));
    bm.record_access(tokens, "", hit, now);
    bm.publish_full_blocks(seq, tokens, static_cast<int>(tokens.size()));
    bm.free(seq);
    (void)bm.take_transfers();
    return hit;
  };
  auto flood = [&](TokenId first, double now) { (void)request(iota_tokens(24, first), now); };  // 6 blocks: evicts all
  for (int i = 0; i < 3; ++i) {
    const PrefixHit hit = request(periodic, 0.8 * i);
    EXPECT_EQ(hit.num_host_blocks(), i == 0 ? 0 : 3);  // each time it was flooded out to the host
    flood(static_cast<TokenId>(1000 + 100 * i), 0.8 * i + 0.1);
  }
  const std::span<const TokenId> prefix = std::span(periodic).first(12);
  EXPECT_EQ(bm.match_prefix(prefix, "").num_host_blocks(), 3);
  EXPECT_EQ(bm.prefetch(1.9, 100), 0);  // requests at 0, 0.8, 1.6: the next at 2.4, due from 2.0
  EXPECT_EQ(bm.prefetch(2.05, 100), 3);
  const KvTransfers t = bm.take_transfers();
  EXPECT_EQ(t.to_device.size(), 3u);
  EXPECT_EQ(t.to_host.size(), 3u);  // the flood's evicted blocks, kept in turn
  EXPECT_EQ(bm.prefetch(2.1, 100), 0);  // once per expected request
  EXPECT_EQ(bm.num_evictable_blocks(), 6);  // left cached, not held
  const PrefixHit hit = request(periodic, 2.4);
  EXPECT_EQ(hit.num_host_blocks(), 0);
  EXPECT_EQ(hit.num_tokens, 12);
  EXPECT_EQ(bm.prefetch_stats().issued, 3u);
  EXPECT_EQ(bm.prefetch_stats().useful, 3u);
  EXPECT_EQ(bm.check_invariants({}), "");
}

TEST(Prefetch, OffWithoutAHostTierOrAnInterval) {
  BlockManager no_host({.num_blocks = 4, .block_size = 4, .prefetch = options(1.0)});
  BlockManager no_interval({.num_blocks = 4, .block_size = 4, .num_host_blocks = 4, .prefetch = options(0)});
  const std::vector<TokenId> tokens = iota_tokens(9, 0);
  for (BlockManager* bm : {&no_host, &no_interval}) {
    for (int i = 0; i < 4; ++i) bm->record_access(tokens, "", {}, 0.1 * i);
    EXPECT_EQ(bm->prefetch(10.0, 100), 0);
  }
}

}  // namespace
}  // namespace pagoda
