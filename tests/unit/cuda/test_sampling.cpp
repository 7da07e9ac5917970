// The device sampler (kernels/sampling.h): greedy against a host argmax; seeded draws independent of the
// batch; draw frequencies against the expected distribution (chi-square) for plain temperature sampling and
// for top-k, top-p and min-p alone and combined; vocabularies that are not a multiple of the block size or of
// 8 (unaligned rows). Without a device every test reports SKIPPED.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "pagoda/kernels/sampling.h"

namespace pagoda {
namespace {

using test::DeviceArray;

using kernels::SamplingRow;

constexpr int kDraws = 20000;  // rows per frequency check, one launch
constexpr uint16_t kNaN = 0x7fc0, kNegNaN = 0xffc0, kNegInf = 0xff80;

void cuda_ok(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

// One launch: logits [rows.size(), vocab] as bf16 bits; returns the sampled tokens.
std::vector<int32_t> sample(const std::vector<uint16_t>& logits, const std::vector<SamplingRow>& rows, int vocab) {
  const int n = static_cast<int>(rows.size());
  if (logits.size() != static_cast<size_t>(n) * vocab) throw std::runtime_error("logits/rows size mismatch");
  DeviceArray<uint16_t> d_logits(logits.size());
  DeviceArray<SamplingRow> d_rows(rows.size());
  DeviceArray<int32_t> d_out(rows.size());
  DeviceArray<char> d_workspace(kernels::sampling_workspace_bytes(n, vocab));
  cuda_ok(cudaMemcpy(d_logits.get(), logits.data(), logits.size() * 2, cudaMemcpyHostToDevice), "copy logits");
  cuda_ok(cudaMemcpy(d_rows.get(), rows.data(), rows.size() * sizeof(SamplingRow), cudaMemcpyHostToDevice),
          "copy rows");
  kernels::sample_tokens(d_out.get(), reinterpret_cast<const __nv_bfloat16*>(d_logits.get()), d_rows.get(), n, vocab,
                         d_workspace.get(), nullptr);
  std::vector<int32_t> out(rows.size());
  cuda_ok(cudaMemcpy(out.data(), d_out.get(), out.size() * 4, cudaMemcpyDeviceToHost), "copy tokens");
  return out;
}

// Lowest id among the largest values, NaN ignored; 0 when nothing compares.
int host_argmax(const uint16_t* row, int vocab) {
  int best = -1;
  for (int i = 0; i < vocab; ++i) {
    const float v = bf16_to_f32(row[i]);
    if (std::isnan(v)) continue;
    if (best < 0 || v > bf16_to_f32(row[best])) best = i;
  }
  return best < 0 ? 0 : best;
}

std::vector<uint16_t> random_row(std::mt19937& rng, int vocab, float stddev) {
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<uint16_t> row(vocab);
  for (auto& v : row) v = f32_to_bf16(normal(rng));
  return row;
}

SamplingRow params(float temperature, int top_k = 0, float top_p = 1.0f, float min_p = 0.0f, uint64_t seed = 0,
                   uint64_t offset = 0) {
  SamplingRow r;
  r.temperature = temperature;
  r.top_k = top_k;
  r.top_p = top_p;
  r.min_p = min_p;
  r.seed = seed;
  r.offset = offset;
  return r;
}

// The expected distribution (double precision) with the documented semantics: the CPU sampler's order
// (temperature, top-k, top-p on the renormalised top-k set, min-p) where every cut keeps all tokens tied with
// the last token it keeps.
std::vector<double> reference_probs(const std::vector<uint16_t>& row, const SamplingRow& p) {
  const int vocab = static_cast<int>(row.size());
  std::vector<double> s(vocab);
  for (int i = 0; i < vocab; ++i) s[i] = static_cast<double>(bf16_to_f32(row[i])) / p.temperature;
  std::vector<int> order(vocab);
  for (int i = 0; i < vocab; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return s[a] > s[b]; });
  const double max = s[order[0]];
  std::vector<double> w(vocab);
  for (int i = 0; i < vocab; ++i) w[i] = std::exp(s[i] - max);

  double cut = -INFINITY;  // kept: s >= cut
  if (p.top_k > 0 && p.top_k < vocab) cut = s[order[p.top_k - 1]];
  if (p.top_p < 1.0f) {
    double total = 0.0;
    for (int i : order) total += s[i] >= cut ? w[i] : 0.0;
    const double needed = (p.top_p - 1e-6) * total;
    double cumulative = 0.0;
    for (int i : order) {
      cumulative += w[i];
      if (cumulative >= needed) {
        cut = std::max(cut, s[i]);
        break;
      }
    }
  }
  std::vector<double> probs(vocab, 0.0);
  double total = 0.0;
  for (int i = 0; i < vocab; ++i) {
    if (s[i] >= cut && (p.min_p <= 0.0f || w[i] >= std::min(1.0, static_cast<double>(p.min_p)))) {
      probs[i] = w[i];
      total += w[i];
    }
  }
  for (double& v : probs) v /= total;
  return probs;
}

// Category counts against probabilities: categories of probability 0 never drawn; a chi-square statistic
// below the level a correct sampler exceeds with probability ~1e-8 (Wilson-Hilferty, z = 5.6).
void expect_frequencies(const std::vector<int64_t>& counts, const std::vector<double>& probs, const char* what) {
  int64_t n = 0;
  for (int64_t c : counts) n += c;
  double chi2 = 0.0;
  int categories = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (probs[i] == 0.0) {
      EXPECT_EQ(counts[i], 0) << what << ": token " << i << " lies outside the kept set";
      continue;
    }
    const double expected = probs[i] * static_cast<double>(n);
    ASSERT_GE(expected, 5.0) << what << ": category " << i << " too rare for a chi-square test";
    chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
    ++categories;
  }
  if (categories < 2) return;
  const double dof = categories - 1, z = 5.6, a = 2.0 / (9.0 * dof);
  const double critical = dof * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
  EXPECT_LT(chi2, critical) << what << ": " << categories << " kept tokens, " << n << " draws";
}

int count_kept(const std::vector<double>& probs) {
  return static_cast<int>(std::count_if(probs.begin(), probs.end(), [](double p) { return p > 0.0; }));
}

// A small vocabulary whose token i has probability ~probs[i] at temperature 1, placed at id (5 i + 3) % vocab
// (so the most likely token is not id 0).
std::vector<uint16_t> small_row(const std::vector<double>& probs) {
  const int vocab = static_cast<int>(probs.size());
  std::vector<uint16_t> row(vocab);
  for (int i = 0; i < vocab; ++i) row[(5 * i + 3) % vocab] = f32_to_bf16(static_cast<float>(std::log(probs[i])));
  return row;
}

// kDraws draws of `row` under `p`, offsets 0..kDraws-1, in one launch; checked against reference_probs.
void check_small_vocab(const std::vector<uint16_t>& row, SamplingRow p, int expected_kept, const char* what) {
  const int vocab = static_cast<int>(row.size());
  const std::vector<double> probs = reference_probs(row, p);
  ASSERT_EQ(count_kept(probs), expected_kept) << what << ": the scenario is not what the test means";
  std::vector<uint16_t> logits;
  std::vector<SamplingRow> rows;
  for (int d = 0; d < kDraws; ++d) {
    logits.insert(logits.end(), row.begin(), row.end());
    p.seed = 1234;
    p.offset = static_cast<uint64_t>(d);
    rows.push_back(p);
  }
  const std::vector<int32_t> tokens = sample(logits, rows, vocab);
  std::vector<int64_t> counts(vocab, 0);
  for (int32_t t : tokens) {
    ASSERT_GE(t, 0);
    ASSERT_LT(t, vocab);
    ++counts[t];
  }
  expect_frequencies(counts, probs, what);
}

const std::vector<double> kProbs8 = {0.35, 0.22, 0.15, 0.1, 0.08, 0.05, 0.03, 0.02};
const std::vector<double> kProbs11 = {0.3, 0.2, 0.14, 0.1, 0.08, 0.06, 0.05, 0.03, 0.02, 0.015, 0.005};

TEST(CudaSampling, GreedyMatchesHostArgmax) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(1);
  for (int vocab : {1, 7, 1003, 128256, 128261}) {
    std::vector<uint16_t> logits;
    std::vector<SamplingRow> rows;
    for (int r = 0; r < 10; ++r) {
      std::vector<uint16_t> row = random_row(rng, vocab, 3.0f);
      if (r == 1) row[0] = f32_to_bf16(100.0f);
      if (r == 2) row[vocab - 1] = f32_to_bf16(100.0f);
      if (r == 3) row[2 * vocab / 3] = row[vocab / 3] = f32_to_bf16(100.0f);  // tie: the lower id wins
      if (r == 4) row[vocab / 2] = kNaN, row[vocab / 4] = kNegNaN;
      if (r == 5) std::fill(row.begin(), row.end(), kNegInf);                 // nothing to pick: id 0
      if (r == 6) std::fill(row.begin(), row.end(), f32_to_bf16(0.5f));           // all tied: id 0
      if (r == 7) row[vocab - 1] = kNaN, row[0] = kNegInf;
      logits.insert(logits.end(), row.begin(), row.end());
      // Temperatures below 1e-5 are greedy whatever the filters say.
      rows.push_back(params(r % 2 ? 0.0f : 9e-6f, r % 3 == 0 ? 5 : 0, r % 4 == 0 ? 0.5f : 1.0f, 0.0f, r, r));
    }
    const std::vector<int32_t> tokens = sample(logits, rows, vocab);
    for (int r = 0; r < 10; ++r) {
      EXPECT_EQ(tokens[r], host_argmax(logits.data() + static_cast<size_t>(r) * vocab, vocab))
          << "vocab " << vocab << " row " << r;
    }
  }
}

