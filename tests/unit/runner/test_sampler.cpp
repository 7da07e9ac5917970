// Tests for the CPU sampler: greedy tie rule, seeded reproducibility, that draws follow the filtered
// softmax (top-k, top-p, min-p), penalty arithmetic, and top_logprobs values.
#include "pagoda/runner/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <set>
#include <thread>

namespace pagoda {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> log_probs(std::initializer_list<double> probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

// Random logits with a realistic spread, from a fixed generator.
std::vector<float> random_logits(size_t vocab, uint64_t seed, float scale = 4.0f) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> logits(vocab);
  for (float& l : logits) l = normal(gen);
  return logits;
}

SamplingParams sampling(double temperature = 1.0) {
  SamplingParams p;
  p.temperature = temperature;
  return p;
}

TokenId sample(std::vector<float> logits, const SamplingParams& params, SamplerRng& rng,
               std::span<const TokenId> prompt = {}, std::span<const TokenId> output = {}) {
  return sample_token(logits, params, prompt, output, rng);  // by value: sample_token edits logits
}

// Counts of each token over `draws` samples.
std::vector<int> histogram(const std::vector<float>& logits, const SamplingParams& params, int draws,
                           uint64_t seed = 1234) {
  SamplerRng rng(seed);
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < draws; ++i) ++counts[sample(logits, params, rng)];
  return counts;
}

// Pearson chi-square of observed counts against expected probabilities (cells with p > 0).
double chi_square(const std::vector<int>& counts, const std::vector<double>& probs, int draws) {
  double chi2 = 0.0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] == 0.0) continue;
    const double expected = probs[i] * draws;
    chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  return chi2;
}

// ---- greedy ----

TEST(Sampler, GreedyPicksArgmax) {
  SamplerRng rng(0);
  EXPECT_EQ(sample({0.1f, 2.5f, -3.0f, 2.4f}, sampling(0.0), rng), 1);
  EXPECT_EQ(sample({-5.0f, -4.0f, -7.0f}, sampling(0.0), rng), 1);
  EXPECT_EQ(sample({1.0f, 2.0f, 3.0f}, sampling(1e-6), rng), 2);  // below 1e-5 counts as greedy
}

TEST(Sampler, GreedyTiesGoToLowestId) {
  SamplerRng rng(0);
  EXPECT_EQ(sample({1.0f, 3.0f, 3.0f, 3.0f}, sampling(0.0), rng), 1);
  EXPECT_EQ(sample({7.0f, 7.0f}, sampling(0.0), rng), 0);
  EXPECT_EQ(sample({-kInf, kInf, kInf}, sampling(0.0), rng), 1);
  EXPECT_EQ(sample({-kInf, -kInf, -kInf}, sampling(0.0), rng), 0);
}

TEST(Sampler, GreedyIgnoresNaN) {
  SamplerRng rng(0);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(sample({nan, 1.0f, nan, 2.0f}, sampling(0.0), rng), 3);
}

TEST(Sampler, GreedyDoesNotConsumeTheGenerator) {
  SamplerRng rng(42), untouched(42);
  sample({1.0f, 2.0f}, sampling(0.0), rng);
  EXPECT_EQ(rng(), untouched());
}

// ---- reproducibility ----

std::vector<TokenId> draw_sequence(uint64_t seed, const SamplingParams& params, const std::vector<float>& logits,
                                   int n) {
  SamplerRng rng(seed);
  std::vector<TokenId> out;
  for (int i = 0; i < n; ++i) out.push_back(sample(logits, params, rng));
  return out;
}

std::vector<SamplingParams> param_variants() {
  std::vector<SamplingParams> variants;
  variants.push_back(sampling(0.8));
  SamplingParams k = sampling(1.0);
  k.top_k = 40;
  variants.push_back(k);
  SamplingParams p = sampling(1.2);
  p.top_p = 0.9;
  variants.push_back(p);
  SamplingParams all = sampling(0.7);
  all.top_k = 100;
  all.top_p = 0.95;
  all.min_p = 0.05;
  variants.push_back(all);
  SamplingParams m = sampling(1.0);
  m.min_p = 0.1;
  variants.push_back(m);
  return variants;
}

