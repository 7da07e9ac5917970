// CPU sampler: penalties, greedy argmax, temperature/top-k/top-p/min-p sampling with the request's own
// generator, and top-k logprob reporting. Every step is a pure function of (logits, params, rng state), so a
// seeded request draws the same tokens alone, batched, or on another thread.
#include "pagoda/runner/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>

#include "pagoda/core/check.h"

namespace pagoda {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Top-p counts a nucleus as reached when it is within this much of top_p: probabilities that are "exact" in
// decimal (0.5 + 0.3 for top_p 0.8) come through float logits with ~1e-7 relative error, and should not pull
// in an extra token because of it.
constexpr double kTopPTolerance = 1e-6;

// Top-p without top-k groups weights by their top float bits (exponent + 4 mantissa bits: 16 buckets per
// octave) so that only the bucket where the nucleus ends needs sorting, not the whole 128k vocabulary.
constexpr int kBucketShift = 19;
constexpr size_t kNumBuckets = (0x3f800000u >> kBucketShift) + 1;  // weights lie in [0, 1]

// Scratch reused across calls on the same thread so that a 128k-vocab step allocates nothing after warm-up.
// counts/seen are all-zero between calls (each user restores what it touched).
struct Scratch {
  std::vector<TokenId> ids;      // candidates, in the order they are drawn from
  std::vector<float> weights;    // weights[i] belongs to ids[i] (or to token i when drawing densely)
  std::vector<float> dense;      // top-p: the weight of every token
  std::vector<TokenId> boundary; // top-p: the bucket where the nucleus ends
  std::vector<double> bucket_mass;
  std::vector<int32_t> counts;
  std::vector<uint8_t> seen;
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// Total order "more likely first, lower id on ties"; logits must be NaN-free.
struct MoreLikely {
  const float* logits;
  bool operator()(TokenId a, TokenId b) const {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  }
};

// Unnormalised probability relative to the maximum logit `max`; the equality test keeps a +inf maximum
// finite (inf - inf would be NaN) and gives the top token exactly 1.
inline float weight(float logit, float max) { return logit == max ? 1.0f : std::exp(logit - max); }

// A uniform double in [0, 1) from the top 53 bits: fixed arithmetic, unlike std::uniform_real_distribution
// whose algorithm differs between standard libraries.
inline double uniform01(SamplerRng& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

TokenId argmax(std::span<const float> logits) {
  // Two passes: a branch-free maximum (vectorisable), then the first index holding it (lowest id wins ties;
  // NaN never compares greater, so it never wins).
  float max_logit = kNegInf;
  for (float l : logits) max_logit = l > max_logit ? l : max_logit;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] == max_logit) return static_cast<TokenId>(i);
  }
  return 0;  // all NaN
}

// Draws index i of weights[0, n) (unnormalised, >= 0, summing to `total` in index order) by inverting the
// cumulative distribution.
size_t draw_index(const float* weights, size_t n, double total, SamplerRng& rng) {
  const double target = uniform01(rng) * total;
  double cumulative = 0.0;
  size_t last_positive = 0;
  for (size_t i = 0; i < n; ++i) {
    if (weights[i] <= 0.0f) continue;
    cumulative += weights[i];
    last_positive = i;
    if (cumulative > target) return i;
  }
  return last_positive;  // only reached when rounding leaves target at the very top of the sum
}

// The k most likely tokens (k <= vocab) into ids[0, k), sorted most likely first, by key(id) (NaN-free) with
// ties to the lower id. One pass with a heap whose front is the least likely kept token: almost every token
// is rejected by a single comparison, where a partial sort of 128k indices would cost milliseconds.
template <typename Key>
void select_top_k(size_t vocab, size_t k, Key key, std::vector<TokenId>& ids) {
  auto more_likely = [&key](TokenId a, TokenId b) {
    const float ka = key(a), kb = key(b);
    return ka > kb || (ka == kb && a < b);
  };
  ids.resize(k);
  std::iota(ids.begin(), ids.end(), 0);
  std::make_heap(ids.begin(), ids.end(), more_likely);
  for (size_t i = k; i < vocab && k > 0; ++i) {
    // Strict: an equal key loses to the kept token, whose id is lower.
    if (key(static_cast<TokenId>(i)) > key(ids.front())) {
      std::pop_heap(ids.begin(), ids.end(), more_likely);
      ids.back() = static_cast<TokenId>(i);
      std::push_heap(ids.begin(), ids.end(), more_likely);
    }
  }
  std::sort(ids.begin(), ids.end(), more_likely);
}