TEST(CudaSampling, SingleTokenFiltersEqualGreedyAtAnyTemperature) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(2);
  for (int vocab : {128256, 1003}) {
    std::vector<uint16_t> logits;
    std::vector<SamplingRow> rows;
    std::vector<int> expected;
    int r = 0;
    for (float t : {0.3f, 1.0f, 2.0f, 1000.0f}) {
      // top_k = 1; top_p below the tolerance; min_p = 1: each keeps only the (unique) maximum.
      for (SamplingRow p : {params(t, 1), params(t, 0, 1e-7f), params(t, 0, 1.0f, 1.0f), params(t, 1, 0.3f, 0.5f)}) {
        std::vector<uint16_t> row = random_row(rng, vocab, 3.0f);
        const int top = static_cast<int>(rng() % vocab);
        row[top] = f32_to_bf16(100.0f);
        logits.insert(logits.end(), row.begin(), row.end());
        p.seed = 77;
        p.offset = static_cast<uint64_t>(r++);
        rows.push_back(p);
        expected.push_back(top);
      }
    }
    const std::vector<int32_t> tokens = sample(logits, rows, vocab);
    for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(tokens[i], expected[i]) << "vocab " << vocab << " row " << i;
  }
}

TEST(CudaSampling, RowDrawsTheSameTokenAloneOrBatched) {
  PAGODA_SKIP_WITHOUT_GPU();
  constexpr int kVocab = 128256, kBatch = 65;
  std::mt19937 rng(3);
  const std::vector<uint16_t> row = random_row(rng, kVocab, 2.0f);
  std::vector<std::vector<uint16_t>> others;
  for (int i = 0; i < 4; ++i) others.push_back(random_row(rng, kVocab, 2.0f + i));
  const SamplingRow configs[] = {params(1.0f), params(0.8f, 40), params(1.0f, 0, 0.9f), params(1.2f, 0, 1.0f, 0.05f),
                                 params(0.7f, 100, 0.95f, 0.02f)};
  for (size_t c = 0; c < std::size(configs); ++c) {
    SamplingRow p = configs[c];
    p.seed = 0x9e3779b97f4a7c15ull + c;
    p.offset = 41 + c;
    const int32_t alone = sample(row, {p}, kVocab)[0];

    std::vector<uint16_t> logits;
    std::vector<SamplingRow> rows;
    for (int b = 0; b < kBatch; ++b) {
      if (b == 0 || b == 31 || b == kBatch - 1) {
        logits.insert(logits.end(), row.begin(), row.end());
        rows.push_back(p);
      } else {
        const std::vector<uint16_t>& other = others[b % others.size()];
        logits.insert(logits.end(), other.begin(), other.end());
        SamplingRow q = configs[b % std::size(configs)];
        q.seed = rng();
        q.offset = rng();
        rows.push_back(q);
      }
    }
    const std::vector<int32_t> tokens = sample(logits, rows, kVocab);
    EXPECT_EQ(tokens[0], alone) << "config " << c;
    EXPECT_EQ(tokens[31], alone) << "config " << c;
    EXPECT_EQ(tokens[kBatch - 1], alone) << "config " << c;
  }
}