TEST(Sampler, SameSeedSameSequence) {
  const std::vector<float> logits = random_logits(5000, 7, 2.0f);
  for (const SamplingParams& params : param_variants()) {
    const auto a = draw_sequence(99, params, logits, 300);
    const auto b = draw_sequence(99, params, logits, 300);
    EXPECT_EQ(a, b);
    EXPECT_GT(std::set<TokenId>(a.begin(), a.end()).size(), 1u) << "the draws should actually vary";
  }
}

TEST(Sampler, DifferentSeedsDiffer) {
  const std::vector<float> logits = random_logits(5000, 7, 2.0f);
  for (const SamplingParams& params : param_variants()) {
    EXPECT_NE(draw_sequence(1, params, logits, 100), draw_sequence(2, params, logits, 100));
  }
}

TEST(Sampler, SequenceIndependentOfOtherRequestsAndThreads) {
  const std::vector<float> logits = random_logits(5000, 7, 2.0f);
  const std::vector<float> other_logits = random_logits(3000, 8, 5.0f);
  const SamplingParams params = param_variants()[3];
  const auto alone = draw_sequence(5, params, logits, 200);

  // Interleaved with another request that has other params, vocabulary and penalties (shared scratch).
  SamplerRng rng(5), other_rng(6);
  SamplingParams other = param_variants()[2];
  other.presence_penalty = 0.5;
  other.repetition_penalty = 1.3;
  const std::vector<TokenId> history = {1, 2, 3, 2};
  std::vector<TokenId> interleaved;
  for (int i = 0; i < 200; ++i) {
    sample(other_logits, other, other_rng, history, history);
    interleaved.push_back(sample(logits, params, rng));
  }
  EXPECT_EQ(alone, interleaved);

  std::vector<TokenId> on_thread;
  std::thread([&] { on_thread = draw_sequence(5, params, logits, 200); }).join();
  EXPECT_EQ(alone, on_thread);
}

// ---- distribution ----

TEST(Sampler, TemperatureOneMatchesSoftmax) {
  const std::vector<double> probs = {0.3, 0.2, 0.15, 0.1, 0.1, 0.08, 0.05, 0.02};
  std::vector<float> logits;
  for (double p : probs) logits.push_back(static_cast<float>(std::log(p) + 3.0));  // softmax is shift-free
  const int draws = 20000;
  const auto counts = histogram(logits, sampling(1.0), draws);
  // 7 degrees of freedom: P(chi2 > 24.3) = 0.001.
  EXPECT_LT(chi_square(counts, probs, draws), 24.3);
}

TEST(Sampler, TemperatureSharpensAndFlattens) {
  const std::vector<double> base = {0.5, 0.25, 0.125, 0.125};
  std::vector<float> logits;
  for (double p : base) logits.push_back(static_cast<float>(std::log(p)));
  const int draws = 20000;
  for (double temperature : {0.5, 2.0}) {
    std::vector<double> probs;
    double total = 0.0;
    for (double p : base) total += std::pow(p, 1.0 / temperature);
    for (double p : base) probs.push_back(std::pow(p, 1.0 / temperature) / total);
    const auto counts = histogram(logits, sampling(temperature), draws);
    // 3 degrees of freedom: P(chi2 > 16.3) = 0.001.
    EXPECT_LT(chi_square(counts, probs, draws), 16.3) << "temperature " << temperature;
  }
}

TEST(Sampler, MaskedTokensAreNeverDrawn) {
  std::vector<float> logits = {1.0f, -kInf, 1.0f, -kInf};
  const auto counts = histogram(logits, sampling(1.0), 2000);
  EXPECT_EQ(counts[1] + counts[3], 0);
  EXPECT_GT(counts[0], 800);
  EXPECT_GT(counts[2], 800);
}

// ---- top-k ----

