// Batch invariance on the CPU: every reference prompt gives the same greedy tokens alone and inside a
// batch of 64 mixed requests (different lengths, sampling settings, shared prefixes, chunked prefill,
// a KV pool small enough to force preemption); seeded sampling is the same alone or batched; prefix
// caching changes no output while its counters show the sharing. With an FP8 KV cache (stories260K) the
// same holds: a token's codes depend on nothing but its own K and V, so preemption's recomputation and
// shared prefix blocks give the same values (the references, from fp32 caches, are not compared there).
// The same outputs under the adaptive batch controller, the slo and fair scheduling policies, a prefill chunk limit
// (--long-prefill-token-threshold) and a host KV tier.
#include <gtest/gtest.h>

#include <random>

#include "../model/golden_helpers.h"
#include "pagoda/core/memory_size.h"
#include "pagoda/engine/llm.h"

namespace pagoda {
namespace {

using testing::data_path;

struct Case {
  std::string name;
  std::string model_path;
  std::string kv_cache_memory;  // small: forces preemption with 16 running sequences
  std::vector<std::vector<TokenId>> prompts;
  std::vector<std::vector<TokenId>> expected;  // reference greedy outputs (other implementations)
};

Case stories_case() {
  Case c{"stories260K", testing::bundled_model_path(), "1200KiB", {}, {}};
  for (const auto& ref : testing::read_jsonl(data_path("refs/stories260K_greedy.jsonl"))) {
    c.prompts.push_back(ref["prompt_ids"].get<std::vector<TokenId>>());
    c.expected.push_back(ref["output_ids"].get<std::vector<TokenId>>());
  }
  return c;
}

Case hf_case(const std::string& name, const std::string& kv) {
  Case c{name, data_path("models/" + name), kv, {}, {}};
  const nlohmann::json ref = testing::read_json(data_path("refs/hf_" + name + ".json"));
  for (const auto& gen : ref["generations"]) {
    c.prompts.push_back(gen["prompt_ids"].get<std::vector<TokenId>>());
    c.expected.push_back(gen["greedy_ids"].get<std::vector<TokenId>>());
  }
  return c;
}

// Fillers: prompts that share a prefix with a reference prompt or with each other, of varied lengths,
// half greedy and half seeded sampling with assorted settings.
std::vector<GenerateRequest> fillers(const Case& c, int vocab, int count) {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<TokenId> token(3, vocab - 1);
  std::vector<TokenId> shared_prefix(40);
  for (TokenId& t : shared_prefix) t = token(rng);
  std::vector<GenerateRequest> out;
  for (int i = 0; i < count; ++i) {
    std::vector<TokenId> prompt = i % 3 == 0 ? c.prompts[i % c.prompts.size()] : shared_prefix;
    prompt.resize(prompt.size() + 1 + rng() % 60);
    for (size_t j = prompt.size() - (prompt.size() > 60 ? 1 + rng() % 20 : 1); j < prompt.size(); ++j) prompt[j] = token(rng);
    for (TokenId& t : prompt)
      if (t == 0) t = token(rng);
    GenerateRequest r = testing::greedy_request(prompt, 8 + static_cast<int>(rng() % 40));
    if (i % 2 == 1) {
      r.params.temperature = 0.7 + 0.1 * (i % 4);
      r.params.seed = 100 + i;
      r.params.top_k = i % 5 == 0 ? 20 : 0;
      r.params.top_p = i % 3 == 0 ? 0.9 : 1.0;
      r.params.min_p = i % 7 == 0 ? 0.05 : 0.0;
      r.params.presence_penalty = i % 4 == 1 ? 0.5 : 0.0;
      r.params.repetition_penalty = i % 4 == 3 ? 1.2 : 1.0;
    }
    out.push_back(r);
  }
  return out;
}

class BatchInvariance : public ::testing::TestWithParam<int> {};

TEST_P(BatchInvariance, OutputsDoNotDependOnTheBatch) {
  const bool fp8 = GetParam() == 3;  // stories260K with --kv-cache-dtype fp8, in a pool of as many tokens
  Case c = GetParam() == 0 || fp8 ? stories_case()
           : GetParam() == 1      ? hf_case("tiny-llama3-hf", "320KiB")
                                  : hf_case("tiny-mistral-spm-hf", "400KiB");
  const std::string kv_dtype = fp8 ? "fp8" : "auto";
  if (fp8) c.kv_cache_memory = "304KiB";  // 1,200 KiB of fp32 at head_dim 8: (2 * 8 * 4) / (2 * (8 + 1)) = 3.6x
  SCOPED_TRACE(c.name + " " + kv_dtype);
  // The HF references were made with RoPE frequencies in the checkpoint dtype (tests/data/README.md).
  const LoadOptions load{.model_path = c.model_path, .show_progress = false, .rope_freq_dtype = RopeFreqDtype::kCheckpoint};

  // Alone: one request at a time, plenty of KV.
  LLM alone(LlmOptions{.load = load, .max_num_seqs = 1, .max_model_len = 512, .kv_cache_dtype = kv_dtype});
  const int vocab = alone.model().config.vocab_size;
  std::vector<GenerateRequest> requests;
  for (size_t i = 0; i < c.prompts.size(); ++i) requests.push_back(testing::greedy_request(c.prompts[i], static_cast<int>(c.expected[i].size())));
  const size_t num_refs = requests.size();
  for (const GenerateRequest& f : fillers(c, vocab, 64 - static_cast<int>(num_refs))) requests.push_back(f);
  std::vector<CompletionOutput> solo;
  for (const GenerateRequest& r : requests) solo.push_back(alone.generate({r})[0]);
  if (!fp8) {
    for (size_t i = 0; i < num_refs; ++i) EXPECT_EQ(solo[i].output_ids, c.expected[i]) << "reference " << i << " alone";
  }

  for (bool prefix_caching : {true, false}) {
    SCOPED_TRACE(prefix_caching ? "prefix caching on" : "prefix caching off");
    LLM batched(LlmOptions{.load = load, .max_num_seqs = 16, .max_num_batched_tokens = 48, .max_model_len = 512,
                           .kv_cache_memory = parse_memory_size(c.kv_cache_memory), .kv_cache_dtype = kv_dtype,
                           .enable_prefix_caching = prefix_caching});
    const std::vector<CompletionOutput> together = batched.generate(requests);
    for (size_t i = 0; i < requests.size(); ++i) {
      EXPECT_EQ(together[i].output_ids, solo[i].output_ids) << "request " << i;
      EXPECT_EQ(together[i].finish_reason, solo[i].finish_reason) << "request " << i;
    }
    const EngineStats stats = batched.engine().stats();
    EXPECT_GT(stats.num_preemptions, 0u) << "the KV pool was meant to force preemption";
    if (prefix_caching) {
      EXPECT_GT(stats.prefix_cache_hits, 0u);
      int cached = 0;
      for (const auto& o : together) cached += o.usage.cached_tokens;
      EXPECT_GT(cached, 0);
    } else {
      EXPECT_EQ(stats.prefix_cache_hits, 0u);
    }
    EXPECT_EQ(stats.num_running, 0);
    EXPECT_EQ(stats.kv_cache_usage, 0.0);
  }
  {
    // The adaptive batch controller changes each step's budget, not the outputs. Its targets are tight for
    // these steps, so the budget moves between the decodes' floor and the static 48.
    SCOPED_TRACE("adaptive batch controller");
    LLM adaptive(LlmOptions{.load = load, .max_num_seqs = 16, .max_num_batched_tokens = 48, .max_model_len = 512,
                            .kv_cache_memory = parse_memory_size(c.kv_cache_memory), .kv_cache_dtype = kv_dtype,
                            .slo = SloTargets{.ttft_seconds = 0.02, .tpot_seconds = 0.0002}});
    const std::vector<CompletionOutput> together = adaptive.generate(requests);
    for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(together[i].output_ids, solo[i].output_ids) << "request " << i;
    EXPECT_GT(adaptive.engine().stats().batch_controller.token_budget, 0);
  }
  {
    // The slo policy preempts other victims (the most remaining work; requests past these tight targets
    // spared while others are not), and the outputs stay those of the requests alone.
    SCOPED_TRACE("slo scheduling policy");
    LLM slo(LlmOptions{.load = load, .max_num_seqs = 16, .max_num_batched_tokens = 48, .max_model_len = 512,
                       .kv_cache_memory = parse_memory_size(c.kv_cache_memory), .kv_cache_dtype = kv_dtype,
                       .policy = SchedulingPolicy::kSlo,
                       .preemption_slo = SloTargets{.ttft_seconds = 0.05, .tpot_seconds = 0.001}});
    const std::vector<CompletionOutput> together = slo.generate(requests);
    for (size_t i = 0; i < requests.size(); ++i) {
      EXPECT_EQ(together[i].output_ids, solo[i].output_ids) << "request " << i;
      EXPECT_EQ(together[i].finish_reason, solo[i].finish_reason) << "request " << i;
    }
    EXPECT_GT(slo.engine().stats().num_preemptions, 0u) << "the KV pool was meant to force preemption";
  }
  {
    // The fair policy reorders prompt work by tenant (three tenants, weights 2, 1 and 0.25, the last with
    // prompt_tokens_per_step 8) and preempts from the tenant with the most service; each request keeps the outputs
    // it has alone.
    SCOPED_TRACE("fair scheduling policy");
    LLM fair(LlmOptions{.load = load, .max_num_seqs = 16, .max_num_batched_tokens = 48, .max_model_len = 512,
                        .kv_cache_memory = parse_memory_size(c.kv_cache_memory), .kv_cache_dtype = kv_dtype,
                        .policy = SchedulingPolicy::kFair});
    std::vector<GenerateRequest> tenanted = requests;
    for (size_t i = 0; i < tenanted.size(); ++i) {
      const int t = static_cast<int>(i % 3);
      tenanted[i].tenant.name = std::vector<std::string>{"a", "b", "c"}[t];
      tenanted[i].tenant.weight = std::vector<float>{2.0f, 1.0f, 0.25f}[t];
      tenanted[i].tenant.prompt_tokens_per_step = t == 2 ? 8 : 0;  // tenant c: 8 prompt tokens a step, together
    }
    const std::vector<CompletionOutput> together = fair.generate(tenanted);
    for (size_t i = 0; i < requests.size(); ++i) {
      EXPECT_EQ(together[i].output_ids, solo[i].output_ids) << "request " << i;
      EXPECT_EQ(together[i].finish_reason, solo[i].finish_reason) << "request " << i;
    }
    EXPECT_GT(fair.engine().stats().num_preemptions, 0u) << "the KV pool was meant to force preemption";
  }
  {
    // --long-prefill-token-threshold: no sequence computes more than 8 prompt tokens a step, and with
    // --max-long-partial-prefills 1 only one whose prompt has more than 8 left. The outputs stay those of the requests
    // alone, and a lone 100-token prompt takes 13 steps to its first token, not the 48-token budget's 3.
    SCOPED_TRACE("long prefill token threshold");
    LlmOptions capped{.load = load, .max_num_seqs = 16, .max_num_batched_tokens = 48,
                      .long_prefill_token_threshold = 8, .max_long_partial_prefills = 1, .max_model_len = 512,
                      .kv_cache_memory = parse_memory_size(c.kv_cache_memory), .kv_cache_dtype = kv_dtype};
    LLM chunked(capped);
    capped.max_long_partial_prefills = 0;
    const std::vector<CompletionOutput> together = chunked.generate(requests);
    for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(together[i].output_ids, solo[i].output_ids) << "request " << i;
    LLM lone(capped);
    std::vector<TokenId> prompt(100);
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<TokenId>(3 + i % (vocab - 3));
    lone.generate({testing::greedy_request(prompt, 1)});
    EXPECT_EQ(lone.engine().stats().num_steps, 13u);
  }
  for (EvictionPolicyKind eviction : {EvictionPolicyKind::kLru, EvictionPolicyKind::kLruK}) {
    // A host KV tier under the same pressure: evicted blocks (preempted sequences' among them) are copied out
    // and back into other blocks, and nothing changes in the outputs (FP8's exponents travel with the codes).
    SCOPED_TRACE(eviction == EvictionPolicyKind::kLru ? "host tier, LRU" : "host tier, LRU-K");
    LLM tiered(LlmOptions{.load = load, .max_num_seqs = 16, .max_num_batched_tokens = 48, .max_model_len = 512,
                          .kv_cache_memory = parse_memory_size(c.kv_cache_memory), .kv_cache_dtype = kv_dtype,
                          .kv_eviction = eviction, .kv_offload_memory = 4 * parse_memory_size(c.kv_cache_memory)});
    const std::vector<CompletionOutput> together = tiered.generate(requests);
    for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(together[i].output_ids, solo[i].output_ids) << "request " << i;
    const EngineStats stats = tiered.engine().stats();
    EXPECT_GT(stats.host_tier.offloaded, 0u);
    EXPECT_GT(stats.host_tier.loaded, 0u);
    EXPECT_GT(stats.prefix_cache_host_hits, 0u);
    EXPECT_GT(stats.num_host_kv_blocks, stats.num_kv_blocks);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, BatchInvariance, ::testing::Values(0, 1, 2, 3));

}  // namespace
}  // namespace pagoda