// Top-p over the whole vocabulary: fills s.ids/s.weights with the smallest set of most likely tokens whose
// mass reaches top_p (in id order, then the boundary bucket's tokens most likely first); returns its size.
size_t select_nucleus(std::span<const float> logits, float max_logit, double top_p, Scratch& s) {
  const size_t vocab = logits.size();
  std::vector<float>& dense = s.dense;  // dense[token]
  dense.resize(vocab);
  s.bucket_mass.assign(kNumBuckets, 0.0);
  auto bucket = [](float w) { return std::bit_cast<uint32_t>(w) >> kBucketShift; };
  double total = 0.0;
  for (size_t i = 0; i < vocab; ++i) {
    const float w = weight(logits[i], max_logit);
    dense[i] = w;
    total += w;
    s.bucket_mass[bucket(w)] += w;
  }
  const double needed = (top_p - kTopPTolerance) * total;
  // The highest bucket whose mass, added to the ones above, first reaches `needed`; bucket 0 (weight 0)
  // never counts.
  size_t boundary = kNumBuckets - 1;
  double above = 0.0;
  while (boundary > 1 && above + s.bucket_mass[boundary] < needed) above += s.bucket_mass[boundary--];

  s.ids.clear();
  s.boundary.clear();
  for (size_t i = 0; i < vocab; ++i) {
    const uint32_t b = bucket(dense[i]);
    if (b > boundary) {
      s.ids.push_back(static_cast<TokenId>(i));
    } else if (b == boundary && dense[i] > 0.0f) {
      s.boundary.push_back(static_cast<TokenId>(i));
    }
  }
  std::sort(s.boundary.begin(), s.boundary.end(), MoreLikely{logits.data()});
  double cumulative = above;
  for (TokenId id : s.boundary) {
    if (cumulative >= needed && !s.ids.empty()) break;
    s.ids.push_back(id);
    cumulative += dense[id];
  }
  s.weights.resize(s.ids.size());
  for (size_t i = 0; i < s.ids.size(); ++i) s.weights[i] = dense[s.ids[i]];
  return s.ids.size();
}

}  // namespace

void apply_penalties(std::span<float> logits, const SamplingParams& params, std::span<const TokenId> prompt_ids,
                     std::span<const TokenId> output_ids) {
  const bool repetition = params.repetition_penalty != 1.0;
  const bool additive = params.presence_penalty != 0.0 || params.frequency_penalty != 0.0;
  if (!repetition && !additive) return;
  const size_t vocab = logits.size();
  Scratch& s = scratch();
  auto check_id = [vocab](TokenId id) {
    PAGODA_CHECK(id >= 0 && static_cast<size_t>(id) < vocab, "token id {} outside a vocabulary of {}", id, vocab);
  };

  if (repetition) {
    // Each distinct token of prompt ∪ output is penalised once, however often it occurs.
    if (s.seen.size() < vocab) s.seen.resize(vocab, 0);
    const float penalty = static_cast<float>(params.repetition_penalty);
    auto penalise = [&](TokenId id) {
      check_id(id);
      if (s.seen[id]) return;
      s.seen[id] = 1;
      float& l = logits[id];
      l = l > 0.0f ? l / penalty : l * penalty;
    };
    for (TokenId id : prompt_ids) penalise(id);
    for (TokenId id : output_ids) penalise(id);
    for (TokenId id : prompt_ids) s.seen[id] = 0;
    for (TokenId id : output_ids) s.seen[id] = 0;
  }

  if (additive) {
    if (s.counts.size() < vocab) s.counts.resize(vocab, 0);
    for (TokenId id : output_ids) {
      check_id(id);
      ++s.counts[id];
    }
    // The second pass applies each distinct token once and clears its count for the next call.
    for (TokenId id : output_ids) {
      const int32_t count = s.counts[id];
      if (count == 0) continue;
      s.counts[id] = 0;
      // Two float steps in vLLM's order, so penalised logits match its arithmetic.
      logits[id] -= static_cast<float>(params.frequency_penalty) * static_cast<float>(count);
      logits[id] -= static_cast<float>(params.presence_penalty);
    }
  }
}