TEST(Sampler, TopKKeepsOnlyKTokens) {
  const std::vector<float> logits = random_logits(200, 3, 1.0f);
  SamplingParams params = sampling(1.0);
  params.top_k = 5;
  std::vector<TokenId> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](TokenId a, TokenId b) { return logits[a] > logits[b]; });
  const std::set<TokenId> top(order.begin(), order.begin() + 5);

  const int draws = 20000;
  const auto counts = histogram(logits, params, draws);
  std::vector<double> probs(logits.size(), 0.0);
  double total = 0.0;
  for (TokenId id : top) total += std::exp(logits[id]);
  for (TokenId id : top) probs[id] = std::exp(logits[id]) / total;
  for (size_t id = 0; id < logits.size(); ++id) {
    if (top.count(static_cast<TokenId>(id)) == 0) {
      EXPECT_EQ(counts[id], 0) << "token " << id;
    }
  }
  EXPECT_LT(chi_square(counts, probs, draws), 18.5);  // 4 dof, p = 0.001
}

TEST(Sampler, TopKTiesAtTheCutKeepLowerIds) {
  SamplingParams params = sampling(1.0);
  params.top_k = 2;
  const auto counts = histogram({1.0f, 1.0f, 1.0f, 1.0f}, params, 2000);
  EXPECT_EQ(counts[2] + counts[3], 0);
  EXPECT_GT(counts[0], 800);
  EXPECT_GT(counts[1], 800);
}

TEST(Sampler, TopKOffWhenZeroNegativeOrVocab) {
  for (int k : {0, -1, 4, 100}) {
    SamplingParams params = sampling(1.0);
    params.top_k = k;
    const auto counts = histogram({0.0f, 0.0f, 0.0f, 0.0f}, params, 2000);
    for (int c : counts) EXPECT_GT(c, 350) << "top_k " << k;
  }
}

// ---- top-p ----

TEST(Sampler, TopPKeepsTheMinimalNucleus) {
  const std::vector<float> logits = log_probs({0.5, 0.3, 0.15, 0.05});
  SamplingParams params = sampling(1.0);
  params.top_p = 0.8;
  const int draws = 20000;
  const auto counts = histogram(logits, params, draws);
  EXPECT_EQ(counts[2] + counts[3], 0);
  EXPECT_LT(chi_square(counts, {0.625, 0.375, 0, 0}, draws), 10.8);  // 1 dof, p = 0.001

  params.top_p = 0.81;  // now the third token is needed
  const auto wider = histogram(logits, params, draws);
  EXPECT_EQ(wider[3], 0);
  EXPECT_GT(wider[2], 0);

  params.top_p = 0.1;  // the first token alone covers it
  EXPECT_EQ(histogram(logits, params, 500)[0], 500);
}

TEST(Sampler, TopPOnLargeFlatVocabulary) {
  // Exercises the growing partial sort: the nucleus is exactly the lower half of the ids.
  const std::vector<float> logits(10000, 0.5f);
  SamplingParams params = sampling(1.0);
  params.top_p = 0.5;
  SamplerRng rng(3);
  TokenId max_id = 0;
  for (int i = 0; i < 1000; ++i) max_id = std::max(max_id, sample(logits, params, rng));
  EXPECT_LT(max_id, 5000);
  EXPECT_GT(max_id, 4900);  // P(fail) = 0.98^1000
}

// The size of the nucleus by brute force: sort the softmax and accumulate.
size_t reference_nucleus(const std::vector<float>& logits, double top_p) {
  std::vector<double> probs;
  double total = 0.0;
  for (float l : logits) total += std::exp(static_cast<double>(l));
  for (float l : logits) probs.push_back(std::exp(static_cast<double>(l)) / total);
  std::sort(probs.begin(), probs.end(), std::greater<>());
  double cumulative = 0.0;
  for (size_t i = 0; i < probs.size(); ++i) {
    cumulative += probs[i];
    if (cumulative >= top_p - 1e-6) return i + 1;
  }
  return probs.size();
}

TEST(Sampler, TopPMatchesBruteForceWithinOneBucket) {
  // Weights 1 .. 0.68, descending with id: many share a weight bucket, so the boundary sort decides.
  std::vector<float> logits;
  for (int i = 0; i < 40; ++i) logits.push_back(-0.01f * static_cast<float>(i));
  for (double top_p : {0.05, 0.3, 0.5, 0.77, 0.95, 0.999}) {
    SamplingParams params = sampling(1.0);
    params.top_p = top_p;
    const auto counts = histogram(logits, params, 20000);
    const size_t expected = reference_nucleus(logits, top_p);
    for (size_t id = 0; id < logits.size(); ++id) {
      if (id < expected) {
        EXPECT_GT(counts[id], 0) << "top_p " << top_p << " token " << id;
      } else {
        EXPECT_EQ(counts[id], 0) << "top_p " << top_p << " token " << id;
      }
    }
  }
}

