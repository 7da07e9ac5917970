// LLM: the offline convenience API (as vLLM's LLM class): load a model, start an engine, run a list of
// requests to completion, get the outputs back in input order.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pagoda/backend/ops.h"
#include "pagoda/engine/engine.h"
#include "pagoda/loader/model_loader.h"

namespace pagoda {

struct LlmOptions {
  LoadOptions load;
  // --quantize-lm-head: "fp8", "int8" or "w4" quantizes the output projection at start-up
  // (quantizer::quantize_lm_head); empty keeps it as stored.
  std::string lm_head_quantization{};
  // --quantize-embeddings: the same for the embedding table (quantizer::quantize_embeddings).
  std::string embedding_quantization{};
  std::string device = "cpu";            // "cpu" or "cuda" (builds with the cuda preset)
  double gpu_memory_utilization = 0.9;   // CUDA: share of the GPU's memory the engine may use in all
  bool enforce_eager = false;            // CUDA: no graphs
  // Plan step N+1 while step N runs (EngineOptions::async_scheduling). Unset: on for CUDA; off for the
  // CPU, whose steps are done when launched, so planning ahead would only delay each event by a step.
  std::optional<bool> async_scheduling{};
  int num_threads = 0;
  int max_num_seqs = 256;
  int max_num_batched_tokens = 2048;
  int long_prefill_token_threshold = 0;  // SchedulerConfig's: the most prompt tokens a sequence computes a step
  int max_long_partial_prefills = 0;     // SchedulerConfig's: the most long prefills a step (0: no limit)
  int max_model_len = 0;           // 0: the model's context; more than it is refused, unless:
  bool max_model_len_at_most = false;  // max_model_len is a bound: the model's context where that is less
  int block_size = 16;
  // KV cache bytes; 0: automatic (CPU: enough for max_num_seqs full sequences, at most 25% of free RAM;
  // CUDA: what gpu_memory_utilization leaves after weights and the largest step).
  int64_t kv_cache_memory = 0;
  // auto (the activation dtype: fp32 on the CPU, bf16 on the GPU), bf16, or fp8 / fp8_e4m3 (e4m3 codes with a
  // power-of-two scale per token and KV head: kv/kv_fp8.h), as vLLM's --kv-cache-dtype.
  std::string kv_cache_dtype = "auto";
  // With fp8: one scale per layer for K and one for V, from the first batch's amax (vLLM's
  // --calculate-kv-scales) instead of one per token and head. CPU only; values past the first batch's range
  // saturate (docs/QUANTIZATION.md).
  bool calculate_kv_scales = false;
  bool enable_prefix_caching = true;
  // Prefix-cache eviction: LRU (default), or LRU-K with its K and correlated-reference period
  // (kv/lru_k_policy.h), as --kv-eviction, --lru-k and --lru-k-correlated-ms.
  EvictionPolicyKind kv_eviction = EvictionPolicyKind::kLru;
  LruKOptions lru_k{};
  // Host memory for the host KV tier (--kv-offload-memory; kv/host_tier.h): cached blocks the pool evicts
  // are kept there and copied back on a prefix hit. 0: no host tier. Needs prefix caching.
  int64_t kv_offload_memory = 0;
  // With a host tier: a prefix requested 3 times at intervals of at most this many ms is periodic, and its
  // host blocks come back half an interval before its next request is due (--kv-prefetch-interval-ms).
  // Negative: the default (kDefaultPrefetchIntervalMs); 0: no prefetch.
  double kv_prefetch_interval_ms = -1;
  static constexpr double kDefaultPrefetchIntervalMs = 250;
  SchedulingPolicy policy = SchedulingPolicy::kFcfs;
  // --batch-controller adaptive: each step's token budget from these targets (unset: static).
  std::optional<SloTargets> slo{};
  // The TTL batching window (--batch-wait-ms; SchedulerConfig::batch_wait_seconds): new requests wait up to this
  // long for others to be prefilled with, while the engine is idle or only decoding; never past
  // batch_wait_ttft_ms (the TTFT target, 0: none) less the predicted time to a first token. 0: off.
  double batch_wait_ms = 0;
  double batch_wait_ttft_ms = 0;
  // --scheduling-policy slo: a running request already past these targets is preempted only when every
  // candidate is (SchedulerConfig::slo). Unset: `slo`'s, or none.
  std::optional<SloTargets> preemption_slo{};
  // Automatic precision fallback (sched/precision_fallback.h): a second weight set, the served model's decoder
  // linears quantized at start-up ("fp8", "int8" or "w4": quantize/quantize_weights.h) or those of
  // `fallback_model`, a quantized checkpoint of the same model (any format the loader reads; its embedding, norms
  // and lm_head are not used: the served model's are). Steps run on it while fallback's rule says so; its
  // tpot_target_s is required.
  std::string fallback_quantization{};
  std::string fallback_model{};
  FallbackOptions fallback{};
  uint64_t seed = 0;
  // false (default): copy the weights out of the file mapping into process memory (huge pages where
  // possible): a private copy is not reclaimed from under the decode loop (docs/PERFORMANCE.md has the
  // measurement). true: compute straight from the mapping (less memory).
  bool use_mmap = false;
};

struct CompletionOutput {
  std::vector<TokenId> prompt_ids;
  std::vector<TokenId> output_ids;
  FinishReason finish_reason = FinishReason::kNone;
  ErrorKind error_kind = ErrorKind::kNone;  // with kError
  std::string error;                        // with kError
  std::vector<TopLogprobs> logprobs;
  std::vector<TopLogprobs> prompt_logprobs;
  Usage usage;
};

class LLM {
 public:
  explicit LLM(const LlmOptions& options);
  ~LLM();

