// The engine's scheduling scenarios, written once and run on each backend: chunked prefill across many
// steps (prompts longer than the budget, budgets of 16 to 2,048, prompts that fill max_model_len), mixed
// steps of decodes and prompt chunks, prefix-cache hits that end mid-prompt, preemption and resumption on
// a small KV pool, many sequences of mixed lengths, and a cancellation mid-prompt.
//
// Every request is greedy. Each token it produced is checked against the CPU backend's logits for the
// same history (the prompt and the request's own earlier tokens, computed in one pass, fp32 KV): on the
// CPU with its fp32 KV it must be the CPU's greedy choice; on CUDA (bf16, whose rounding depends on the
// batch's shape) or with an FP8 KV cache (the parameter's third element: e4m3 keeps 3 mantissa bits) it may
// also be a token within kCudaNearTie of the logit range below that choice, and at most a tenth of all
// tokens (plus two) may be such near-ties.
// Included by tests/unit/engine/test_engine_scenarios.cpp (CPU) and tests/unit/cuda/
// test_engine_scenarios_gpu.cpp (CUDA), one instantiation each.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <tuple>

#include "../model/golden_helpers.h"
#include "pagoda/engine/llm.h"
#ifdef PAGODA_HAVE_CUDA
#include "pagoda/backend/cuda/cuda_devices.h"
#endif

namespace pagoda::testing {

// Five times the worst |cuda - cpu| / logit range that CudaModel measures on these models (about 0.01): a
// bf16 flip needs the two logits within twice that, and batch shapes differ from CudaModel's.
inline constexpr double kCudaNearTie = 0.05;
inline constexpr int kScenarioMaxModelLen = 512;

inline std::string scenario_model_path(const std::string& name) {
  return name == "stories260K" ? bundled_model_path() : data_path("models/" + name);
}

inline const LoadedModel& scenario_model(const std::string& name) {
  static std::map<std::string, LoadedModel> cache;
  auto it = cache.find(name);
  if (it == cache.end())
    it = cache.emplace(name, load_model(LoadOptions{.model_path = scenario_model_path(name), .show_progress = false})).first;
  return it->second;
}

// n token ids (the first is BOS 1), deterministic in `seed`.
inline std::vector<TokenId> scenario_prompt(int n, int vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<TokenId> dist(3, vocab - 1);
  std::vector<TokenId> ids{1};
  while (static_cast<int>(ids.size()) < n) ids.push_back(dist(rng));
  return ids;
}

// The CPU's logits [n, vocab] along `tokens`: row i predicts tokens[first + i], from everything before it.
// Two steps: tokens [0, first - 1) sample nothing, then [first - 1, first - 1 + n) give every row.
inline std::vector<float> cpu_logits_along(const LoadedModel& m, const std::vector<TokenId>& tokens, size_t first,
                                           size_t n) {
  CpuOps ops;
  LlamaModel model(m.config, m.weights);
  const int block_size = 16;
  const int num_blocks = static_cast<int>(tokens.size()) / block_size + 1;
  KvCache cache = ops.allocate_kv_cache(model.kv_cache_spec(num_blocks, block_size, DType::kF32));
  std::vector<int32_t> blocks(static_cast<size_t>(num_blocks));
  for (int i = 0; i < num_blocks; ++i) blocks[i] = i;
  BatchBuilder builder;
  const std::span<const TokenId> all(tokens);
  if (first > 1) {
    const SequenceChunk prefix{all.subspan(0, first - 1), 0, blocks, LogitsWanted::kNone};
    model.forward(ops, builder.build(std::span(&prefix, 1), block_size), cache);
  }
  const SequenceChunk rest{all.subspan(first - 1, n), static_cast<int>(first - 1), blocks, LogitsWanted::kAll};
  const Tensor logits = model.forward(ops, builder.build(std::span(&rest, 1), block_size), cache);
  std::vector<float> rows(n * static_cast<size_t>(m.config.vocab_size));
  ops.download_f32(Tensor(rows.data(), DType::kF32, {static_cast<int64_t>(n), m.config.vocab_size}), logits);
  return rows;
}

// (device, model, --kv-cache-dtype)
class EngineScenarios : public ::testing::TestWithParam<std::tuple<std::string, std::string, std::string>> {
 protected:
  void SetUp() override {
    if (device() != "cuda") return;
#ifdef PAGODA_HAVE_CUDA
    if (cuda::list_devices().empty()) GTEST_SKIP() << "no CUDA device";
#else
    GTEST_SKIP() << "built without the CUDA backend";
#endif
  }
  const std::string& device() const { return std::get<0>(GetParam()); }
  const std::string& model_name() const { return std::get<1>(GetParam()); }
  const std::string& kv_dtype() const { return std::get<2>(GetParam()); }
  bool fp8_kv() const { return kv_dtype() == "fp8"; }
  const LoadedModel& model() const { return scenario_model(model_name()); }
  int vocab() const { return model().config.vocab_size; }