TEST(Sampler, TopPAppliesAfterTopKRenormalises) {
  // Top-2 of {0.4, 0.3, 0.2, 0.1} renormalised is {0.57, 0.43}: top_p 0.5 keeps only the first.
  SamplingParams params = sampling(1.0);
  params.top_k = 2;
  params.top_p = 0.5;
  EXPECT_EQ(histogram(log_probs({0.4, 0.3, 0.2, 0.1}), params, 1000)[0], 1000);
}

// ---- min-p ----

TEST(Sampler, MinPDropsUnlikelyTokens) {
  const std::vector<float> logits = log_probs({0.5, 0.3, 0.15, 0.05});
  for (int top_k : {0, 3}) {  // both the unsorted and the sorted path
    SamplingParams params = sampling(1.0);
    params.top_k = top_k;
    params.min_p = 0.2;  // threshold 0.1: drops only the last
    const int draws = 20000;
    const auto counts = histogram(logits, params, draws);
    EXPECT_EQ(counts[3], 0);
    EXPECT_LT(chi_square(counts, {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0}, draws), 13.8);  // 2 dof

    params.min_p = 0.61;  // threshold 0.305: only the first survives
    EXPECT_EQ(histogram(logits, params, 500)[0], 500) << "top_k " << top_k;
    params.min_p = 1.5;  // out of range still keeps the top token
    EXPECT_EQ(histogram(logits, params, 100)[0], 100);
  }
}

// ---- logit bias ----

TEST(LogitBias, ShiftsTheLogitsBeforePenaltiesAndSampling) {
  SamplerRng rng(0);
  SamplingParams greedy = sampling(0.0);
  greedy.logit_bias = {{0, 1.0f}, {2, -10.0f}};
  EXPECT_EQ(sample({1.0f, 1.5f, 9.0f}, greedy, rng), 0);  // 2.0 > 1.5 > -1.0
  // Before the repetition penalty: 3 + 1 = 4, then / 2 = 2 < 2.5 (after it would be 1.5 + 1 = 2.5: a tie).
  greedy.logit_bias = {{0, 1.0f}};
  greedy.repetition_penalty = 2.0;
  const std::vector<TokenId> output = {0};
  EXPECT_EQ(sample({3.0f, 2.5f}, greedy, rng, {}, output), 1);
  // -100 masks a token from a random draw, in practice.
  SamplingParams params = sampling(1.0);
  params.logit_bias = {{1, -100.0f}};
  EXPECT_EQ(histogram({0.0f, 0.0f}, params, 500)[1], 0);
}

// vLLM's allowed_token_ids: the best token outside the list loses to the best inside it; a draw never leaves it.
TEST(TokenMasks, AllowedTokenIdsKeepOnlyTheirTokens) {
  SamplerRng rng(0);
  SamplingParams greedy = sampling(0.0);
  greedy.token_masks = std::make_shared<TokenMasks>(TokenMasks{.allowed = {1, 3}});
  EXPECT_EQ(sample({5.0f, 1.0f, 9.0f, 2.0f, 7.0f}, greedy, rng), 3);
  SamplingParams params = sampling(1.0);
  params.token_masks = std::make_shared<TokenMasks>(TokenMasks{.allowed = {0, 4}});
  const std::vector<int> counts = histogram({0.0f, 3.0f, 3.0f, 3.0f, 0.0f}, params, 600);
  EXPECT_EQ(counts[1] + counts[2] + counts[3], 0);
  EXPECT_GT(counts[0], 200);
  EXPECT_GT(counts[4], 200);
  std::vector<float> logits = {1.0f, 2.0f, 3.0f};  // id 3 is past this vocabulary: a bug (the engine refuses it)
  EXPECT_DEATH(apply_token_masks(logits, greedy, {}), "allowed_token_ids");
}

