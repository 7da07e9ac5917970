// Engine options shared by the subcommands that run requests (generate, bench, serve), named as vLLM's.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

#include "pagoda/cli/model_options.h"
#include "pagoda/engine/llm.h"

namespace pagoda::cli {

struct EngineCliOptions {
  ModelOptions model;
  int max_num_seqs = 256;
  int max_num_batched_tokens = 2048;
  int long_prefill_token_threshold = 0;
  int max_long_partial_prefills = 0;
  int max_model_len = 0;
  int block_size = 16;
  std::string kv_cache_memory;  // e.g. "4MiB"; empty: sized automatically
  std::string kv_offload_memory;  // the host KV tier, e.g. "32GiB"; empty: none
  std::optional<double> kv_prefetch_interval_ms;
  std::string kv_cache_dtype = "auto";
  bool calculate_kv_scales = false;
  bool no_prefix_caching = false;
  std::string kv_eviction = "lru";  // lru | lru-k
  std::optional<int> lru_k;         // unset: LruKOptions' default (2)
  std::optional<double> lru_k_correlated_ms;  // unset: LruKOptions' default (10 ms)
  std::string policy = "fcfs";
  std::string batch_controller = "static";  // static | adaptive (sched/batch_controller.h)
  double slo_ttft_ms = 0, slo_tpot_ms = 0;   // 0: no target
  double batch_wait_ms = 0;                  // 0: no batching window
  std::string fallback_quantization;  // fp8 | int8 | w4; empty: no precision fallback
  std::string fallback_model;         // a quantized checkpoint of the served model, as the fallback
  double fallback_window_s = 60;
  uint64_t seed = 0;
  bool mmap = false;
  std::string device = "cpu";
  double gpu_memory_utilization = 0.9;
  bool enforce_eager = false;
  std::optional<bool> async_scheduling;  // unset: the device's default

  void add_to(CLI::App& cmd);
  LlmOptions llm_options() const;
};

}  // namespace pagoda::cli