void apply_token_masks(std::span<float> logits, const SamplingParams& params, std::span<const TokenId> output_ids) {
  const auto check_id = [&](TokenId id, const char* what) {
    PAGODA_CHECK(id >= 0 && static_cast<size_t>(id) < logits.size(), "{} token {} outside a vocabulary of {}", what, id,
                 logits.size());
  };
  if (params.token_masks == nullptr) return;
  const std::vector<TokenId>& allowed = params.token_masks->allowed;
  if (!allowed.empty()) {
    size_t next = 0;  // the ids ascend: one pass over the vocabulary
    for (size_t i = 0; i < logits.size(); ++i) {
      if (next < allowed.size() && static_cast<size_t>(allowed[next]) == i) {
        ++next;
      } else {
        logits[i] = kNegInf;
      }
    }
    PAGODA_CHECK(next == allowed.size(), "allowed_token_ids not ascending, or past a vocabulary of {}", logits.size());
  }
  for (const std::vector<TokenId>& word : params.token_masks->bad_words) {
    if (word.empty() || word.size() > output_ids.size() + 1) continue;
    const size_t prefix = word.size() - 1;
    if (std::equal(word.begin(), word.begin() + static_cast<std::ptrdiff_t>(prefix), output_ids.end() - static_cast<std::ptrdiff_t>(prefix))) {
      check_id(word.back(), "bad_words");
      logits[word.back()] = kNegInf;
    }
  }
}

