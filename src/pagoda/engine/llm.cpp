// LLM: model + CPU backend + engine, and a blocking generate().
#include "pagoda/engine/llm.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <condition_variable>
#include <cstdlib>
#include <mutex>

#include "pagoda/core/env_knob.h"
#include "pagoda/core/error.h"
#include "pagoda/core/logging.h"
#include "pagoda/core/memory_size.h"
#include "pagoda/loader/weight_residency.h"
#include "pagoda/quantize/quantize_weights.h"
#include "pagoda/backend/cpu/cpu_ops.h"
#include "pagoda/runner/model_runner.h"
#ifdef PAGODA_HAVE_CUDA
#include "pagoda/backend/cuda/cuda_ops.h"
#endif

namespace pagoda {

std::vector<TokenId> model_eos_token_ids(const LoadedModel& m) {
  if (!m.generation.eos_token_ids.empty()) return m.generation.eos_token_ids;
  if (!m.config.eos_token_ids.empty()) return m.config.eos_token_ids;
  return m.tokenizer ? m.tokenizer->eos_token_ids() : std::vector<TokenId>{};
}

void append_event(CompletionOutput& out, const RequestEvent& e) {
  out.output_ids.insert(out.output_ids.end(), e.new_token_ids.begin(), e.new_token_ids.end());
  out.logprobs.insert(out.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
  if (!e.prompt_logprobs.empty()) out.prompt_logprobs = e.prompt_logprobs;
  out.usage = e.usage;
  if (e.finished) {
    out.finish_reason = e.finish_reason;
    out.error_kind = e.error_kind;
    out.error = e.error;
  }
}

// KV options that are wrong whatever the model: refused before the weights are loaded.
static const LlmOptions& checked_kv_options(const LlmOptions& o) {
  const bool fp8 = o.kv_cache_dtype == "fp8" || o.kv_cache_dtype == "fp8_e4m3";
  if (o.calculate_kv_scales && !fp8) throw Error("--calculate-kv-scales needs --kv-cache-dtype fp8");
  if (o.calculate_kv_scales && o.device == "cuda")
    throw Error("--calculate-kv-scales (one FP8 scale per layer) runs on the CPU backend only; the default scales "
                "per token and head measure as accurate and never saturate (docs/QUANTIZATION.md)");
  return o;
}

// Scheduler options that are wrong whatever the model: refused, with the flags to change, before the weights are
// loaded (SchedulerConfig's validate() sees them again, after the KV pool is sized).
static const LlmOptions& checked_scheduler_options(const LlmOptions& o) {
  if (o.max_long_partial_prefills > 0 && o.long_prefill_token_threshold <= 0)
    throw Error("--max-long-partial-prefills needs --long-prefill-token-threshold (what makes a prefill long)");
  return o;
}

// --quantize-lm-head / --quantize-embeddings: one part of the loaded weights quantized at start-up to `form` (none
// when empty), or kept with a warning when the checkpoint already stores it quantized (a GGUF file's).
template <typename Quantize>
static void quantize_part(LoadedModel& m, const std::string& form, std::string_view option, Weight ModelWeights::*part,
                          Quantize quantize) {
  if (form.empty()) return;
  const auto q = quantizer::parse_weight_quantization(form);
  if (!q) throw Error(fmt::format("unknown {} \"{}\" (fp8, int8, w4 or none)", option, form));
  if (!quantize(m.weights, *q, m.owned))
    spdlog::warn("{} {}: the checkpoint already stores it quantized ({}); kept as it is", option, form,
                 (m.weights.*part).source_format);
}

// Precision-fallback options that are wrong whatever the model: refused before the weights are loaded (an 8B
// model's load and upload take a minute).
static const LlmOptions& checked_fallback_options(const LlmOptions& o) {
  if (o.fallback_quantization.empty() && o.fallback_model.empty()) return o;
  if (!o.fallback_quantization.empty() && !o.fallback_model.empty())
    throw Error("--fallback-quantization and --fallback-model: give one of them");
  if (!(o.fallback.tpot_target_s > 0))
    throw Error("the precision fallback needs --slo-tpot-ms (the P99 inter-token latency it keeps)");
  if (!(o.fallback.window_s > 0) || !std::isfinite(o.fallback.window_s))
    throw Error(fmt::format("--fallback-window-s must be a positive number of seconds, got {}", o.fallback.window_s));
  if (o.fallback_quantization == "awq")
    throw Error("--fallback-quantization awq: AWQ needs calibration text; write the checkpoint with `pagoda quantize "
                "--method awq` and give it as --fallback-model (or use w4: round to nearest at start-up)");
  if (!o.fallback_quantization.empty() && !quantizer::parse_weight_quantization(o.fallback_quantization))
    throw Error(fmt::format("unknown --fallback-quantization '{}' (fp8, int8 or w4)", o.fallback_quantization));
  return o;
}

LLM::LLM(const LlmOptions& o)
    : loaded_(load_model(checked_fallback_options(checked_kv_options(checked_scheduler_options(o))).load)),
      block_size_(o.block_size) {
  const ModelConfig& c = loaded_.config;
  quantize_part(loaded_, o.lm_head_quantization, "--quantize-lm-head", &ModelWeights::lm_head, quantizer::quantize_lm_head);
  quantize_part(loaded_, o.embedding_quantization, "--quantize-embeddings", &ModelWeights::embed_tokens,
                quantizer::quantize_embeddings);
  // As vLLM: a context beyond the model's positions is refused, not quietly cut to them.
  if (o.max_model_len > c.max_position_embeddings && !o.max_model_len_at_most)
    throw Error(fmt::format("--max-model-len {} is larger than the model's context ({} positions, "
                            "max_position_embeddings)", o.max_model_len, c.max_position_embeddings));
  max_model_len_ = o.max_model_len > 0 ? std::min(o.max_model_len, c.max_position_embeddings) : c.max_position_embeddings;
  if (o.device == "cpu") {
    if (!o.use_mmap) copy_weights_into_memory(loaded_);
    ops_ = std::make_unique<CpuOps>(CpuOpsOptions{.num_threads = o.num_threads});
    weights_ = ops_->prepare_weights(loaded_.weights, c, o.load.show_progress);
    if (std::optional<ModelWeights> fallback = fallback_host_weights(o)) fallback_weights_ = *fallback;
    // The arrays prepare_weights replaced by compact forms (backend/cpu/compact_weights.h) or sorted act-order
    // columns (backend/cpu/act_order.h) are freed.
    loaded_.weights = weights_;
    if (const int64_t freed = release_unreferenced_storage(loaded_, {&fallback_weights_}); freed > 0)
      spdlog::info("weights repacked for the CPU's kernels: {} freed", format_memory_size(freed));
  } else if (o.device == "cuda") {
#ifdef PAGODA_HAVE_CUDA
    ops_ = std::make_unique<CudaOps>(CudaOpsOptions{
        .max_num_seqs = o.max_num_seqs, .max_model_len = max_model_len_, .enforce_eager = o.enforce_eager});
    weights_ = ops_->prepare_weights(loaded_.weights, loaded_.config, o.load.show_progress);
    if (std::optional<ModelWeights> fallback = fallback_host_weights(o))
      fallback_weights_ = ops_->prepare_weights(*fallback, loaded_.config, o.load.show_progress, &weights_);
    // The host copies (dummy or converted weights) are no longer needed: the GPU has its own.
    loaded_.weights = ModelWeights{};
    loaded_.owned.clear();
    fallback_loaded_ = LoadedModel{};
#else
    throw Error("--device cuda: this build has no CUDA backend (build with `cmake --preset cuda`)");
#endif
  } else {
    throw Error(fmt::format("unknown --device '{}' (cpu or cuda)", o.device));
  }
  model_ = std::make_unique<LlamaModel>(c, weights_);
  if (!fallback_description_.empty()) {
    fallback_model_ = std::make_unique<LlamaModel>(c, fallback_weights_);
    spdlog::info("precision fallback: {}; steps move to it when the P99 inter-token latency over {:g} s exceeds {:g} ms",
                 fallback_description_, o.fallback.window_s, 1e3 * o.fallback.tpot_target_s);
  }

  kv_dtype_ = kv_cache_dtype(o);
  const int64_t block_bytes = model_->kv_cache_spec(1, o.block_size, kv_dtype_).bytes_per_block();
  num_kv_blocks_ = o.device == "cuda" ? num_blocks_for_gpu(o, block_bytes) : num_blocks_for_host(o, block_bytes);
  if (num_kv_blocks_ < 1)
    throw Error(fmt::format("the KV cache holds no block ({} per block of {} tokens): give it more memory "
                            "(--kv-cache-memory, --gpu-memory-utilization) or lower --max-num-batched-tokens",
                            format_memory_size(block_bytes), o.block_size));
  // As vLLM: a pool that cannot hold one sequence of max_model_len would fail such a request only once it
  // came; refuse to start instead.
  const int64_t kv_tokens = static_cast<int64_t>(num_kv_blocks_) * o.block_size;
  if (kv_tokens < max_model_len_)
    throw Error(fmt::format("max_model_len ({}) is larger than the {} tokens the KV cache can hold ({}): give the "
                            "cache more memory (--kv-cache-memory, --gpu-memory-utilization) or lower --max-model-len",
                            max_model_len_, kv_tokens, format_memory_size(num_kv_blocks_ * block_bytes)));
  spdlog::info("KV cache: {} blocks x {} tokens = {} tokens ({} {}), {:.1f} full-length sequences", num_kv_blocks_,
               o.block_size, static_cast<int64_t>(num_kv_blocks_) * o.block_size,
               format_memory_size(num_kv_blocks_ * block_bytes), kv_dtype_ == DType::kF8E4M3 ? "fp8" : dtype_name(kv_dtype_),
               static_cast<double>(num_kv_blocks_) * o.block_size / max_model_len_);

  if (o.kv_eviction == EvictionPolicyKind::kLruK)
    spdlog::info("prefix-cache eviction: LRU-K, K = {}, correlated-reference period {} ms", o.lru_k.k,
                 o.lru_k.correlated_period_seconds * 1000.0);

  int num_host_blocks = 0;
  if (o.kv_offload_memory > 0) {
    if (!o.enable_prefix_caching) throw Error("--kv-offload-memory needs prefix caching (drop --no-enable-prefix-caching)");
    const int64_t blocks = o.kv_offload_memory / block_bytes;
    if (blocks < 1)
      throw Error(fmt::format("--kv-offload-memory {} holds no KV block ({} per block)", format_memory_size(o.kv_offload_memory),
                              format_memory_size(block_bytes)));
    // The tier is host memory (pinned on the GPU): refuse a size the machine cannot give, with the numbers,
    // rather than fail on the allocation.
    const int64_t available = host_available_memory();
    if (available > 0 && o.kv_offload_memory > available)
      throw Error(fmt::format("--kv-offload-memory {} is more than the {} of memory this machine has available",
                              format_memory_size(o.kv_offload_memory), format_memory_size(available)));
    num_host_blocks = static_cast<int>(std::min<int64_t>(blocks, std::numeric_limits<int>::max() / 2));
    spdlog::info("host KV tier: {} blocks x {} tokens = {} tokens ({}{})", num_host_blocks, o.block_size,
                 static_cast<int64_t>(num_host_blocks) * o.block_size, format_memory_size(num_host_blocks * block_bytes),
                 o.device == "cuda" ? ", pinned" : "");
  }

  EngineOptions eo;
  eo.scheduler = SchedulerConfig{.max_num_seqs = o.max_num_seqs,
                                 .max_num_batched_tokens = std::max(o.max_num_batched_tokens, o.max_num_seqs),
                                 .max_model_len = max_model_len_,
                                 .policy = o.policy,
                                 .slo = o.preemption_slo.value_or(o.slo.value_or(SloTargets{})),
                                 .batch_wait_seconds = o.batch_wait_ms / 1000.0,
                                 .batch_wait_ttft_seconds = o.batch_wait_ttft_ms / 1000.0,
                                 .long_prefill_token_threshold = o.long_prefill_token_threshold,
                                 .max_long_partial_prefills = o.max_long_partial_prefills};
  if (o.batch_wait_ms > 0)
    spdlog::info("batching window: new requests wait up to {:g} ms for company while the engine is idle or decoding{}",
                 o.batch_wait_ms,
                 o.batch_wait_ttft_ms > 0 ? fmt::format(" (and no longer than the {:g} ms TTFT target allows)", o.batch_wait_ttft_ms) : "");
  eo.block_size = o.block_size;
  eo.num_kv_blocks = num_kv_blocks_;
  eo.kv_dtype = kv_dtype_;
  eo.fp8_kv_scales = o.calculate_kv_scales ? Fp8KvScales::kPerLayer : Fp8KvScales::kPerRow;
  eo.enable_prefix_caching = o.enable_prefix_caching;
  eo.kv_eviction = o.kv_eviction;
  eo.lru_k = o.lru_k;
  eo.num_host_kv_blocks = num_host_blocks;
  const double prefetch_ms = o.kv_prefetch_interval_ms < 0 ? LlmOptions::kDefaultPrefetchIntervalMs : o.kv_prefetch_interval_ms;
  if (num_host_blocks > 0) eo.kv_prefetch.max_interval_seconds = prefetch_ms / 1000.0;
  eo.eos_token_ids = model_eos_token_ids(loaded_);
  eo.seed = o.seed;
  eo.slo = o.slo;
  eo.fallback = o.fallback;
  eo.async_scheduling = o.async_scheduling.value_or(o.device == "cuda");
  eo.late_planning = env_flag("PAGODA_LATE_PLANNING", true);
  if (const char* fail = std::getenv("PAGODA_INJECT_STEP_FAILURE")) {
    eo.fail_every_nth_step = std::atoi(fail);
    spdlog::warn("fault injection: every {}th engine step fails (PAGODA_INJECT_STEP_FAILURE)", eo.fail_every_nth_step);
  }
  engine_ = std::make_unique<Engine>(*model_, *ops_, eo, fallback_model_.get());
}

LLM::~LLM() { engine_.reset(); }

std::optional<ModelWeights> LLM::fallback_host_weights(const LlmOptions& o) {
  if (o.fallback_quantization.empty() && o.fallback_model.empty()) return std::nullopt;
  if (!o.fallback_quantization.empty()) {  // checked_fallback_options accepted the name
    const auto q = quantizer::parse_weight_quantization(o.fallback_quantization);
    ModelWeights w = quantizer::quantize_decoder_linears(loaded_.weights, *q, fallback_loaded_.owned);
    fallback_description_ = fmt::format("{} weights quantized at start-up", quantizer::weight_quantization_name(*q));
    return w;
  }
  LoadOptions lo = o.load;
  lo.model_path = o.fallback_model;
  lo.quantization.clear();
  lo.tokenizer_path.clear();
  fallback_loaded_ = load_model(lo);
  const ModelConfig& a = loaded_.config;
  const ModelConfig& b = fallback_loaded_.config;
  if (a.hidden_size != b.hidden_size || a.num_layers != b.num_layers || a.num_heads != b.num_heads ||
      a.num_kv_heads != b.num_kv_heads || a.head_dim != b.head_dim || a.intermediate_size != b.intermediate_size ||
      a.vocab_size != b.vocab_size)
    throw Error(fmt::format("--fallback-model {} is not the served model's shape (hidden {} vs {}, layers {} vs {}, heads "
                            "{}/{} vs {}/{}, intermediate {} vs {}, vocabulary {} vs {})",
                            o.fallback_model, b.hidden_size, a.hidden_size, b.num_layers, a.num_layers, b.num_heads,
                            b.num_kv_heads, a.num_heads, a.num_kv_heads, b.intermediate_size, a.intermediate_size,
                            b.vocab_size, a.vocab_size));
  if (o.device == "cpu" && !o.use_mmap) copy_weights_into_memory(fallback_loaded_);
  // Its decoder linears; the embedding, norms and lm_head stay the served model's.
  ModelWeights w = loaded_.weights;
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& f = fallback_loaded_.weights.layers[l];
    LayerWeights& d = w.layers[l];
    d.wq = f.wq, d.wk = f.wk, d.wv = f.wv, d.wo = f.wo, d.w_gate = f.w_gate, d.w_up = f.w_up, d.w_down = f.w_down;
  }
  const Weight& first = w.layers.empty() ? w.lm_head : w.layers[0].wq;
  fallback_description_ = fmt::format("the linears of {} ({})", o.fallback_model,
                                      !first.source_format.empty() ? std::string(first.source_format)
                                      : first.quantized()          ? std::string(quant_scheme_name(first.scheme))
                                                                   : std::string(dtype_name(first.data.dtype)));
  return w;
}

DType LLM::kv_cache_dtype(const LlmOptions& o) const {
  const std::string& d = o.kv_cache_dtype;
  if (d == "auto" || d.empty()) return ops_->activation_dtype();
  if (d == "fp8" || d == "fp8_e4m3") return DType::kF8E4M3;
  if (d == "bf16") {
    if (o.device != "cuda")
      throw Error("--kv-cache-dtype bf16: the CPU backend keeps its KV cache in fp32 (auto), fp16 or fp8");
    return DType::kBF16;
  }
  if (d == "fp16") {
    if (o.device == "cuda") throw Error("--kv-cache-dtype fp16: the GPU keeps its KV cache in bf16 (auto) or fp8");
    return DType::kF16;
  }
  throw Error(fmt::format("unknown --kv-cache-dtype '{}' (auto, bf16, fp16, fp8 or fp8_e4m3)", d));
}

int LLM::num_blocks_for_host(const LlmOptions& o, int64_t block_bytes) const {
  int64_t kv_bytes = o.kv_cache_memory;
  if (kv_bytes <= 0) {
    const int64_t wanted = static_cast<int64_t>(o.max_num_seqs) * ((max_model_len_ + o.block_size - 1) / o.block_size) * block_bytes;
    const int64_t available = host_available_memory();
    kv_bytes = available > 0 ? std::min(wanted, available / 4) : wanted;
  }
  return static_cast<int>(kv_bytes / block_bytes);
}

// The largest step (max_num_batched_tokens tokens, logits for all of them, and the largest decode step)
// runs once with a small cache; what gpu_memory_utilization leaves after that peak becomes the KV pool.
int LLM::num_blocks_for_gpu(const LlmOptions& o, int64_t block_bytes) {
#ifdef PAGODA_HAVE_CUDA
  auto& cuda = static_cast<CudaOps&>(*ops_);
  const int probe_tokens = std::max(o.max_num_batched_tokens, o.max_num_seqs);
  {
    const int probe_blocks = (probe_tokens + o.block_size - 1) / o.block_size + 1;
    ModelRunner probe(*model_, *ops_, model_->kv_cache_spec(probe_blocks, o.block_size, kv_dtype_), 0,
                      fallback_model_.get());
    probe.profile_run(probe_tokens);
    cuda.synchronize();
  }
  const GpuMemoryInfo mem = cuda.memory_info();
  const int64_t used = mem.total - mem.free;
  const int64_t budget = static_cast<int64_t>(o.gpu_memory_utilization * static_cast<double>(mem.total));
  // Graphs and allocator slack: a little is kept back beyond the measured peak.
  const int64_t reserve = int64_t{256} << 20;
  const int64_t kv_bytes = o.kv_cache_memory > 0 ? o.kv_cache_memory : budget - used - reserve;
  spdlog::info("GPU memory: {} total, {} in use after weights and the largest step; KV budget {} "
               "(--gpu-memory-utilization {})",
               format_memory_size(mem.total), format_memory_size(used), format_memory_size(std::max<int64_t>(kv_bytes, 0)),
               o.gpu_memory_utilization);
  if (kv_bytes > mem.free - reserve)
    throw Error(fmt::format("the KV cache needs {} but only {} of GPU memory is free",
                            format_memory_size(kv_bytes), format_memory_size(mem.free)));
  return static_cast<int>(std::max<int64_t>(kv_bytes, 0) / block_bytes);
#else
  return 0;
#endif
}

std::vector<CompletionOutput> LLM::generate(const std::vector<GenerateRequest>& requests) {
  std::vector<CompletionOutput> outputs(requests.size());
  std::mutex mutex;
  std::condition_variable done;
  size_t num_done = 0;
  std::vector<Engine::Submission> submissions;
  submissions.reserve(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    outputs[i].prompt_ids = requests[i].prompt_ids;
    submissions.push_back({requests[i], [&, i](const RequestEvent& e) {
                             append_event(outputs[i], e);  // only the engine thread writes, until it signals done
                             if (e.finished) {
                               std::lock_guard lock(mutex);
                               ++num_done;
                               done.notify_one();
                             }
                           }});
  }
  engine_->submit_all(std::move(submissions));  // at once: the same steps every run
  std::unique_lock lock(mutex);
  done.wait(lock, [&] { return num_done == requests.size(); });
  return outputs;
}

}  // namespace pagoda
