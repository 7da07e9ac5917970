// LRU-K eviction with tenant weights: every victim of random access traces (several weights, hits while
// referenced, correlated bursts, K = 1, 2, 3) against a brute-force reference of the definition in
// lru_k_policy.h; the seed's weighted example; K = 1 as LRU by last access; the pool's take_fresh.
// Time is a fake clock driven by the test; no timing is measured.
#include "pagoda/kv/lru_k_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "pagoda/core/error.h"
#include "pagoda/kv/block_manager.h"
#include "pagoda/kv/block_pool.h"

namespace pagoda {
namespace {

// The definition, read literally: every raw access time is kept, and the history entries, distances
// and the victim are recomputed from them by a scan over all evictable blocks.
class BruteForceLruK {
 public:
  BruteForceLruK(int num_blocks, const LruKOptions& options) : options_(options), blocks_(num_blocks) {}

  void access(BlockId b, double now) { blocks_[b].accesses.push_back(now); }
  // The history a block's contents bring back (entry times, most recent first): its entries as they were, the
  // latest one's time standing for its first access (lru_k_policy.h).
  void restore(BlockId b, const std::vector<double>& entries) {
    blocks_[b].restored.assign(entries.rbegin(), entries.rend());
  }
  void evictable(BlockId b, float weight, double now) {
    Block& block = blocks_[b];
    if (block.accesses.empty() && block.restored.empty()) block.accesses.push_back(now);  // "gets one at that moment"
    block.evictable = true;
    block.weight = weight;
  }
  void referenced(BlockId b) { blocks_[b].evictable = false; }
  bool contains(BlockId b) const { return blocks_[b].evictable; }
  int num_evictable() const {
    return static_cast<int>(std::count_if(blocks_.begin(), blocks_.end(), [](const Block& b) { return b.evictable; }));
  }

  // Entry times, most recent first: an access joins the latest entry when t - (its first access) < P.
  std::vector<double> entries(BlockId b) const {
    std::vector<double> times = blocks_[b].restored;  // oldest first
    double start = times.empty() ? 0 : times.back();
    for (double t : blocks_[b].accesses) {
      if (!times.empty() && t - start < options_.correlated_period_seconds) {
        times.back() = t;
      } else {
        times.push_back(t);
        start = t;
      }
    }
    std::reverse(times.begin(), times.end());
    return times;
  }

  BlockId victim(double now) const {
    std::optional<BlockId> best;
    bool best_infinite = false;
    double best_age = 0;
    float best_weight = 0;
    for (BlockId b = 0; b < static_cast<BlockId>(blocks_.size()); ++b) {
      if (!blocks_[b].evictable) continue;
      const std::vector<double> e = entries(b);
      const bool infinite = static_cast<int>(e.size()) < options_.k;
      // Infinite distance: ranked by (now - t_1) / w; otherwise by d_K / w = (now - t_K) / w.
      const double age = (now - (infinite ? e[0] : e[options_.k - 1])) / static_cast<double>(blocks_[b].weight);
      const float w = blocks_[b].weight;
      bool better;
      if (!best) {
        better = true;
      } else if (infinite != best_infinite) {
        better = infinite;
      } else if (age != best_age) {
        better = age > best_age;
      } else if (w != best_weight) {
        better = w < best_weight;
      } else {
        better = b < *best;
      }
      if (better) {
        best = b;
        best_infinite = infinite;
        best_age = age;
        best_weight = w;
      }
    }
    EXPECT_TRUE(best.has_value());
    return best.value_or(-1);
  }
  void evicted(BlockId b) {
    blocks_[b].evictable = false;
    blocks_[b].accesses.clear();
    blocks_[b].restored.clear();
  }