TEST(CudaSampling, SeedsAndOffsetsGiveIndependentDraws) {
  PAGODA_SKIP_WITHOUT_GPU();
  // A flat row: every draw is uniform over the vocabulary, so 64 draws nearly never collide.
  constexpr int kVocab = 128256, kGroup = 64;
  std::vector<uint16_t> logits(static_cast<size_t>(3 * kGroup) * kVocab, f32_to_bf16(0.0f));
  std::vector<SamplingRow> rows;
  for (int i = 0; i < kGroup; ++i) rows.push_back(params(1.0f, 0, 1.0f, 0.0f, 7, i));  // offsets
  for (int i = 0; i < kGroup; ++i) rows.push_back(params(1.0f, 0, 1.0f, 0.0f, (uint64_t{1} * i << 32) | 7, 0));
  for (int i = 0; i < kGroup; ++i) rows.push_back(params(1.0f, 0, 1.0f, 0.0f, 7, uint64_t{1} * i << 32));
  const std::vector<int32_t> tokens = sample(logits, rows, kVocab);
  for (int g = 0; g < 3; ++g) {
    const std::set<int32_t> distinct(tokens.begin() + g * kGroup, tokens.begin() + (g + 1) * kGroup);
    EXPECT_GE(distinct.size(), 60u) << "group " << g;
    EXPECT_GT(*distinct.rbegin(), kVocab / 2) << "group " << g;  // the whole range is reachable
    EXPECT_LT(*distinct.begin(), kVocab / 2) << "group " << g;
  }
  // Row 0 of every group is (seed 7, offset 0).
  EXPECT_EQ(tokens[kGroup], tokens[0]);
  EXPECT_EQ(tokens[2 * kGroup], tokens[0]);
}