// vLLM's bad_words: a sequence's last token is masked only where the output so far ends with the rest of it; a
// one-token word always; a word longer than the output plus one never.
TEST(TokenMasks, BadWordsMaskTheTokenThatWouldCompleteThem) {
  SamplingParams params = sampling(0.0);
  params.token_masks = std::make_shared<TokenMasks>(TokenMasks{.bad_words = {{2}, {4, 1}, {0, 4, 3}}});
  const auto masked = [&](std::vector<TokenId> output) {
    std::vector<float> logits(5, 0.0f);
    apply_token_masks(logits, params, output);
    std::vector<TokenId> ids;
    for (size_t i = 0; i < logits.size(); ++i)
      if (logits[i] == -kInf) ids.push_back(static_cast<TokenId>(i));
    return ids;
  };
  EXPECT_EQ(masked({}), std::vector<TokenId>{2});
  EXPECT_EQ(masked({3, 4}), (std::vector<TokenId>{1, 2}));
  EXPECT_EQ(masked({0, 4}), (std::vector<TokenId>{1, 2, 3}));
  EXPECT_EQ(masked({4, 0}), std::vector<TokenId>{2});
  EXPECT_EQ(masked({4}), (std::vector<TokenId>{1, 2}));  // {0, 4, 3} needs two tokens before it
  SamplerRng rng(0);
  const std::vector<TokenId> output = {7, 4};
  EXPECT_EQ(sample({0.0f, 9.0f, 0.0f, 1.0f, 0.0f, 0.0f, 0.0f, 0.0f}, params, rng, {}, output), 3);  // 1 masked
}

// ---- penalties ----

TEST(Penalties, HandComputedArithmetic) {
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f, 0.0f};
  SamplingParams params;
  params.repetition_penalty = 2.0;
  params.frequency_penalty = 0.5;
  params.presence_penalty = 0.25;
  const std::vector<TokenId> prompt = {0, 1, 5, 0};
  const std::vector<TokenId> output = {1, 2, 2, 2};
  apply_penalties(logits, params, prompt, output);
  EXPECT_FLOAT_EQ(logits[0], 1.0f);    // prompt only: 2 / 2, no additive penalties
  EXPECT_FLOAT_EQ(logits[1], -2.75f);  // -1 * 2, then - 0.5 * 1 - 0.25
  EXPECT_FLOAT_EQ(logits[2], -1.5f);   // 0.5 / 2, then - 0.5 * 3 - 0.25
  EXPECT_FLOAT_EQ(logits[3], 3.0f);    // untouched
  EXPECT_FLOAT_EQ(logits[4], -2.0f);
  EXPECT_FLOAT_EQ(logits[5], 0.0f);  // zero is neither divided nor multiplied into anything else
}

TEST(Penalties, RepetitionAppliesOncePerDistinctToken) {
  std::vector<float> logits = {3.0f, -3.0f};
  SamplingParams params;
  params.repetition_penalty = 1.5;
  const std::vector<TokenId> ids = {0, 0, 1, 0, 1};
  apply_penalties(logits, params, ids, ids);
  EXPECT_FLOAT_EQ(logits[0], 2.0f);
  EXPECT_FLOAT_EQ(logits[1], -4.5f);
}

TEST(Penalties, NegativePenaltiesEncourage) {
  std::vector<float> logits = {0.0f, 0.0f};
  SamplingParams params;
  params.presence_penalty = -1.0;
  params.frequency_penalty = -0.5;
  const std::vector<TokenId> output = {1, 1};
  apply_penalties(logits, params, {}, output);
  EXPECT_FLOAT_EQ(logits[0], 0.0f);
  EXPECT_FLOAT_EQ(logits[1], 2.0f);
}

TEST(Penalties, NeutralLeavesLogitsBitIdentical) {
  std::vector<float> logits = {1.25f, -0.0f, 3.5f};
  const std::vector<float> before = logits;
  const std::vector<TokenId> ids = {0, 1, 2};
  apply_penalties(logits, SamplingParams{}, ids, ids);
  EXPECT_EQ(std::memcmp(logits.data(), before.data(), sizeof(float) * logits.size()), 0);
}