TokenId sample_token(std::span<float> logits, const SamplingParams& params, std::span<const TokenId> prompt_ids,
                     std::span<const TokenId> output_ids, SamplerRng& rng) {
  PAGODA_CHECK(!logits.empty(), "sampling from an empty vocabulary");
  apply_token_masks(logits, params, output_ids);
  for (const auto& [id, bias] : params.logit_bias) {  // before penalties, as vLLM's logits processors
    PAGODA_CHECK(id >= 0 && static_cast<size_t>(id) < logits.size(), "logit_bias token {} outside a vocabulary of {}",
                 id, logits.size());
    logits[id] += bias;
  }
  apply_penalties(logits, params, prompt_ids, output_ids);
  if (params.is_greedy()) return argmax(logits);

  // Temperature; NaN becomes -inf so that the orderings below are total.
  const float temperature = static_cast<float>(params.temperature);
  float max_logit = kNegInf;
  for (float& l : logits) {
    l = std::isnan(l) ? kNegInf : l / temperature;
    max_logit = l > max_logit ? l : max_logit;
  }
  if (max_logit == kNegInf) return 0;  // every token masked: nothing to draw from, stay deterministic

  const size_t vocab = logits.size();
  const bool use_top_k = params.top_k > 0 && static_cast<size_t>(params.top_k) < vocab;
  const bool use_top_p = params.top_p < 1.0;
  // Relative to the top token's weight of 1; capped at 1 so that the top token always survives.
  const float min_weight = static_cast<float>(std::min(params.min_p, 1.0));
  Scratch& s = scratch();

  if (!use_top_k && !use_top_p) {
    // No ordering needed: draw over the whole vocabulary in id order, min-p zeroing the weights it drops.
    // Tokens clearly below the min-p cut skip their exp (the margin leaves the exact test to the boundary).
    const float skip_below = min_weight > 0.0f ? std::log(min_weight) - 0.01f : kNegInf;
    s.weights.resize(vocab);
    double total = 0.0;
    for (size_t i = 0; i < vocab; ++i) {
      float w = 0.0f;
      if (logits[i] - max_logit >= skip_below) {
        w = weight(logits[i], max_logit);
        if (w < min_weight) w = 0.0f;
      }
      s.weights[i] = w;
      total += w;
    }
    return static_cast<TokenId>(draw_index(s.weights.data(), vocab, total, rng));
  }

  // Candidates: ids[0, n) with positional weights[0, n), the most likely token first.
  size_t n = 0;
  if (use_top_k) {
    n = static_cast<size_t>(params.top_k);
    select_top_k(vocab, n, [&logits](TokenId id) { return logits[id]; }, s.ids);
    s.weights.resize(n);
    double total = 0.0;
    for (size_t i = 0; i < n; ++i) total += s.weights[i] = weight(logits[s.ids[i]], max_logit);
    if (use_top_p) {
      // Top-p measures the distribution left by top-k (renormalised), as vLLM does; ids are sorted.
      const double needed = (params.top_p - kTopPTolerance) * total;
      double cumulative = 0.0;
      size_t kept = 0;
      while (kept < n) {
        cumulative += s.weights[kept++];  // the token that reaches top_p is itself kept
        if (cumulative >= needed) break;
      }
      n = kept;
    }
  } else {
    n = select_nucleus(logits, max_logit, params.top_p, s);
  }

  // Min-p: drop p < min_p * p_max among the candidates (the top token, weight 1, always stays).
  double total = 0.0;
  if (min_weight > 0.0f) {
    size_t kept = 0;
    for (size_t i = 0; i < n; ++i) {
      if (s.weights[i] < min_weight) continue;
      s.ids[kept] = s.ids[i];
      s.weights[kept++] = s.weights[i];
    }
    n = kept;
  }
  for (size_t i = 0; i < n; ++i) total += s.weights[i];
  return s.ids[draw_index(s.weights.data(), n, total, rng)];
}

std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, int k, std::optional<TokenId> include) {
  PAGODA_CHECK(!logits.empty(), "logprobs of an empty vocabulary");
  const size_t vocab = logits.size();
  // NaN ranks as -inf so that the ordering stays total.
  auto key = [&logits](TokenId id) { return std::isnan(logits[id]) ? kNegInf : logits[id]; };

  // log_softmax = l - (max + log(sum(exp(l - max)))): each term in float (<= 1, ~1 ulp), summed in double.
  float max_logit = kNegInf;
  for (size_t i = 0; i < vocab; ++i) max_logit = std::max(max_logit, key(static_cast<TokenId>(i)));
  double sum = 0.0;
  if (max_logit != kNegInf) {
    for (size_t i = 0; i < vocab; ++i) sum += weight(key(static_cast<TokenId>(i)), max_logit);
  }
  const double log_sum = std::log(sum);
  auto logprob = [&](TokenId id) {
    const float l = key(id);
    if (max_logit == kNegInf) return kNegInf;  // nothing has any probability
    if (l == max_logit) return static_cast<float>(-log_sum);  // exact even for an infinite maximum
    return static_cast<float>(static_cast<double>(l) - static_cast<double>(max_logit) - log_sum);
  };

  const size_t count = static_cast<size_t>(std::clamp<int64_t>(k, 0, static_cast<int64_t>(vocab)));
  std::vector<TokenLogprob> result;
  result.reserve(count + 1);
  std::vector<TokenId>& ids = scratch().ids;
  select_top_k(vocab, count, key, ids);
  for (TokenId id : ids) result.push_back({id, logprob(id)});
  if (include) {
    const TokenId id = *include;
    PAGODA_CHECK(id >= 0 && static_cast<size_t>(id) < vocab, "token id {} outside a vocabulary of {}", id, vocab);
    const bool present = std::any_of(result.begin(), result.end(), [id](const TokenLogprob& t) { return t.id == id; });
    if (!present) result.push_back({id, logprob(id)});
  }
  return result;
}

}  // namespace pagoda