TEST(CudaSampling, FrequenciesMatchSoftmax) {
  PAGODA_SKIP_WITHOUT_GPU();
  const std::vector<uint16_t> row8 = small_row(kProbs8), row11 = small_row(kProbs11);
  check_small_vocab(row8, params(1.0f), 8, "T 1");
  check_small_vocab(row8, params(0.8f), 8, "T 0.8");
  check_small_vocab(row8, params(1.5f), 8, "T 1.5");
  check_small_vocab(row11, params(1.0f), 11, "vocab 11, T 1");  // rows not 16-byte aligned, a 3-token tail
}

TEST(CudaSampling, FiltersKeepTheRightTokensInProportion) {
  PAGODA_SKIP_WITHOUT_GPU();
  const std::vector<uint16_t> row8 = small_row(kProbs8), row11 = small_row(kProbs11);
  check_small_vocab(row8, params(1.0f, 3), 3, "top_k 3");
  check_small_vocab(row8, params(1.0f, 0, 0.6f), 3, "top_p 0.6");
  // Top-p on the renormalised top-4 set keeps 3 tokens (0.35 + 0.22 + 0.15 = 0.72 of the full set < 0.75).
  check_small_vocab(row8, params(1.0f, 4, 0.75f), 3, "top_k 4 then top_p 0.75");
  check_small_vocab(row8, params(1.0f, 0, 1.0f, 0.33f), 3, "min_p 0.33");
  check_small_vocab(row8, params(0.9f, 6, 0.8f, 0.1f), 4, "T 0.9, top_k 6, top_p 0.8, min_p 0.1 (top-p binds)");
  check_small_vocab(row8, params(1.3f, 6, 0.95f, 0.35f), 4, "T 1.3, top_k 6, top_p 0.95, min_p 0.35 (min-p binds)");
  check_small_vocab(row11, params(0.7f, 3), 3, "vocab 11, T 0.7, top_k 3");
  check_small_vocab(row11, params(1.0f, 0, 0.78f), 5, "vocab 11, top_p 0.78");
  check_small_vocab(row11, params(1.2f, 0, 1.0f, 0.2f), 7, "vocab 11, T 1.2, min_p 0.2");
}