TEST(Penalties, RepeatedCallsAreIndependent) {
  // Scratch counts must be cleared between calls.
  SamplingParams params;
  params.frequency_penalty = 1.0;
  const std::vector<TokenId> output = {2, 2};
  for (int i = 0; i < 3; ++i) {
    std::vector<float> logits = {0.0f, 0.0f, 0.0f};
    apply_penalties(logits, params, {}, output);
    EXPECT_FLOAT_EQ(logits[2], -2.0f);
  }
}

TEST(Penalties, SampleTokenAppliesThemBeforeGreedy) {
  SamplingParams params = sampling(0.0);
  params.presence_penalty = 2.0;
  const std::vector<TokenId> output = {0};
  SamplerRng rng(0);
  EXPECT_EQ(sample({2.0f, 1.0f}, params, rng, {}, output), 1);
  params.presence_penalty = 0.0;
  params.repetition_penalty = 3.0;
  EXPECT_EQ(sample({2.0f, 1.0f}, params, rng, output, {}), 1);  // 2 / 3 < 1
}

// ---- top_logprobs ----

double log_softmax(const std::vector<float>& logits, size_t i) {
  double sum = 0.0;
  for (float l : logits) sum += std::exp(static_cast<double>(l));
  return logits[i] - std::log(sum);
}

TEST(TopLogprobs, ValuesOrderAndTies) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f};
  const auto top = top_logprobs(logits, 3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].id, 1);  // tie with 3: lower id first
  EXPECT_EQ(top[1].id, 3);
  EXPECT_EQ(top[2].id, 2);
  // log(e^1 + e^2 + 2 e^3) = 3.8018...
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + 2 * std::exp(3.0));
  EXPECT_NEAR(top[0].logprob, 3.0 - lse, 1e-6);
  EXPECT_NEAR(top[1].logprob, 3.0 - lse, 1e-6);
  EXPECT_NEAR(top[2].logprob, 2.0 - lse, 1e-6);
  EXPECT_NEAR(top[2].logprob, log_softmax(logits, 2), 1e-6);
}

TEST(TopLogprobs, UniformIsMinusLogN) {
  const auto top = top_logprobs(std::vector<float>(4, 0.0f), 2);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_NEAR(top[0].logprob, -std::log(4.0), 1e-6);
  EXPECT_EQ(top[0].id, 0);
  EXPECT_EQ(top[1].id, 1);
}

TEST(TopLogprobs, StableForLargeLogits) {
  const auto top = top_logprobs(std::vector<float>{1000.0f, 999.0f, -kInf}, 3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_NEAR(top[0].logprob, -std::log1p(std::exp(-1.0)), 1e-6);  // -0.31326
  EXPECT_NEAR(top[1].logprob, -1.0 - std::log1p(std::exp(-1.0)), 1e-6);
  EXPECT_EQ(top[2].logprob, -kInf);
}

TEST(TopLogprobs, IncludeAppendedOnlyWhenMissing) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f};
  const auto with_missing = top_logprobs(logits, 2, TokenId{0});
  ASSERT_EQ(with_missing.size(), 3u);
  EXPECT_EQ(with_missing[2].id, 0);
  EXPECT_NEAR(with_missing[2].logprob, log_softmax(logits, 0), 1e-6);

  const auto with_present = top_logprobs(logits, 2, TokenId{3});
  ASSERT_EQ(with_present.size(), 2u);

  const auto only_include = top_logprobs(logits, 0, TokenId{2});
  ASSERT_EQ(only_include.size(), 1u);
  EXPECT_EQ(only_include[0].id, 2);
  EXPECT_NEAR(only_include[0].logprob, log_softmax(logits, 2), 1e-6);

  EXPECT_TRUE(top_logprobs(logits, 0).empty());
}

TEST(TopLogprobs, KLargerThanVocabReturnsAllSumToOne) {
  const std::vector<float> logits = random_logits(50, 11);
  const auto all = top_logprobs(logits, 1000);
  ASSERT_EQ(all.size(), 50u);
  double total = 0.0;
  for (size_t i = 0; i < all.size(); ++i) {
    total += std::exp(static_cast<double>(all[i].logprob));
    if (i > 0) {
      EXPECT_GE(all[i - 1].logprob, all[i].logprob);
    }
  }
  EXPECT_NEAR(total, 1.0, 1e-5);
}

}  // namespace
}  // namespace pagoda
