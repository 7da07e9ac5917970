// `pagoda bench latency`: a batch of --batch-size random prompts of --input-len tokens generating
// --output-len tokens each (ignore_eos), run --num-iters times after --num-iters-warmup. Per iteration:
// time to first token of the batch (prefill), time per output token after it (decode step), end to end.
#include "pagoda/cli/bench_latency.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>

#include "pagoda/bench/percentile.h"
#include "pagoda/cli/engine_options.h"
#include "pagoda/cli/random_tokens.h"

namespace pagoda::cli {
namespace {

struct LatencyOptions {
  EngineCliOptions engine;
  int batch_size = 1;
  int input_len = 128;
  int output_len = 128;
  int num_iters = 5;
  int num_iters_warmup = 1;
  uint64_t seed = 0;
  bool json = false;
};

struct Iteration {
  double ttft = 0;  // seconds from submit to the last request's first token
  double e2e = 0;   // seconds from submit to the last request's end
};

using Clock = std::chrono::steady_clock;

Iteration run_batch(LLM& llm, const std::vector<GenerateRequest>& requests) {
  std::mutex mutex;
  std::condition_variable done;
  size_t finished = 0;
  std::vector<Clock::time_point> first(requests.size()), last(requests.size());
  std::vector<bool> seen(requests.size(), false);
  const Clock::time_point start = Clock::now();
  for (size_t i = 0; i < requests.size(); ++i) {
    llm.engine().submit(requests[i], [&, i](const RequestEvent& e) {
      std::lock_guard lock(mutex);
      if (!e.new_token_ids.empty() && !seen[i]) {
        seen[i] = true;
        first[i] = e.time;
      }
      if (e.finished) {
        last[i] = e.time;
        ++finished;
        done.notify_one();
      }
    });
  }
  std::unique_lock lock(mutex);
  done.wait(lock, [&] { return finished == requests.size(); });
  auto seconds = [&](Clock::time_point t) { return std::chrono::duration<double>(t - start).count(); };
  Iteration it;
  for (size_t i = 0; i < requests.size(); ++i) {
    it.ttft = std::max(it.ttft, seconds(first[i]));
    it.e2e = std::max(it.e2e, seconds(last[i]));
  }
  return it;
}

void run_latency(const LatencyOptions& o) {
  LLM llm(o.engine.llm_options());
  const int vocab = llm.model().config.vocab_size;
  RandomTokens tokens(vocab, o.seed);
  auto make_batch = [&] {  // fresh prompts every iteration: no prefix-cache hits
    std::vector<GenerateRequest> requests(static_cast<size_t>(o.batch_size));
    for (GenerateRequest& r : requests) {
      tokens.append(r.prompt_ids, o.input_len);
      r.params.temperature = 0.0;
      r.params.ignore_eos = true;
      r.params.max_tokens = o.output_len;
    }
    return requests;
  };
  for (int i = 0; i < o.num_iters_warmup; ++i) run_batch(llm, make_batch());
  std::vector<double> ttft, tpot, e2e;
  for (int i = 0; i < o.num_iters; ++i) {
    const Iteration it = run_batch(llm, make_batch());
    ttft.push_back(it.ttft);
    e2e.push_back(it.e2e);
    tpot.push_back(o.output_len > 1 ? (it.e2e - it.ttft) / (o.output_len - 1) : 0.0);
  }
  using bench::percentile;  // numpy's linear percentiles, as bench serve reports them
  auto summary = [](const std::vector<double>& v) {
    const bench::Distribution d = bench::describe(v, {90, 99});
    return nlohmann::json{{"mean", d.mean}, {"median", d.median}, {"p90", d.percentiles[0].second},
                          {"p99", d.percentiles[1].second}, {"min", d.min}};
  };
  const double median_tpot = percentile(tpot, 50);
  nlohmann::json j = {
      {"device", o.engine.device},
      {"batch_size", o.batch_size},
      {"input_len", o.input_len},
      {"output_len", o.output_len},
      {"num_iters", o.num_iters},
      {"ttft_seconds", summary(ttft)},
      {"tpot_seconds", summary(tpot)},
      {"e2e_seconds", summary(e2e)},
      {"decode_tokens_per_second_per_sequence", median_tpot > 0 ? 1.0 / median_tpot : 0.0},
      {"decode_tokens_per_second", median_tpot > 0 ? o.batch_size / median_tpot : 0.0},
      {"prefill_tokens_per_second", o.batch_size * o.input_len / percentile(ttft, 50)},
  };
  if (o.json) {
    std::puts(j.dump(2).c_str());
    return;
  }
  std::printf("batch %d, %d in / %d out, %d iterations (median):\n", o.batch_size, o.input_len, o.output_len,
              o.num_iters);
  std::printf("  time to first token %.2f ms (%.0f prompt tokens/s)\n", 1e3 * percentile(ttft, 50),
              j["prefill_tokens_per_second"].get<double>());
  std::printf("  time per output token %.3f ms (%.1f tokens/s per sequence, %.1f in all)\n", 1e3 * median_tpot,
              j["decode_tokens_per_second_per_sequence"].get<double>(), j["decode_tokens_per_second"].get<double>());
  std::printf("  end to end %.2f ms\n", 1e3 * percentile(e2e, 50));
}

}  // namespace

void add_bench_latency_command(CLI::App& bench) {
  auto opts = std::make_shared<LatencyOptions>();
  CLI::App* cmd = bench.add_subcommand("latency", "Latency of one batch: prefill and per-token decode (like vllm bench latency)");
  opts->engine.add_to(*cmd);
  cmd->add_option("--batch-size", opts->batch_size, "requests in the batch (default 1)")->check(CLI::PositiveNumber);
  cmd->add_option("--input-len", opts->input_len, "prompt tokens per request (default 128)")->check(CLI::PositiveNumber);
  cmd->add_option("--output-len", opts->output_len, "generated tokens per request (default 128)")->check(CLI::PositiveNumber);
  cmd->add_option("--num-iters", opts->num_iters, "timed iterations (default 5)")->check(CLI::PositiveNumber);
  cmd->add_option("--num-iters-warmup", opts->num_iters_warmup, "untimed iterations first (default 1)");
  cmd->add_option("--seed", opts->seed, "seed for the random prompts");
  cmd->add_flag("--json", opts->json, "print the result as JSON");
  cmd->callback([opts] { run_latency(*opts); });
}

}  // namespace pagoda::cli