TEST(CudaSampling, FiltersOnALargeUnalignedVocabulary) {
  PAGODA_SKIP_WITHOUT_GPU();
  // Four likely tokens (weights 4, 2, 1, 0.5, one of them the last id) over a background of equal logits
  // holding about as much mass as the weight-1 token. Categories: the four, then the background as one.
  constexpr int kVocab = 128261, kPerConfig = 160;
  const int top_ids[4] = {kVocab - 1, 0, 77777, 4099};
  const float top_weights[4] = {4.0f, 2.0f, 1.0f, 0.5f};
  std::vector<uint16_t> row(kVocab, f32_to_bf16(-std::log(static_cast<float>(kVocab))));
  for (int j = 0; j < 4; ++j) row[top_ids[j]] = f32_to_bf16(std::log(top_weights[j]));
  auto category = [&](int token) {
    for (int j = 0; j < 4; ++j) {
      if (token == top_ids[j]) return j;
    }
    return 4;
  };
  struct Config {
    SamplingRow p;
    int kept_categories;
    const char* what;
  };
  // top_p 0.95 ends inside the tied background, which is then kept whole.
  const Config configs[] = {{params(1.0f), 5, "plain"},
                            {params(1.0f, 0, 0.75f), 3, "top_p 0.75"},
                            {params(1.0f, 0, 0.95f), 5, "top_p 0.95"},
                            {params(1.0f, 0, 1.0f, 0.2f), 3, "min_p 0.2"},
                            {params(1.0f, 2), 2, "top_k 2"}};
  std::vector<uint16_t> logits;
  std::vector<SamplingRow> rows;
  for (const Config& c : configs) {
    for (int d = 0; d < kPerConfig; ++d) {
      logits.insert(logits.end(), row.begin(), row.end());
      SamplingRow p = c.p;
      p.seed = 99;
      p.offset = static_cast<uint64_t>(d);
      rows.push_back(p);
    }
  }
  const std::vector<int32_t> tokens = sample(logits, rows, kVocab);
  for (size_t c = 0; c < std::size(configs); ++c) {
    const std::vector<double> probs = reference_probs(row, configs[c].p);
    std::vector<double> category_probs(5, 0.0);
    for (int i = 0; i < kVocab; ++i) category_probs[category(i)] += probs[i];
    int kept = 0;
    for (double q : category_probs) kept += q > 0.0;
    ASSERT_EQ(kept, configs[c].kept_categories) << configs[c].what << ": the scenario is not what the test means";
    std::vector<int64_t> counts(5, 0);
    for (int d = 0; d < kPerConfig; ++d) ++counts[category(tokens[c * kPerConfig + d])];
    expect_frequencies(counts, category_probs, configs[c].what);
  }
}

// Reports the time per launch for 256 rows of a Llama-3 vocabulary; the bounds are generous ceilings.
TEST(CudaSampling, Throughput256Rows) {
  PAGODA_SKIP_WITHOUT_GPU();
  constexpr int kRows = 256, kVocab = 128256, kIters = 20;
  std::mt19937 rng(5);
  const std::vector<uint16_t> row = random_row(rng, kVocab, 3.0f);
  std::vector<uint16_t> logits;
  for (int r = 0; r < kRows; ++r) logits.insert(logits.end(), row.begin(), row.end());
  DeviceArray<uint16_t> d_logits(logits.size());
  DeviceArray<SamplingRow> d_rows(kRows);
  DeviceArray<int32_t> d_out(kRows);
  DeviceArray<char> d_workspace(kernels::sampling_workspace_bytes(kRows, kVocab));
  cuda_ok(cudaMemcpy(d_logits.get(), logits.data(), logits.size() * 2, cudaMemcpyHostToDevice), "copy logits");
  struct Case {
    SamplingRow p;
    const char* what;
    double ceiling_ms;
  };
  for (const Case& c : {Case{params(0.0f), "greedy", 1.0}, Case{params(1.0f), "temperature", 1.0},
                        Case{params(1.0f, 50), "top_k 50", 2.0}, Case{params(1.0f, 0, 0.9f), "top_p 0.9", 2.0},
                        Case{params(0.7f, 50, 0.9f, 0.05f), "top_k + top_p + min_p", 3.0}}) {
    std::vector<SamplingRow> rows(kRows, c.p);
    for (int r = 0; r < kRows; ++r) rows[r].seed = r;
    cuda_ok(cudaMemcpy(d_rows.get(), rows.data(), kRows * sizeof(SamplingRow), cudaMemcpyHostToDevice), "copy rows");
    auto launch = [&] {
      kernels::sample_tokens(d_out.get(), reinterpret_cast<const __nv_bfloat16*>(d_logits.get()), d_rows.get(), kRows,
                             kVocab, d_workspace.get(), nullptr);
    };
    launch();
    cudaEvent_t start, stop;
    cuda_ok(cudaEventCreate(&start), "event");
    cuda_ok(cudaEventCreate(&stop), "event");
    cuda_ok(cudaEventRecord(start), "record");
    for (int i = 0; i < kIters; ++i) launch();
    cuda_ok(cudaEventRecord(stop), "record");
    cuda_ok(cudaEventSynchronize(stop), "sync");
    float ms = 0.0f;
    cuda_ok(cudaEventElapsedTime(&ms, start, stop), "elapsed");
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    ms /= kIters;
    std::printf("sample_tokens %d x %d, %s: %.1f us\n", kRows, kVocab, c.what, ms * 1000.0);
    EXPECT_LT(ms, c.ceiling_ms) << c.what;
  }
}

}  // namespace
}  // namespace pagoda