  const LoadedModel& model() const { return loaded_; }
  const Tokenizer* tokenizer() const { return loaded_.tokenizer.get(); }
  Engine& engine() { return *engine_; }
  // The fallback weight set's form ("fp8 (quantized at start-up)", a checkpoint's format...); empty without one.
  const std::string& fallback_description() const { return fallback_description_; }
  Ops& backend() { return *ops_; }
  int max_model_len() const { return max_model_len_; }
  int num_kv_tokens() const { return num_kv_blocks_ * block_size_; }
  DType kv_cache_dtype() const { return kv_dtype_; }

  // Submits every request at once and waits for all of them; outputs are in input order.
  std::vector<CompletionOutput> generate(const std::vector<GenerateRequest>& requests);

 private:
  LoadedModel loaded_;
  std::unique_ptr<Ops> ops_;
  ModelWeights weights_;  // what the backend computes with (device copies on CUDA)
  std::unique_ptr<LlamaModel> model_;
  // The fallback weight set: the checkpoint it came from (--fallback-model), its host storage and the weights
  // the backend computes with.
  LoadedModel fallback_loaded_;
  ModelWeights fallback_weights_;
  std::unique_ptr<LlamaModel> fallback_model_;
  std::string fallback_description_;
  std::unique_ptr<Engine> engine_;
  int max_model_len_ = 0;
  int num_kv_blocks_ = 0;
  int block_size_ = 16;
  DType kv_dtype_ = DType::kF32;

  // --kv-cache-dtype for this backend; an Error for a combination it does not keep.
  DType kv_cache_dtype(const LlmOptions& o) const;
  int num_blocks_for_host(const LlmOptions& o, int64_t block_bytes) const;
  int num_blocks_for_gpu(const LlmOptions& o, int64_t block_bytes);
  // The fallback weight set's host form (--fallback-quantization / --fallback-model), or nullopt without one;
  // its storage is kept in fallback_loaded_.
  std::optional<ModelWeights> fallback_host_weights(const LlmOptions& o);
};

// Folds one engine event into the request's output (tokens, logprobs, usage, finish reason).
void append_event(CompletionOutput& out, const RequestEvent& event);

// The EOS ids a model stops on: generation_config.json's, else config.json's, else the tokenizer's.
std::vector<TokenId> model_eos_token_ids(const LoadedModel& model);

}  // namespace pagoda