  // KV bytes for `tokens` tokens in the pool's KV dtype (CPU f32, CUDA bf16; FP8: a byte a value and one
  // a row).
  int64_t kv_bytes(int tokens) const {
    const ModelConfig& c = model().config;
    const int64_t rows = int64_t{tokens} * c.num_layers * 2 * c.num_kv_heads;
    if (fp8_kv()) return rows * (c.head_dim + 1);
    return rows * c.head_dim * (device() == "cuda" ? 2 : 4);
  }

  // A pool of `kv_tokens` (default: every one of max_num_seqs sequences at max_model_len).
  LlmOptions options(int budget, int kv_tokens = 16 * kScenarioMaxModelLen, bool prefix_caching = true) const {
    LlmOptions o;
    o.load = {.model_path = scenario_model_path(model_name()), .show_progress = false};
    o.device = device();
    o.max_num_seqs = 16;
    o.max_num_batched_tokens = budget;
    o.max_model_len = kScenarioMaxModelLen;
    o.kv_cache_memory = kv_bytes(kv_tokens);
    o.enable_prefix_caching = prefix_caching;
    o.kv_cache_dtype = kv_dtype();
    o.seed = 3;
    return o;
  }

  // Each output token against the CPU's logits given the same history (see the file comment).
  void expect_cpu_tokens(const std::vector<GenerateRequest>& requests, const std::vector<CompletionOutput>& outs) {
    ASSERT_EQ(outs.size(), requests.size());
    const double near_tie = device() == "cuda" || fp8_kv() ? kCudaNearTie : 0.0;
    const int64_t V = vocab();
    int total = 0, near_ties = 0;
    for (size_t i = 0; i < requests.size(); ++i) {
      const std::vector<TokenId>& got = outs[i].output_ids;
      EXPECT_EQ(outs[i].finish_reason, FinishReason::kLength) << "request " << i << ": " << outs[i].error;
      ASSERT_EQ(static_cast<int>(got.size()), requests[i].params.max_tokens) << "request " << i;
      std::vector<TokenId> sequence = requests[i].prompt_ids;
      sequence.insert(sequence.end(), got.begin(), got.end());
      const std::vector<float> rows = cpu_logits_along(model(), sequence, requests[i].prompt_ids.size(), got.size());
      for (size_t p = 0; p < got.size(); ++p) {
        const float* row = rows.data() + p * V;
        const auto [lo, hi] = std::minmax_element(row, row + V);
        ++total;
        if (row[got[p]] == *hi) continue;  // the CPU's greedy choice
        ++near_ties;
        EXPECT_LE(*hi - row[got[p]], near_tie * (*hi - *lo))
            << "request " << i << " (prompt of " << requests[i].prompt_ids.size() << ") output " << p << ": token "
            << got[p] << " is " << *hi - row[got[p]] << " below the CPU's best (logit range " << *hi - *lo << ")";
      }
    }
    std::printf("[ %s %s kv %s ] %d tokens: %d the CPU's greedy choice, %d within a near-tie of it\n",
                device().c_str(), model_name().c_str(), kv_dtype().c_str(), total, total - near_ties, near_ties);
    EXPECT_LE(near_ties, 2 + total / 10) << "more than a tenth of the tokens were not the CPU's greedy choice";
  }
};

// Prompts from 1 token to max_model_len (504 + 8 outputs ends at 512) under budgets of 16 to 2,048: the
// long prompts take many steps whose chunks sample nothing, while the short ones decode beside them. The
// longest prompt also runs alone first: every step but its last has no logits rows.
TEST_P(EngineScenarios, ChunkedPrefillAtEveryBudget) {
  std::vector<GenerateRequest> requests;
  const int lengths[] = {1, 15, 16, 17, 100, 300, kScenarioMaxModelLen - 8};
  for (int i = 0; i < 7; ++i)
    requests.push_back(greedy_request(scenario_prompt(lengths[i], vocab(), 10 + i), i == 6 ? 8 : 12 + 3 * i));
  for (int budget : {16, 48, 256, 2048}) {
    SCOPED_TRACE("budget " + std::to_string(budget));
    LLM llm(options(budget));
    expect_cpu_tokens({requests.back()}, llm.generate({requests.back()}));
    std::atomic<int> mixed_steps = 0;
    llm.engine().set_step_observer([&](const StepRecord& s) { mixed_steps += s.decode_seqs > 0 && s.prefill_tokens > 0; });
    expect_cpu_tokens(requests, llm.generate(requests));
    llm.engine().set_step_observer({});
    if (budget <= 256) {
      EXPECT_GT(mixed_steps.load(), 0) << "no step held both decodes and prompt chunks";
    }
    EXPECT_EQ(llm.engine().stats().kv_cache_usage, 0.0) << "leaked blocks";
  }
}

// A first request caches its prompt's blocks; later prompts share 40, 100 or all 200 of its tokens (hits
// of 32, 96 and 192 tokens that end mid-prompt, then chunks of 16) or none.
TEST_P(EngineScenarios, PrefixHitsThatEndMidPrompt) {
  const std::vector<TokenId> base = scenario_prompt(200, vocab(), 77);
  LLM llm(options(16));
  const GenerateRequest first = greedy_request(base, 10);
  std::vector<GenerateRequest> requests;
  for (int shared : {40, 100, 200, 1}) {
    std::vector<TokenId> prompt(base.begin(), base.begin() + shared);
    const std::vector<TokenId> tail = scenario_prompt(60, vocab(), 100 + shared);
    prompt.insert(prompt.end(), tail.begin() + 1, tail.end());
    requests.push_back(greedy_request(prompt, 10));
  }
  requests.push_back(first);  // every block cached: the last prompt token is still computed
  expect_cpu_tokens({first}, llm.generate({first}));
  const std::vector<CompletionOutput> outs = llm.generate(requests);
  expect_cpu_tokens(requests, outs);
  EXPECT_EQ(outs[0].usage.cached_tokens, 32);
  EXPECT_EQ(outs[1].usage.cached_tokens, 96);
  EXPECT_EQ(outs[2].usage.cached_tokens, 192);
  EXPECT_EQ(outs[4].usage.cached_tokens, 192);
  EXPECT_EQ(llm.engine().stats().kv_cache_usage, 0.0) << "leaked blocks";
}

// 32 requests of mixed lengths (1 to 400 prompt tokens) on a pool of 1,024 tokens: sequences are
// preempted, recomputed and resumed, with prefix caching on and off.
TEST_P(EngineScenarios, PreemptionAndResumption) {
  std::mt19937 rng(21);
  std::vector<GenerateRequest> requests;
  for (int i = 0; i < 32; ++i) {
    const int n = i % 8 == 0 ? 300 + static_cast<int>(rng() % 100) : 1 + static_cast<int>(rng() % 120);
    requests.push_back(greedy_request(scenario_prompt(n, vocab(), 500 + i), 8 + static_cast<int>(rng() % 40)));
  }
  for (bool prefix_caching : {true, false}) {
    SCOPED_TRACE(prefix_caching ? "prefix caching on" : "prefix caching off");
    LLM llm(options(48, 1024, prefix_caching));
    expect_cpu_tokens(requests, llm.generate(requests));
    const EngineStats stats = llm.engine().stats();
    EXPECT_GT(stats.num_preemptions, 0u) << "the KV pool was meant to force preemption";
    EXPECT_EQ(stats.num_running, 0);
    EXPECT_EQ(stats.kv_cache_usage, 0.0) << "leaked blocks";
  }
}

// A 500-token prompt cancelled on its third step of 16 tokens: it ends with "abort" and no output, its
// blocks are freed, and the request beside it is undisturbed.
TEST_P(EngineScenarios, CancellationMidPrompt) {
  LLM llm(options(16));
  const GenerateRequest victim = greedy_request(scenario_prompt(500, vocab(), 9), 8);
  const std::vector<GenerateRequest> others = {greedy_request(scenario_prompt(30, vocab(), 8), 40)};
  std::mutex mutex;
  std::condition_variable cv;
  CompletionOutput victim_out, other_out;
  bool victim_done = false, other_done = false;
  int steps = 0;  // the engine thread's
  std::atomic<RequestId> victim_id = 0;
  llm.engine().set_step_observer([&](const StepRecord&) {
    if (++steps == 3) llm.engine().cancel(victim_id);  // the engine thread: the victim is mid-prompt
  });
  victim_id = llm.engine().submit(victim, [&](const RequestEvent& e) {
    std::lock_guard l(mutex);
    append_event(victim_out, e);
    victim_done = victim_done || e.finished;
    cv.notify_all();
  });
  llm.engine().submit(others[0], [&](const RequestEvent& e) {
    std::lock_guard l(mutex);
    append_event(other_out, e);
    other_done = other_done || e.finished;
    cv.notify_all();
  });
  {
    std::unique_lock lock(mutex);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(120), [&] { return victim_done && other_done; }));
  }
  llm.engine().set_step_observer({});
  EXPECT_EQ(victim_out.finish_reason, FinishReason::kAborted);
  EXPECT_TRUE(victim_out.output_ids.empty()) << "cancelled after its prompt, not mid-prompt";
  expect_cpu_tokens(others, {other_out});
  const EngineStats stats = llm.engine().stats();
  EXPECT_EQ(stats.num_running, 0);
  EXPECT_EQ(stats.num_waiting, 0);
  EXPECT_EQ(stats.kv_cache_usage, 0.0) << "leaked blocks";
}

}  // namespace pagoda::testing
