// `pagoda bench serve`: load-test an OpenAI-compatible server the way `vllm bench serve` does (same
// options where they exist, same table, the same summary keys in the JSON result).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>

#include "pagoda/bench/phases.h"
#include "pagoda/bench/report.h"
#include "pagoda/bench/serve_benchmark.h"
#include "pagoda/bench/summary.h"
#include "pagoda/bench/tenant_summary.h"
#include "pagoda/bench/tenants.h"
#include "pagoda/cli/commands.h"
#include "pagoda/cli/number_checks.h"
#include "pagoda/core/error.h"

namespace pagoda::cli {
namespace {

struct BenchServeCli {
  bench::ServeBenchmarkOptions run;
  std::string request_rate = "inf";
  std::string request_rate_schedule;  // "RATE:SECONDS,..."
  std::string extra_body;
  std::vector<std::string> goodput;
  std::string percentiles = "50,90,99";
  std::string json_file;
  std::string label;
  std::string write_tenants_file;  // multi-tenant: write the tenants file and exit
  bool no_progress = false;
  std::string host = "127.0.0.1";
  int port = 8000;
};

double parse_rate(const std::string& text) {
  if (text == "inf" || text == "Inf" || text == "infinity") return std::numeric_limits<double>::infinity();
  try {
    size_t used = 0;
    const double r = std::stod(text, &used);
    if (used == text.size() && r > 0 && std::isfinite(r)) return r;
  } catch (const std::logic_error&) {
  }
  throw InvalidRequest("--request-rate " + text + ": expected a positive number of requests per second, or inf");
}

std::vector<double> parse_percentiles(const std::string& text) {
  std::vector<double> qs;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(pos, end - pos);
    try {
      size_t used = 0;
      const double q = std::stod(item, &used);
      if (used != item.size() || !(q > 0 && q < 100)) throw std::invalid_argument(item);
      qs.push_back(q);
    } catch (const std::logic_error&) {
      throw InvalidRequest("--metric-percentiles " + text + ": expected numbers in (0, 100) separated by commas");
    }
    pos = end + 1;
  }
  return qs;
}

// --mt-write-tenants-file: the tenants file for `pagoda serve --tenants-file`, then no benchmark.
void write_tenants_file(const BenchServeCli& c) {
  std::vector<bench::BenchTenant> tenants = bench::bench_tenants(c.run.multi_tenant.num_tenants);
  for (bench::BenchTenant& t : tenants) {
    if (t.kind == bench::TenantKind::kNoisy) {
      t.prompt_tokens_per_step = c.run.multi_tenant.noisy_prompt_tokens_per_step;
      t.kv_cap = c.run.multi_tenant.noisy_kv_cap;
    }
    if (t.name == "tenant-0") t.kv_share = c.run.multi_tenant.weighted_kv_share;  // the weighted tenant
  }
  std::ofstream out(c.write_tenants_file);
  out << bench::tenants_file_json(tenants).dump(2) << "\n";
  if (!out) throw Error(c.write_tenants_file + ": cannot write the tenants file");
  std::printf("wrote %zu tenants to %s (pagoda serve --tenants-file %s)\n", tenants.size(), c.write_tenants_file.c_str(),
              c.write_tenants_file.c_str());
}

void run_bench_serve(BenchServeCli& c) {
  if (!c.write_tenants_file.empty()) return write_tenants_file(c);
  if (c.run.base_url.empty()) c.run.base_url = fmt::format("http://{}:{}", c.host, c.port);
  bench::MultiTenantOptions& mt = c.run.multi_tenant;
  if (c.run.dataset == "multi-tenant" && mt.noisy_input_len == 0)
    mt.noisy_input_len = 2 * (c.run.synthetic.prefix_len + c.run.synthetic.input_len);
  c.run.request_rate = parse_rate(c.request_rate);
  if (!c.request_rate_schedule.empty()) {
    try {
      c.run.rate_schedule = bench::parse_rate_schedule(c.request_rate_schedule);
    } catch (const std::invalid_argument& e) {
      throw InvalidRequest(std::string("--request-rate-schedule ") + e.what());
    }
    if (c.request_rate != "inf") throw InvalidRequest("give --request-rate or --request-rate-schedule, not both");
  }
  if (!c.extra_body.empty()) {
    c.run.extra_body = nlohmann::json::parse(c.extra_body, nullptr, /*allow_exceptions=*/false);
    if (!c.run.extra_body.is_object()) throw InvalidRequest("--extra-body must be a JSON object");
  }
  if (c.run.api_key.empty())
    if (const char* key = std::getenv("OPENAI_API_KEY")) c.run.api_key = key;
  c.run.progress = !c.no_progress;
  const bench::GoodputSlo slo = bench::parse_goodput(c.goodput);
  const std::vector<double> percentiles = parse_percentiles(c.percentiles);
  c.run.validate();
  std::ofstream json_out;
  if (!c.json_file.empty()) {  // fail before the run, not after it
    json_out.open(c.json_file);
    if (!json_out) throw Error(c.json_file + ": cannot write the result file");
  }
  const bench::ServeBenchmarkRun run = bench::run_serve_benchmark(c.run);
  const bench::Summary summary = bench::summarize(run.records, run.duration, slo, percentiles);
  bench::print_report(stdout, c.run, slo, summary);
  std::vector<bench::PhaseSummary> phases;
  if (!c.run.rate_schedule.empty()) {
    phases = bench::summarize_phases(run.records, c.run.rate_schedule, slo, percentiles);
    bench::print_phases(stdout, slo, phases);
  }
  std::optional<bench::TenantSummary> tenants;
  if (!run.tenants.empty()) {
    tenants = bench::summarize_tenants(run.records, run.tenants);
    bench::print_tenants(stdout, run.tenants, *tenants);
  }
  if (json_out.is_open()) {
    nlohmann::json result = bench::result_json(c.run, slo, percentiles, run, summary, c.label);
    if (!phases.empty()) result["phases"] = bench::phases_json(slo, phases);
    if (tenants) result["multi_tenant"] = bench::multi_tenant_json(mt, run.tenants, *tenants);
    json_out << result.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    if (!json_out) throw Error(c.json_file + ": cannot write the result file");
  }
}

}  // namespace

