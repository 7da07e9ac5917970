// The prompts of a serving benchmark. random: token-id prompts of random length around --random-input-len
// (uniform within +-range_ratio, as vllm bench serve draws them) drawn from a token pool; prefix: the
// same, each prompt starting with one of --num-prefix-groups shared prefixes of --prefix-len tokens
// (requests of a group share a long system prompt, the prefix cache's case); jsonl: a file of
// {"prompt": "..." | [ids], "output_len"?: N} lines. multi-tenant: multi_tenant.h.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "pagoda/core/types.h"

namespace pagoda::bench {

struct BenchPrompt {
  std::vector<TokenId> ids;  // a token-id prompt (when !is_text)
  std::string text;          // a text prompt
  bool is_text = false;
  int prompt_len = -1;       // expected prompt tokens; -1: unknown (text from a file)
  int output_len = 128;      // max_tokens
  int group = -1;            // prefix dataset: the shared prefix it starts with
  int tenant = -1;           // multi-tenant dataset: its tenant (an index into the workload's tenants)
};

struct SyntheticOptions {
  int num_prompts = 1000;
  int input_len = 1024;      // random part of each prompt (after the prefix)
  int output_len = 128;
  double range_ratio = 0;    // lengths uniform in [len * (1 - r), len * (1 + r)]
  int prefix_len = 0;        // > 0: the prefix dataset
  int num_prefix_groups = 1;
  uint64_t seed = 0;
};

// vLLM's length draw: uniform integers in [floor(len * (1 - ratio)), ceil(len * (1 + ratio))], at least 1.
int draw_length(std::mt19937_64& rng, int len, double ratio);
// `n` ids drawn uniformly from `pool` (non-empty).
std::vector<TokenId> random_ids(std::mt19937_64& rng, const std::vector<TokenId>& pool, int n);

// Throws pagoda::InvalidRequest for lengths < 1, a range ratio outside [0, 1) or an empty pool.
std::vector<BenchPrompt> synthetic_prompts(const SyntheticOptions& options, const std::vector<TokenId>& pool);

// `num_prompts` prompts from the file, cycling through it when it has fewer lines. Lines without an
// output length get `default_output_len`. Throws pagoda::InvalidRequest naming the file and line.
std::vector<BenchPrompt> jsonl_prompts(const std::string& path, int num_prompts, int default_output_len);

}  // namespace pagoda::bench