 private:
  struct Block {
    std::vector<double> restored;  // entries brought back by restore, oldest first
    std::vector<double> accesses;
    bool evictable = false;
    float weight = 1.0f;
  };
  LruKOptions options_;
  std::vector<Block> blocks_;
};

// A test clock: the policy reads `now`.
struct FakeClock {
  double now = 0;
  LruKEvictionPolicy::Clock clock() {
    return [this] { return now; };
  }
};

CachedBlockInfo weighted(float w) { return CachedBlockInfo{.weight = w}; }

TEST(LruKEvictionPolicy, SeedExampleWeightScalesAge) {
  // K = 1: "seen" is the last access. A weight-0.8 block seen 3.2 s ago (age 4) is kept; a weight-0.3
  // block seen 12.7 s ago (age 42.3) goes first, even before a weight-1 block seen 20 s ago (age 20).
  FakeClock c;
  LruKEvictionPolicy p(3, LruKOptions{.k = 1, .correlated_period_seconds = 0}, c.clock());
  c.now = 100.0 - 12.7;
  p.on_access(0, weighted(0.3f));
  c.now = 100.0 - 20.0;
  p.on_access(1, weighted(1.0f));
  c.now = 100.0 - 3.2;
  p.on_access(2, weighted(0.8f));
  c.now = 100.0;
  for (BlockId b : {0, 1, 2}) p.on_evictable(b, weighted(b == 0 ? 0.3f : b == 1 ? 1.0f : 0.8f));
  EXPECT_EQ(p.evict(), 0);
  EXPECT_EQ(p.evict(), 1);
  EXPECT_EQ(p.evict(), 2);
}

TEST(LruKEvictionPolicy, AHistoryEvictedWithABlockIsRestoredIntoAnother) {
  // K = 2. Block 0 is seen at 1 and 2 and block 1 at 3; block 1 goes first (fewer than K entries) and takes
  // its one entry along. Restored into block 4, block 0's two entries make it outlive block 5, seen once
  // later (at 6): without the history, block 4's one access (at 5) would be older and go first.
  FakeClock c;
  LruKEvictionPolicy p(6, LruKOptions{.k = 2, .correlated_period_seconds = 0}, c.clock());
  for (const double t : {1.0, 2.0}) {
    c.now = t;
    p.on_access(0, weighted(1.0f));
  }
  c.now = 3.0;
  p.on_access(1, weighted(1.0f));
  p.on_evictable(0, weighted(1.0f));
  p.on_evictable(1, weighted(1.0f));
  AccessHistory h1, h0;
  EXPECT_EQ(p.evict_with_history(h1), 1);
  ASSERT_EQ(h1.count, 1);
  EXPECT_EQ(h1.times[0], 3.0);
  EXPECT_EQ(p.evict_with_history(h0), 0);
  ASSERT_EQ(h0.count, 2);
  EXPECT_EQ(h0.times[0], 2.0);
  EXPECT_EQ(h0.times[1], 1.0);
  EXPECT_EQ(p.history(0).count, 0);  // forgotten by the block it left

  c.now = 5.0;
  p.restore(4, h0);
  EXPECT_EQ(p.history(4).count, 2);
  p.on_evictable(4, weighted(1.0f));  // no new access: the restored ones stand
  EXPECT_EQ(p.history(4).times[0], 2.0);
  c.now = 6.0;
  p.on_access(5, weighted(1.0f));
  p.on_evictable(5, weighted(1.0f));
  EXPECT_EQ(p.evict(), 5);
  EXPECT_EQ(p.evict(), 4);
}

TEST(LruKEvictionPolicy, SeedExampleWithK2UsesTheSecondMostRecentAccess) {
  // K = 2: both blocks were also used a moment ago; what counts is their second most recent access.
  FakeClock c;
  LruKEvictionPolicy p(2, LruKOptions{.k = 2, .correlated_period_seconds = 0}, c.clock());
  c.now = 100.0 - 12.7;
  p.on_access(0, weighted(0.3f));
  c.now = 100.0 - 3.2;
  p.on_access(1, weighted(0.8f));
  c.now = 99.9;
  p.on_access(0, weighted(0.3f));
  p.on_access(1, weighted(0.8f));
  c.now = 100.0;
  p.on_evictable(1, weighted(0.8f));
  p.on_evictable(0, weighted(0.3f));
  EXPECT_EQ(p.evict_all(), (std::vector<BlockId>{0, 1}));
}

TEST(LruKEvictionPolicy, FewerThanKAccessesGoFirstThenLargestWeightedAge) {
  FakeClock c;
  LruKEvictionPolicy p(4, LruKOptions{.k = 2, .correlated_period_seconds = 0}, c.clock());
  // Block 0: hot (two accesses, the older 10 s ago). Blocks 1-3: one access each, more recent.
  c.now = 0;
  p.on_access(0, {});
  c.now = 5;
  p.on_access(0, {});
  c.now = 6;
  p.on_access(1, weighted(2.0f));  // infinite; (10 - 6) / 2 = 2
  c.now = 8;
  p.on_access(2, {});  // infinite; 2
  p.on_access(3, {});  // infinite; 2
  c.now = 10;
  p.on_evictable(0, {});
  p.on_evictable(1, weighted(2.0f));
  p.on_evictable(2, {});
  p.on_evictable(3, {});
  // Equal ages: the lower weight first (2 and 3 before 1), then the lower id; the hot block last.
  EXPECT_EQ(p.evict_all(), (std::vector<BlockId>{2, 3, 1, 0}));
}

TEST(LruKEvictionPolicy, TiesGoToTheLowerWeightThenTheLowerId) {
  FakeClock c;
  LruKEvictionPolicy p(4, LruKOptions{.k = 1, .correlated_period_seconds = 0}, c.clock());
  c.now = 8;
  p.on_access(3, weighted(1.0f));  // age (12 - 8) / 1 = 4
  p.on_access(1, weighted(1.0f));  // 4
  c.now = 10;
  p.on_access(2, weighted(0.5f));  // (12 - 10) / 0.5 = 4
  c.now = 11;
  p.on_access(0, weighted(0.25f));  // (12 - 11) / 0.25 = 4
  c.now = 12;
  for (BlockId b : {3, 1, 2, 0}) p.on_evictable(b, weighted(b == 0 ? 0.25f : b == 2 ? 0.5f : 1.0f));
  EXPECT_EQ(p.evict_all(), (std::vector<BlockId>{0, 2, 1, 3}));
}

TEST(LruKEvictionPolicy, OrderBetweenWeightsChangesWithTime) {
  // Blocks 0 and 2 (weight 1, seen at 0) and block 1 (weight 0.5, seen at 6): at 10 their ages are 10,
  // 10 and 8, so 2 goes before 1; at 20 they are 20 and 28, so 1 goes before 2. One static order could
  // not be right at both times.
  FakeClock c;
  LruKEvictionPolicy p(3, LruKOptions{.k = 1, .correlated_period_seconds = 0}, c.clock());
  c.now = 0;
  p.on_access(0, {});
  p.on_access(2, {});
  c.now = 6;
  p.on_access(1, weighted(0.5f));
  for (BlockId b : {0, 1, 2}) p.on_evictable(b, weighted(b == 1 ? 0.5f : 1.0f));
  c.now = 10;
  EXPECT_EQ(p.evict(), 0);
  c.now = 20;
  EXPECT_EQ(p.evict(), 1);
  EXPECT_EQ(p.evict(), 2);
}

TEST(LruKEvictionPolicy, CorrelatedAccessesMergeIntoOneEntry) {
  // P = 1 s. Block 0: accesses at 0, 0.4, 0.9 (one entry, time 0.9) and 1.0 (1.0 - 0 >= P: a second
  // entry). Block 1: accesses at 0.5, 1.2 (one entry at 1.2): it still has fewer than K = 2 entries.
  FakeClock c;
  LruKEvictionPolicy p(3, LruKOptions{.k = 2, .correlated_period_seconds = 1.0}, c.clock());
  for (double t : {0.0, 0.4, 0.9, 1.0}) {
    c.now = t;
    p.on_access(0, {});
  }
  for (double t : {0.5, 1.2}) {
    c.now = t;
    p.on_access(1, {});
  }
  // Block 2: accesses at 0.1 and 1.5, two entries (t_2 = 0.1).
  for (double t : {0.1, 1.5}) {
    c.now = t;
    p.on_access(2, {});
  }
  c.now = 5;
  for (BlockId b : {0, 1, 2}) p.on_evictable(b, {});
  // Block 1 (one entry) first; then t_2: block 2's 0.1 before block 0's 0.9.
  EXPECT_EQ(p.evict_all(), (std::vector<BlockId>{1, 2, 0}));
}

TEST(LruKEvictionPolicy, AHistoryIsForgottenAtEviction) {
  FakeClock c;
  LruKEvictionPolicy p(2, LruKOptions{.k = 2, .correlated_period_seconds = 0}, c.clock());
  for (double t : {0.0, 1.0}) {
    c.now = t;
    p.on_access(0, {});
  }
  p.on_evictable(0, {});
  EXPECT_EQ(p.evict(), 0);
  c.now = 2;
  p.on_access(0, {});  // new contents: one entry
  p.on_access(1, {});
  c.now = 3;
  p.on_access(1, {});  // two entries: block 1 is the one kept
  p.on_evictable(0, {});
  p.on_evictable(1, {});
  EXPECT_EQ(p.evict(), 0);
  EXPECT_TRUE(p.contains(1));
  EXPECT_FALSE(p.contains(0));
  EXPECT_EQ(p.num_evictable(), 1);
}

TEST(LruKEvictionPolicy, WithoutAccessesBehavesAsLru) {
  // Blocks that become evictable with no recorded access get one then: K = 1 is then LRU exactly.
  FakeClock c;
  LruKEvictionPolicy lru_k(8, LruKOptions{.k = 1, .correlated_period_seconds = 0}, c.clock());
  LruEvictionPolicy lru(8);
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    c.now += 1;
    const BlockId b = static_cast<BlockId>(rng() % 8);
    if (lru.contains(b)) {
      EXPECT_EQ(lru_k.evict(), lru.evict());
    } else {
      lru.on_evictable(b, {});
      lru_k.on_evictable(b, {});
    }
  }
  EXPECT_EQ(lru_k.evict_all(), lru.evict_all());
}

TEST(LruKEvictionPolicy, FactoryAndValidation) {
  EXPECT_NE(dynamic_cast<LruKEvictionPolicy*>(make_eviction_policy(EvictionPolicyKind::kLruK, 4).get()), nullptr);
  EXPECT_NE(dynamic_cast<LruEvictionPolicy*>(make_eviction_policy(EvictionPolicyKind::kLru, 4).get()), nullptr);
  const auto policy = make_eviction_policy(EvictionPolicyKind::kLruK, 4, LruKOptions{.k = 3, .correlated_period_seconds = 0.5});
  EXPECT_EQ(dynamic_cast<LruKEvictionPolicy&>(*policy).options().k, 3);
  EXPECT_THROW(validate(LruKOptions{.k = 0}), Error);
  EXPECT_THROW(validate(LruKOptions{.k = LruKOptions::kMaxK + 1}), Error);
  EXPECT_THROW(validate(LruKOptions{.k = 2, .correlated_period_seconds = -0.001}), Error);
  EXPECT_THROW(validate(LruKOptions{.k = 2, .correlated_period_seconds = std::nan("")}), Error);
  EXPECT_THROW(make_eviction_policy(EvictionPolicyKind::kLruK, 4, LruKOptions{.k = 0}), Error);
  EXPECT_NO_THROW(validate(LruKOptions{.k = LruKOptions::kMaxK, .correlated_period_seconds = 0}));
}

// Random traces on the policy alone, as the pool drives it: blocks are published (first access; a third of
// them first take a history an earlier victim took along, as contents back from the host tier do), hit (also
// while referenced), released (evictable at reference count 0) and evicted. Time moves in
// ticks of 1/1024 s (so differences and the period's boundary are exact), often by less than the
// correlated-reference period.
constexpr double kTick = 1.0 / 1024;

// Bursts (0-4 ticks), short gaps (up to 100) and pauses (up to 3000, about 3 s). Coarse: 0, 1 or 2
// sixteenths of a second, so that equal times and equal weighted ages (ties) are common.
int64_t random_ticks(std::mt19937& rng, bool coarse = false) {
  if (coarse) return static_cast<int64_t>(rng() % 3) * 64;
  const uint32_t kind = rng() % 10;
  return static_cast<int64_t>(rng() % (kind < 4 ? 5 : kind < 7 ? 101 : 3001));
}

struct TraceParams {
  int k;
  int correlated_period_ticks;
  bool coarse;  // random_ticks(coarse)
  uint32_t seed;
};

class LruKRandomTrace : public ::testing::TestWithParam<TraceParams> {};

TEST_P(LruKRandomTrace, EveryVictimMatchesTheBruteForceReference) {
  const TraceParams tp = GetParam();
  // Coarse traces: fewer blocks and weights that divide exactly, so that ties between the heads of
  // different weights occur.
  const int num_blocks = tp.coarse ? 12 : 48;
  const LruKOptions options{.k = tp.k, .correlated_period_seconds = tp.correlated_period_ticks * kTick};
  FakeClock c;
  LruKEvictionPolicy policy(num_blocks, options, c.clock());
  BruteForceLruK ref(num_blocks, options);
  const std::vector<float> kWeights =
      tp.coarse ? std::vector<float>{1.0f, 0.5f, 2.0f, 0.25f} : std::vector<float>{1.0f, 0.3f, 0.8f, 2.0f, 0.5f};

  std::mt19937 rng(tp.seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  std::vector<int> ref_count(num_blocks, 0);
  std::vector<bool> cached(num_blocks, false);
  std::vector<float> weight(num_blocks, 1.0f);
  int64_t now_ticks = 1024;
  // A few blocks hit lately: hitting them again makes interleaved correlated bursts.
  constexpr int kNumRecent = 3;
  BlockId recent_hits[kNumRecent] = {-1, -1, -1};
  int num_evictions = 0, num_evict_alls = 0, num_finite_victims = 0, num_infinite_victims = 0, num_restores = 0;
  std::vector<AccessHistory> taken_along;  // the last victims' histories, as the host tier would keep them

  auto blocks_where = [&](auto pred) {
    std::vector<BlockId> out;
    for (BlockId b = 0; b < num_blocks; ++b)
      if (pred(b)) out.push_back(b);
    return out;
  };
  for (int step = 0; step < 20000; ++step) {
    now_ticks += random_ticks(rng, tp.coarse);
    c.now = static_cast<double>(now_ticks) * kTick;
    const int op = pick(1000);
    if (op < 150) {  // publish a free block
      const auto free = blocks_where([&](BlockId b) { return !cached[b]; });
      if (free.empty()) continue;
      const BlockId b = free[pick(static_cast<int>(free.size()))];
      cached[b] = true;
      ref_count[b] = 1;
      weight[b] = kWeights[pick(static_cast<int>(kWeights.size()))];
      if (!taken_along.empty() && pick(3) == 0) {  // contents back from the host tier, with their history
        const AccessHistory& h = taken_along[pick(static_cast<int>(taken_along.size()))];
        policy.restore(b, h);
        ref.restore(b, std::vector<double>(h.times.begin(), h.times.begin() + h.count));
        ++num_restores;
      }
      policy.on_access(b, weighted(weight[b]));
      ref.access(b, c.now);
    } else if (op < 550) {  // a prefix hit on a cached block, referenced or not; often one hit just before
      const auto hits = blocks_where([&](BlockId b) { return cached[b]; });
      if (hits.empty()) continue;
      const BlockId again = recent_hits[pick(kNumRecent)];
      const BlockId b = again >= 0 && cached[again] && pick(2) == 0 ? again : hits[pick(static_cast<int>(hits.size()))];
      recent_hits[pick(kNumRecent)] = b;
      if (ref_count[b]++ == 0) {
        policy.on_referenced(b);
        ref.referenced(b);
      }
      policy.on_access(b, weighted(weight[b]));
      ref.access(b, c.now);
      // Most hits are short requests: the reference goes at once (an evictable block stays one).
      if (pick(3) != 0 && --ref_count[b] == 0) {
        policy.on_evictable(b, weighted(weight[b]));
        ref.evictable(b, weight[b], c.now);
      }
    } else if (op < 930) {  // a sequence lets go of a block
      const auto held = blocks_where([&](BlockId b) { return ref_count[b] > 0; });
      if (held.empty()) continue;
      const BlockId b = held[pick(static_cast<int>(held.size()))];
      if (--ref_count[b] == 0) {
        policy.on_evictable(b, weighted(weight[b]));
        ref.evictable(b, weight[b], c.now);
      }
    } else if (op < 995) {  // a fresh block is needed
      if (policy.num_evictable() == 0) continue;
      const BlockId expected = ref.victim(c.now);
      AccessHistory h;
      const BlockId got = policy.evict_with_history(h);
      ASSERT_EQ(got, expected) << "step " << step << " at " << c.now << " s";
      std::vector<double> want = ref.entries(got);
      want.resize(std::min<size_t>(want.size(), static_cast<size_t>(tp.k)));  // the policy keeps K entries
      ASSERT_EQ(std::vector<double>(h.times.begin(), h.times.begin() + h.count), want) << "step " << step;
      if (h.count > 0) {
        if (taken_along.size() == 8) taken_along.erase(taken_along.begin());
        taken_along.push_back(h);
      }
      ++(static_cast<int>(ref.entries(got).size()) >= tp.k ? num_finite_victims : num_infinite_victims);
      ref.evicted(got);
      cached[got] = false;
      ++num_evictions;
    } else {  // prefix cache reset
      std::vector<BlockId> expected;
      while (ref.num_evictable() > 0) {
        expected.push_back(ref.victim(c.now));
        ref.evicted(expected.back());
      }
      const std::vector<BlockId> got = policy.evict_all();
      ASSERT_EQ(got, expected) << "step " << step;
      for (BlockId b : got) cached[b] = false;
      ++num_evict_alls;
    }
    ASSERT_EQ(policy.num_evictable(), ref.num_evictable());
    for (BlockId b = 0; b < num_blocks; ++b) ASSERT_EQ(policy.contains(b), ref.contains(b)) << "block " << b;
  }
  // The trace exercised what it is meant to.
  EXPECT_GT(num_evictions, 500);
  EXPECT_GT(num_evict_alls, 50);
  EXPECT_GT(num_finite_victims, 50);
  EXPECT_GT(num_restores, 200);
  if (tp.k > 1) {
    EXPECT_GT(num_infinite_victims, 50);
  }
}

INSTANTIATE_TEST_SUITE_P(
    KAndPeriods, LruKRandomTrace,
    ::testing::Values(TraceParams{1, 0, false, 1}, TraceParams{1, 5, false, 2}, TraceParams{2, 0, false, 3},
                      TraceParams{2, 5, false, 4}, TraceParams{2, 50, false, 5}, TraceParams{3, 0, false, 6},
                      TraceParams{3, 5, false, 7}, TraceParams{3, 50, false, 8}, TraceParams{1, 0, true, 9},
                      TraceParams{1, 100, true, 10}, TraceParams{2, 0, true, 11}, TraceParams{2, 160, true, 12},
                      TraceParams{3, 100, true, 13}),
    [](const ::testing::TestParamInfo<TraceParams>& info) {
      return "K" + std::to_string(info.param.k) + "_P" + std::to_string(info.param.correlated_period_ticks) + "ticks" +
             (info.param.coarse ? "_coarse" : "");
    });

TEST(LruKEvictionPolicy, K1WithEqualWeightsIsLruByLastAccess) {
  // Random trace, one weight, K = 1, no correlation: victims in order of last access (then block id).
  constexpr int kNumBlocks = 16;
  FakeClock c;
  LruKEvictionPolicy policy(kNumBlocks, LruKOptions{.k = 1, .correlated_period_seconds = 0}, c.clock());
  std::vector<double> last(kNumBlocks, 0);
  std::vector<int> ref_count(kNumBlocks, 0);
  std::vector<bool> cached(kNumBlocks, false), evictable(kNumBlocks, false);
  std::mt19937 rng(11);
  int num_evictions = 0;
  for (int step = 0; step < 4000; ++step) {
    c.now += static_cast<double>(rng() % 3);  // often the same instant: ties go to the lower id
    const BlockId b = static_cast<BlockId>(rng() % kNumBlocks);
    switch (rng() % 4) {
      case 0:
        if (cached[b]) break;
        cached[b] = true;
        ref_count[b] = 1;
        policy.on_access(b, {});
        last[b] = c.now;
        break;
      case 1:
        if (!cached[b]) break;
        if (ref_count[b]++ == 0) {
          policy.on_referenced(b);
          evictable[b] = false;
        }
        policy.on_access(b, {});
        last[b] = c.now;
        break;
      case 2:
        if (ref_count[b] == 0) break;
        if (--ref_count[b] == 0) {
          policy.on_evictable(b, {});
          evictable[b] = true;
        }
        break;
      default: {
        if (policy.num_evictable() == 0) break;
        std::optional<BlockId> lru;
        for (BlockId e = 0; e < kNumBlocks; ++e)
          if (evictable[e] && (!lru || last[e] < last[*lru])) lru = e;
        ASSERT_EQ(policy.evict(), *lru) << "step " << step;
        evictable[*lru] = cached[*lru] = false;
        ++num_evictions;
      }
    }
  }
  EXPECT_GT(num_evictions, 80);
}

// BlockPool with an LRU-K policy on a fake clock.
BlockHash hash_of_int(uint64_t i) { return BlockHash{i * 0x9E3779B97F4A7C15ull + 1, i}; }

TEST(LruKBlockPool, TakeFreshEvictsByLruK) {
  FakeClock c;
  BlockPool pool(4, std::make_unique<LruKEvictionPolicy>(4, LruKOptions{.k = 2, .correlated_period_seconds = 0},
                                                         c.clock()));
  std::vector<BlockId> blocks;
  c.now = 0;
  pool.take_fresh(1, blocks);  // block 0: a shared system prompt
  ASSERT_TRUE(pool.publish(blocks[0], hash_of_int(0), {}));
  c.now = 1;
  pool.add_ref(0);  // hit by a second sequence while the first still holds it: a second access
  pool.release(0);
  pool.release(0);  // evictable first, so LRU would give it up first
  for (int i = 1; i <= 3; ++i) {  // three one-off prompts, published and freed later
    c.now = 1 + i;
    pool.take_fresh(1, blocks);
    ASSERT_TRUE(pool.publish(blocks.back(), hash_of_int(i), CachedBlockInfo{.weight = i == 2 ? 0.5f : 1.0f}));
    pool.release(blocks.back());
  }
  ASSERT_EQ(blocks, (std::vector<BlockId>{0, 1, 2, 3}));
  EXPECT_EQ(pool.num_evictable_blocks(), 4);
  // At 10: blocks 1-3 have one access (at 2, 3, 4): ages 8, 7 / 0.5 = 14, 6. Block 2 goes first, then 1,
  // then 3; the system prompt (two accesses) last.
  c.now = 10;
  std::vector<BlockId> taken;
  pool.take_fresh(3, taken);
  EXPECT_EQ(taken, (std::vector<BlockId>{2, 1, 3}));
  EXPECT_TRUE(pool.lookup(hash_of_int(0)).has_value());
  EXPECT_FALSE(pool.lookup(hash_of_int(2)).has_value());
  EXPECT_EQ(pool.check_invariants(std::vector<int>{0, 1, 1, 1}), "");
}

TEST(LruKBlockPool, RandomPoolTraceMatchesTheBruteForceReference) {
  // Through BlockPool: take_fresh (a victim whenever the free list is empty), publish, add_ref, release.
  constexpr int kNumBlocks = 24;
  const LruKOptions options{.k = 2, .correlated_period_seconds = 20 * kTick};
  FakeClock c;
  BlockPool pool(kNumBlocks, std::make_unique<LruKEvictionPolicy>(kNumBlocks, options, c.clock()));
  BruteForceLruK ref(kNumBlocks, options);
  const float kWeights[] = {1.0f, 0.3f, 0.8f};
  std::mt19937 rng(5);
  std::vector<int> ref_count(kNumBlocks, 0);
  std::vector<float> weight(kNumBlocks, 1.0f);
  uint64_t next_hash = 0;
  int64_t now_ticks = 0;
  int num_victims = 0;
  for (int step = 0; step < 5000; ++step) {
    now_ticks += random_ticks(rng);
    c.now = static_cast<double>(now_ticks) * kTick;
    const BlockId b = static_cast<BlockId>(rng() % kNumBlocks);
    switch (rng() % 4) {
      case 0: {  // a fresh block, published at once
        if (pool.num_free_blocks() == 0) break;
        const bool evicts = pool.num_free_blocks() == pool.num_evictable_blocks();
        const BlockId expected = evicts ? ref.victim(c.now) : -1;
        std::vector<BlockId> got;
        pool.take_fresh(1, got);
        if (evicts) {
          ASSERT_EQ(got[0], expected) << "step " << step;
          ref.evicted(got[0]);
          ++num_victims;
        }
        ref_count[got[0]] = 1;
        weight[got[0]] = kWeights[rng() % 3];
        ASSERT_TRUE(pool.publish(got[0], hash_of_int(next_hash++), CachedBlockInfo{.weight = weight[got[0]]}));
        ref.access(got[0], c.now);
        break;
      }
      case 1:  // a prefix hit
        if (!pool.hash_of(b)) break;
        if (ref_count[b]++ == 0) ref.referenced(b);
        pool.add_ref(b);
        ref.access(b, c.now);
        break;
      default:  // a release
        if (ref_count[b] == 0) break;
        pool.release(b);
        if (--ref_count[b] == 0) ref.evictable(b, weight[b], c.now);
    }
    ASSERT_EQ(pool.check_invariants(ref_count), "") << "step " << step;
  }
  EXPECT_GT(num_victims, 200);
}

TEST(LruKBlockPool, BlockManagerBuildsLruKFromItsOptions) {
  // Real clock, no correlation: a prefix used twice survives a scan of one-off prompts.
  BlockManager bm(BlockManagerOptions{.num_blocks = 4, .block_size = 2, .enable_prefix_caching = true,
                                      .eviction_policy = EvictionPolicyKind::kLruK,
                                      .lru_k = LruKOptions{.k = 2, .correlated_period_seconds = 0}});
  const std::vector<TokenId> hot = {1, 2, 3};
  for (int use = 0; use < 2; ++use) {
    SequenceBlocks s;
    const PrefixHit hit = bm.match_prefix(std::span(hot).first(2), "");
    EXPECT_EQ(hit.num_tokens, use == 0 ? 0 : 2);
    ASSERT_TRUE(bm.allocate(s, 3, hit));
    bm.publish_full_blocks(s, hot, 3);
    bm.free(s);
  }
  for (TokenId t = 10; t < 40; t += 3) {  // one-off prompts of one full block and one more token
    const std::vector<TokenId> cold = {t, t + 1, t + 2};
    SequenceBlocks s;
    ASSERT_TRUE(bm.allocate(s, 3, bm.match_prefix(std::span(cold).first(2), "")));
    bm.publish_full_blocks(s, cold, 3);
    const SequenceBlocks* seqs[] = {&s};
    ASSERT_EQ(bm.check_invariants(seqs), "");
    bm.free(s);
  }
  EXPECT_EQ(bm.match_prefix(std::span(hot).first(2), "").num_tokens, 2);
}

}  // namespace
}  // namespace pagoda