void add_bench_serve_command(CLI::App& bench) {
  auto c = std::make_shared<BenchServeCli>();
  bench::ServeBenchmarkOptions& o = c->run;
  CLI::App* cmd = bench.add_subcommand("serve", "Load-test an OpenAI-compatible server (like vllm bench serve)");
  o.base_url.clear();
  cmd->add_option("--base-url", o.base_url, "the server, http://HOST:PORT[/PREFIX] (default: from --host and --port)");
  cmd->add_option("--host", c->host, "server host when no --base-url (default 127.0.0.1)");
  cmd->add_option("--port", c->port, "server port when no --base-url (default 8000)")->check(CLI::Range(1, 65535));
  cmd->add_option("--endpoint", o.endpoint, "/v1/completions (default) or /v1/chat/completions")
      ->check(CLI::IsMember({"/v1/completions", "/v1/chat/completions"}));
  cmd->add_option("--model", o.model, "model id (default: the first of GET /v1/models)");
  cmd->add_option("--api-key", o.api_key, "bearer key (default: $OPENAI_API_KEY)");
  cmd->add_option("--request-rate", c->request_rate, "requests per second, or inf to send all at once (default inf)");
  cmd->add_option("--request-rate-schedule", c->request_rate_schedule,
                  "piecewise rates, RATE:SECONDS,... (e.g. 4:20,32:20,4:20: a step up and back); the summary adds "
                  "one row per phase");
  cmd->add_option("--burstiness", o.burstiness, "gamma shape of the arrivals: 1 = Poisson, < 1 burstier (default 1)");
  cmd->add_option("--max-concurrency", o.max_concurrency, "most requests in flight (default: no limit)")
      ->check(kNonNegative);
  cmd->add_option("--num-prompts", o.synthetic.num_prompts, "requests (default 1000)")->check(kPositive);
  cmd->add_option("--seed", o.seed, "seed of the prompts and the arrivals (default 0)");
  cmd->add_option("--dataset", o.dataset,
                  "random (default), prefix, jsonl, or multi-tenant (tenants with their own system prompts, Zipf "
                  "popularity, a periodic and a noisy tenant, each request with its tenant's key: --mt-*)")
      ->check(CLI::IsMember({"random", "prefix", "jsonl", "multi-tenant"}));
  cmd->add_option("--random-input-len", o.synthetic.input_len,
                  "prompt tokens (prefix dataset: after the prefix) (default 1024)")
      ->check(kPositive);
  cmd->add_option("--random-output-len", o.synthetic.output_len,
                  "max_tokens per request; also for jsonl lines without output_len (default 128)")
      ->check(kPositive);
  cmd->add_option("--random-range-ratio", o.synthetic.range_ratio,
                  "lengths uniform in [len*(1-r), len*(1+r)], 0 <= r < 1 (default 0)");
  cmd->add_option("--prefix-len", o.synthetic.prefix_len,
                  "prefix dataset: tokens shared within a group; multi-tenant: each tenant's system prompt (default 256)");
  cmd->add_option("--num-prefix-groups", o.synthetic.num_prefix_groups, "prefix dataset: distinct prefixes (default 10)")
      ->check(kPositive);
  bench::MultiTenantOptions& mt = o.multi_tenant;
  cmd->add_option("--mt-tenants", mt.num_tenants, "multi-tenant: ordinary tenants, tenant-0 ... (default 8)")
      ->check(kPositive);
  cmd->add_option("--mt-zipf-s", mt.zipf_s,
                  "multi-tenant: Zipf exponent of the ordinary tenants' popularity, P(rank k) ~ 1/(k+1)^s (default 1.0)")
      ->check(kNonNegative);
  cmd->add_option("--mt-periodic-interval-ms", mt.periodic_interval_ms,
                  "multi-tenant: the periodic tenant sends a request every T ms, from 0 (default 200)")
      ->check(kPositive);
  cmd->add_option("--mt-periodic-requests", mt.periodic_requests,
                  "multi-tenant: the periodic tenant's requests (default 0: one per interval over the other "
                  "requests' arrivals, at least 1)")
      ->check(kNonNegative);
  cmd->add_option("--mt-noisy-share", mt.noisy_share,
                  "multi-tenant: the share of --num-prompts the noisy tenant sends, unique prompts with no shared "
                  "prefix, in [0, 1) (default 0.2)");
  cmd->add_option("--mt-noisy-input-len", mt.noisy_input_len,
                  "multi-tenant: tokens of a noisy prompt (default: 2 x (--prefix-len + --random-input-len))")
      ->check(kNonNegative);
  cmd->add_option("--mt-noisy-prompt-tokens-per-step", mt.noisy_prompt_tokens_per_step,
                  "multi-tenant, with --mt-write-tenants-file: the noisy tenant's prompt_tokens_per_step (the most "
                  "prompt tokens its requests compute in one step; default 0: none)")
      ->check(kNonNegative);
  cmd->add_option("--mt-noisy-kv-cap", mt.noisy_kv_cap,
                  "multi-tenant, with --mt-write-tenants-file: the noisy tenant's kv_cap, the most KV its running "
                  "requests hold, a fraction of the pool (<= 1) or tokens (default 0: none)")
      ->check(kNonNegative);
  cmd->add_option("--mt-weighted-kv-share", mt.weighted_kv_share,
                  "multi-tenant, with --mt-write-tenants-file: tenant-0's kv_share, KV guaranteed to its requests "
                  "against the other tenants', a fraction of the pool (<= 1) or tokens (default 0: none)")
      ->check(kNonNegative);
  cmd->add_option("--mt-write-tenants-file", c->write_tenants_file,
                  "multi-tenant: write the tenants' keys and weights as a `pagoda serve --tenants-file` file to PATH "
                  "and exit (keys sk-bench-tenant-0..., sk-bench-periodic, sk-bench-noisy)");
  cmd->add_option("--random-vocab-size", o.random_vocab_size,
                  "draw random prompt ids from [min(300, N-1), N) instead of the server's tokenizer (/tokenize)");
  cmd->add_option("--dataset-path", o.dataset_path, "jsonl dataset: lines {\"prompt\": \"...\" or [ids], \"output_len\"?: N}");
  cmd->add_flag("--ignore-eos", o.ignore_eos, "generate exactly max_tokens (sends ignore_eos: true; else false)");
  cmd->add_option("--temperature", o.temperature, "sampling temperature (default 0: greedy)")->check(kNonNegative);
  cmd->add_option("--extra-body", c->extra_body, "a JSON object merged into every request body");
  cmd->add_option("--goodput", c->goodput, "service-level objectives for goodput, e.g. ttft:500 tpot:50 (also e2el), ms")
      ->expected(1, 3);
  cmd->add_option("--metric-percentiles", c->percentiles, "percentiles to report (default 50,90,99)");
  cmd->add_option("--timeout", o.timeout_s, "seconds to wait for a connection or the next bytes (default 600)");
  cmd->add_option("--json", c->json_file, "write the full result (summary and every request) to this file");
  cmd->add_option("--label", c->label, "a name for this run in the result file (plots use it)");
  cmd->add_flag("--no-progress,--disable-tqdm", c->no_progress, "no progress bar on stderr");
  o.synthetic.prefix_len = 256;
  o.synthetic.num_prefix_groups = 10;
  cmd->callback([c] { run_bench_serve(*c); });
}

}  // namespace pagoda::cli
