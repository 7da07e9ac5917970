// Engine option registration and conversion.
#include "pagoda/cli/engine_options.h"

#include <cmath>
#include <fmt/format.h>

#include "pagoda/cli/number_checks.h"
#include "pagoda/core/error.h"
#include "pagoda/core/memory_size.h"

namespace pagoda::cli {

void EngineCliOptions::add_to(CLI::App& cmd) {
  model.add_to(cmd);
  cmd.add_option("--max-num-seqs", max_num_seqs, "sequences per step (default 256)")->check(kPositive);
  cmd.add_option("--max-num-batched-tokens", max_num_batched_tokens, "tokens per step (default 2048)")
      ->check(kPositive);
  cmd.add_option("--long-prefill-token-threshold", long_prefill_token_threshold,
                 "the most prompt tokens one request computes a step, as vLLM's: a longer prompt goes in chunks of "
                 "this many and the rest of the step's budget goes to other requests, so one long prompt does not "
                 "fill a step while short ones wait (default 0: off)")
      ->check(kNonNegative);
  cmd.add_option("--max-long-partial-prefills", max_long_partial_prefills,
                 "with --long-prefill-token-threshold, the most requests a step gives a chunk to while more than that "
                 "threshold of their prompt is left, as vLLM's: the others wait and shorter prompts go ahead of them "
                 "(default 0: no limit)")
      ->check(kNonNegative);
  cmd.add_option("--max-model-len", max_model_len, "context length, at most the model's (default: the model's)")
      ->check(kPositive);
  cmd.add_option("--block-size", block_size, "KV cache block size in tokens, 1 to 1024 (default 16)")
      ->check(CLI::Range(1, 1024));
  cmd.add_option("--kv-cache-memory", kv_cache_memory,
                 "KV cache size, e.g. 4MiB or 2GiB (default: max-num-seqs full sequences, at most 25% of free RAM)");
  cmd.add_option("--kv-cache-dtype", kv_cache_dtype,
                 "auto (fp32 on the CPU, bf16 on the GPU) | bf16 (GPU) | fp16 (CPU: llama.cpp's default, half of "
                 "fp32's bytes) | fp8 | fp8_e4m3: fp8 stores e4m3 codes with a power-of-two scale per token and KV head "
                 "(about twice the tokens of bf16)")
      ->check(CLI::IsMember({"auto", "bf16", "fp16", "fp8", "fp8_e4m3"}));
  cmd.add_flag("--calculate-kv-scales", calculate_kv_scales,
               "with --kv-cache-dtype fp8: one scale per layer for K and one for V, from the first batch's amax (as "
               "vLLM), instead of one per token and KV head; CPU only; later values beyond the first batch's range "
               "saturate (docs/QUANTIZATION.md)");
  cmd.add_flag("--no-enable-prefix-caching", no_prefix_caching, "turn automatic prefix caching off");
  cmd.add_option("--kv-eviction", kv_eviction,
                 "which cached block a full KV cache gives up: lru (default; least recently freed first) or lru-k "
                 "(the oldest K-th most recent use first, blocks used fewer than K times before them, ages divided "
                 "by the tenant's weight: blocks used K times outlive one-off prompts)")
      ->check(CLI::IsMember({"lru", "lru-k"}));
  cmd.add_option("--lru-k", lru_k,
                 fmt::format("with --kv-eviction lru-k: K, 1 to {} (default 2; 1 is LRU by last use)", LruKOptions::kMaxK))
      ->check(CLI::Range(1, LruKOptions::kMaxK));
  cmd.add_option("--lru-k-correlated-ms", lru_k_correlated_ms,
                 "with --kv-eviction lru-k: uses of a block less than this many ms after the first of a burst count "
                 "as one (default 10: the uses within one scheduling step, such as a request's n > 1 siblings)");
  cmd.add_option("--kv-offload-memory", kv_offload_memory,
                 "host memory for a second KV tier, e.g. 32GiB (default none): cached blocks the KV cache evicts are "
                 "copied there (pinned memory on the GPU) and copied back on a prefix hit instead of recomputed");
  cmd.add_option("--kv-prefetch-interval-ms", kv_prefetch_interval_ms,
                 fmt::format("with --kv-offload-memory: a prompt prefix requested 3 times at most this many ms apart is "
                             "periodic, and its blocks come back from the host half an interval before its next request "
                             "(default {:g}; 0: no prefetch)", LlmOptions::kDefaultPrefetchIntervalMs))
      ->check(kNonNegative);
  cmd.add_option("--scheduling-policy", policy,
                 "fcfs (default), priority (lower values first, then arrival) or slo (served as priority, admitting first "
                 "within a priority the requests that can still make --slo-ttft-ms / --slo-tpot-ms; when KV "
                 "blocks run out, preempts the lowest priority with the most estimated remaining tokens, from "
                 "max_tokens and the tenant's observed output lengths, sparing requests already past --slo-ttft-ms "
                 "/ --slo-tpot-ms) or fair (decodes as priority; within a priority, prompt work goes first to the tenant "
                 "that has had the fewest computed tokens divided by its --tenants-file weight, so tenants share the "
                 "engine by weight and a light tenant is served at once while another floods; preempts from the "
                 "tenant with the most)")
      ->check(CLI::IsMember({"fcfs", "priority", "slo", "fair"}));
  cmd.add_option("--batch-controller", batch_controller,
                 "static (default: --max-num-batched-tokens every step) or adaptive (each step's budget from the "
                 "learned step time and --slo-tpot-ms / --slo-ttft-ms)")
      ->check(CLI::IsMember({"static", "adaptive"}));
  cmd.add_option("--slo-ttft-ms", slo_ttft_ms,
                 "time-to-first-token target for --batch-controller adaptive and --scheduling-policy slo, and one the "
                 "precision fallback watches (0: none)")
      ->check(kNonNegative);
  cmd.add_option("--slo-tpot-ms", slo_tpot_ms,
                 "time-per-output-token target for --batch-controller adaptive and --scheduling-policy slo (0: none)")
      ->check(kNonNegative);
  cmd.add_option("--batch-wait-ms", batch_wait_ms,
                 "TTL batching window: while the engine is idle or only decoding, a new request waits up to this long "
                 "(from its arrival) for others to be prefilled with, going at once when their prompts fill a step; "
                 "never past --slo-ttft-ms less the predicted time to its first token (default 0: off; "
                 "docs/PERFORMANCE.md has where it pays)")
      ->check(CLI::Range(0.0, 60000.0));
  cmd.add_option("--fallback-quantization", fallback_quantization,
                 "automatic precision fallback: a second copy of the weights, the decoder linears quantized at start-up "
                 "(fp8: W8A8 per channel and token; int8: W8A16 per channel; w4: W4A16 groups of 128), which steps "
                 "run on while the P99 time per output token over --fallback-window-s exceeds --slo-tpot-ms (or the "
                 "P99 time to first token --slo-ttft-ms, when given), back to the served weights once they are "
                 "predicted within 80% of it (and to take the arriving prompts in 80% of the time the decodes leave "
                 "them) (default none)")
      ->check(CLI::IsMember({"fp8", "int8", "w4", "awq"}));
  cmd.add_option("--fallback-model", fallback_model,
                 "as --fallback-quantization, with the linears of this quantized checkpoint of the same model (AWQ, GPTQ, "
                 "compressed-tensors, FP8, GGUF)");
  cmd.add_option("--fallback-window-s", fallback_window_s,
                 "the sliding window of the precision fallback's P99, in seconds (default 60)")
      ->check(kPositive);
  cmd.add_option("--engine-seed", seed, "seed for requests that give none (default: random)")->check(kUint64);
  cmd.add_option("--device", device, "cpu (default) or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  cmd.add_option("--gpu-memory-utilization", gpu_memory_utilization,
                 "CUDA: share of GPU memory for weights, activations and the KV cache (default 0.9)")
      ->check(CLI::Range(0.01, 1.0));
  cmd.add_flag("--enforce-eager", enforce_eager, "CUDA: run every step eagerly (no CUDA graphs)");
  auto* on = cmd.add_flag_callback("--async-scheduling", [this] { async_scheduling = true; },
                                   "plan each step while the previous one runs on the device (the default with "
                                   "--device cuda; the same outputs either way)");
  auto* off = cmd.add_flag_callback("--no-async-scheduling", [this] { async_scheduling = false; },
                                    "plan each step after the previous one's tokens are back (the default on the CPU)");
  on->excludes(off);
  cmd.add_flag("--mmap", mmap, "compute from the checkpoint's file mapping instead of a copy in memory (less RAM)");
}

LlmOptions EngineCliOptions::llm_options() const {
  LlmOptions o;
  o.load = model.load_options();
  o.lm_head_quantization = model.quantize_lm_head == "none" ? "" : model.quantize_lm_head;
  o.embedding_quantization = model.quantize_embeddings == "none" ? "" : model.quantize_embeddings;
  o.num_threads = model.threads;
  o.max_num_seqs = max_num_seqs;
  o.max_num_batched_tokens = max_num_batched_tokens;
  o.long_prefill_token_threshold = long_prefill_token_threshold;
  o.max_long_partial_prefills = max_long_partial_prefills;
  o.max_model_len = max_model_len;
  o.block_size = block_size;
  o.kv_cache_memory = kv_cache_memory.empty() ? 0 : parse_memory_size(kv_cache_memory);
  o.kv_offload_memory = kv_offload_memory.empty() ? 0 : parse_memory_size(kv_offload_memory);
  if (kv_prefetch_interval_ms && o.kv_offload_memory == 0) throw Error("--kv-prefetch-interval-ms needs --kv-offload-memory");
  if (kv_prefetch_interval_ms) o.kv_prefetch_interval_ms = *kv_prefetch_interval_ms;
  o.kv_cache_dtype = kv_cache_dtype;
  o.calculate_kv_scales = calculate_kv_scales;
  o.enable_prefix_caching = !no_prefix_caching;
  o.kv_eviction = kv_eviction == "lru-k" ? EvictionPolicyKind::kLruK : EvictionPolicyKind::kLru;
  if (o.kv_eviction != EvictionPolicyKind::kLruK && (lru_k || lru_k_correlated_ms))
    throw Error("--lru-k and --lru-k-correlated-ms need --kv-eviction lru-k");
  if (lru_k) o.lru_k.k = *lru_k;
  if (lru_k_correlated_ms) {
    if (!(*lru_k_correlated_ms >= 0) || !std::isfinite(*lru_k_correlated_ms))
      throw Error(fmt::format("--lru-k-correlated-ms must be a number of milliseconds >= 0, got {}", *lru_k_correlated_ms));
    o.lru_k.correlated_period_seconds = *lru_k_correlated_ms / 1000.0;
  }
  validate(o.lru_k);
  o.policy = parse_scheduling_policy(policy);
  const SloTargets targets{.ttft_seconds = slo_ttft_ms / 1000.0, .tpot_seconds = slo_tpot_ms / 1000.0};
  if (batch_controller == "adaptive") {
    if (!(slo_tpot_ms > 0)) throw Error("--batch-controller adaptive needs --slo-tpot-ms (the step-time target it keeps)");
    o.slo = targets;
  }
  if (o.policy == SchedulingPolicy::kSlo) {
    o.preemption_slo = targets;
  }
  const bool fallback = !fallback_quantization.empty() || !fallback_model.empty();
  if (batch_controller != "adaptive" && o.policy != SchedulingPolicy::kSlo && !fallback && !(batch_wait_ms > 0) &&
      (slo_ttft_ms > 0 || slo_tpot_ms > 0))
    throw Error("--slo-ttft-ms and --slo-tpot-ms need --batch-controller adaptive, --scheduling-policy slo, a precision "
                "fallback (--fallback-quantization, --fallback-model) or a batching window (--batch-wait-ms)");
  o.batch_wait_ms = batch_wait_ms;
  o.batch_wait_ttft_ms = batch_wait_ms > 0 ? slo_ttft_ms : 0;
  if (fallback && !(slo_tpot_ms > 0))
    throw Error("--fallback-quantization and --fallback-model need --slo-tpot-ms (the P99 time per output token they keep)");
  o.fallback_quantization = fallback_quantization;
  o.fallback_model = fallback_model;
  o.fallback = FallbackOptions{.tpot_target_s = slo_tpot_ms / 1000.0, .ttft_target_s = slo_ttft_ms / 1000.0,
                               .window_s = fallback_window_s};
  o.seed = seed;
  o.use_mmap = mmap;
  o.device = device;
  o.gpu_memory_utilization = gpu_memory_utilization;
  o.enforce_eager = enforce_eager;
  o.async_scheduling = async_scheduling;
  return o;
}

}  // namespace pagoda::cli
