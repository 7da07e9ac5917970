// `pagoda bench throughput`: offline throughput on random prompts, as `vllm bench throughput` measures
// it: all requests submitted at once, ignore_eos, fixed input and output lengths, optional shared prefix.
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>

#include "pagoda/cli/bench_latency.h"
#include "pagoda/cli/commands.h"
#include "pagoda/cli/engine_options.h"
#include "pagoda/cli/number_checks.h"
#include "pagoda/cli/random_tokens.h"
#include "pagoda/core/error.h"

namespace pagoda::cli {
namespace {

struct ThroughputOptions {
  EngineCliOptions engine;
  int num_prompts = 1000;
  int input_len = 128;
  int output_len = 128;
  int prefix_len = 0;
  uint64_t seed = 0;
  bool json = false;
};

void run_throughput(const ThroughputOptions& o) {
  if (o.prefix_len < 0 || o.prefix_len > o.input_len)
    throw InvalidRequest("--prefix-len must be between 0 and --input-len");
  LLM llm(o.engine.llm_options());
  const int vocab = llm.model().config.vocab_size;
  RandomTokens tokens(vocab, o.seed);
  std::vector<TokenId> prefix;
  tokens.append(prefix, o.prefix_len);
  std::vector<GenerateRequest> requests(static_cast<size_t>(o.num_prompts));
  for (GenerateRequest& r : requests) {
    r.prompt_ids = prefix;
    tokens.append(r.prompt_ids, o.input_len - o.prefix_len);
    r.params.temperature = 0.0;
    r.params.ignore_eos = true;
    r.params.max_tokens = o.output_len;
  }
  const EngineStats before = llm.engine().stats();
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<CompletionOutput> outputs = llm.generate(requests);
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const EngineStats after = llm.engine().stats();

  int64_t prompt_tokens = 0, output_tokens = 0;
  int failed = 0;
  for (const CompletionOutput& out : outputs) {
    prompt_tokens += out.usage.prompt_tokens;
    output_tokens += static_cast<int64_t>(out.output_ids.size());
    failed += out.finish_reason == FinishReason::kError || out.finish_reason == FinishReason::kAborted;
  }
  const uint64_t queried = after.prefix_cache_queries - before.prefix_cache_queries;
  const uint64_t hits = after.prefix_cache_hits - before.prefix_cache_hits;
  nlohmann::json j = {
      {"num_prompts", o.num_prompts},
      {"input_len", o.input_len},
      {"output_len", o.output_len},
      {"prefix_len", o.prefix_len},
      {"max_num_seqs", o.engine.max_num_seqs},
      {"max_num_batched_tokens", o.engine.max_num_batched_tokens},
      {"elapsed_time", elapsed},
      {"num_failed", failed},
      {"requests_per_second", o.num_prompts / elapsed},
      {"input_tokens_per_second", prompt_tokens / elapsed},
      {"output_tokens_per_second", output_tokens / elapsed},
      {"total_tokens_per_second", (prompt_tokens + output_tokens) / elapsed},
      {"prefix_cache_hit_rate", queried ? static_cast<double>(hits) / static_cast<double>(queried) : 0.0},
      {"num_preemptions", after.num_preemptions - before.num_preemptions},
      {"num_steps", after.num_steps - before.num_steps},
      {"kv_cache_tokens", llm.num_kv_tokens()},
  };
  if (o.json) {
    std::puts(j.dump(2).c_str());
    return;
  }
  std::printf("Throughput: %.2f requests/s, %.1f total tokens/s, %.1f output tokens/s (input %.1f tokens/s)\n",
              j["requests_per_second"].get<double>(), j["total_tokens_per_second"].get<double>(),
              j["output_tokens_per_second"].get<double>(), j["input_tokens_per_second"].get<double>());
  std::printf("Elapsed %.2f s, %d prompts, prefix-cache hit rate %.1f%%, %llu preemptions, %d failed\n", elapsed,
              o.num_prompts, 100.0 * j["prefix_cache_hit_rate"].get<double>(),
              static_cast<unsigned long long>(j["num_preemptions"].get<uint64_t>()), failed);
}

}  // namespace

void add_bench_command(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks");
  bench->require_subcommand(1);
  auto opts = std::make_shared<ThroughputOptions>();
  CLI::App* cmd = bench->add_subcommand("throughput", "Offline throughput on random prompts (like vllm bench throughput)");
  opts->engine.add_to(*cmd);
  cmd->add_option("--num-prompts", opts->num_prompts, "requests (default 1000)")->check(kPositive);
  cmd->add_option("--input-len", opts->input_len, "prompt tokens per request (default 128)")->check(kPositive);
  cmd->add_option("--output-len", opts->output_len, "generated tokens per request (default 128)")->check(kPositive);
  cmd->add_option("--prefix-len", opts->prefix_len, "leading prompt tokens shared by every request (default 0)");
  cmd->add_option("--seed", opts->seed, "seed for the random prompts");
  cmd->add_flag("--json", opts->json, "print the result as JSON");
  cmd->callback([opts] { run_throughput(*opts); });
  add_bench_latency_command(*bench);
  add_bench_serve_command(*bench);
}

}  // namespace pagoda::cli
