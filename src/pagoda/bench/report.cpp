// Table and JSON.
#include "pagoda/bench/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>

#include "pagoda/bench/timeline.h"

namespace pagoda::bench {
namespace {

using nlohmann::json;

std::string percentile_name(double q) {
  return q == std::floor(q) ? fmt::format("{}", static_cast<int>(q)) : fmt::format("{}", q);
}

void line(std::FILE* out, const std::string& name, const std::string& value) {
  std::fprintf(out, "%-40s %s\n", (name + ":").c_str(), value.c_str());
}

void heading(std::FILE* out, const std::string& title) {
  const int width = 50, pad = std::max(0, width - static_cast<int>(title.size()));
  std::fprintf(out, "%s%s%s\n", std::string(static_cast<size_t>(pad / 2), '-').c_str(), title.c_str(),
               std::string(static_cast<size_t>(pad - pad / 2), '-').c_str());
}

void distribution(std::FILE* out, const std::string& title, const std::string& name, const Distribution& d) {
  heading(out, title);
  line(out, fmt::format("Mean {} (ms)", name), fmt::format("{:.2f}", d.mean));
  line(out, fmt::format("Median {} (ms)", name), fmt::format("{:.2f}", d.median));
  for (const auto& [q, v] : d.percentiles) {
    if (q == 50) continue;
    line(out, fmt::format("P{} {} (ms)", percentile_name(q), name), fmt::format("{:.2f}", v));
  }
}

void add_distribution(json& j, const std::string& key, const Distribution& d) {
  j["mean_" + key + "_ms"] = d.mean;
  j["median_" + key + "_ms"] = d.median;
  j["std_" + key + "_ms"] = d.std;
  for (const auto& [q, v] : d.percentiles) j[fmt::format("p{}_{}_ms", percentile_name(q), key)] = v;
}

json optional_number(double v, bool present) { return present ? json(v) : json(nullptr); }
json optional_count(int v) { return v >= 0 ? json(v) : json(nullptr); }

}  // namespace

void print_report(std::FILE* out, const ServeBenchmarkOptions& o, const GoodputSlo& slo, const Summary& s) {
  std::fprintf(out, "%s\n", fmt::format("{:=^50}", " Serving Benchmark Result ").c_str());
  line(out, "Successful requests", std::to_string(s.completed));
  line(out, "Failed requests", std::to_string(s.failed));
  if (o.max_concurrency > 0) line(out, "Maximum request concurrency", std::to_string(o.max_concurrency));
  if (o.rate_schedule.empty()) {
    line(out, "Request rate configured (RPS)", std::isinf(o.request_rate) ? "inf" : fmt::format("{:.2f}", o.request_rate));
  } else {
    std::string schedule;
    for (const RatePhase& p : o.rate_schedule) schedule += fmt::format("{}{:g}:{:g}", schedule.empty() ? "" : ",", p.rate, p.seconds);
    line(out, "Request rate schedule (RPS:s)", schedule);
  }
  line(out, "Benchmark duration (s)", fmt::format("{:.2f}", s.duration));
  line(out, "Total input tokens", std::to_string(s.total_input));
  if (s.total_cached_input >= 0) {
    // Prompts served from the prefix cache skip most of their prefill: a run that repeats an earlier
    // run's prompts (the same --seed) measures the cache, not prefill.
    line(out, "Prefix-cached input tokens",
         fmt::format("{} ({:.1f}%)", s.total_cached_input,
                     s.total_input > 0 ? 100.0 * static_cast<double>(s.total_cached_input) / static_cast<double>(s.total_input) : 0.0));
  }
  line(out, "Total generated tokens", std::to_string(s.total_output));
  line(out, "Request throughput (req/s)", fmt::format("{:.2f}", s.request_throughput));
  if (slo.any()) line(out, "Request goodput (req/s)", fmt::format("{:.2f}", s.request_goodput));
  line(out, "Output token throughput (tok/s)", fmt::format("{:.2f}", s.output_throughput));
  line(out, "Peak output token throughput (tok/s)", fmt::format("{:.2f}", s.peak_output_throughput));
  line(out, "Peak concurrent requests", std::to_string(s.peak_concurrency));
  line(out, "Total token throughput (tok/s)", fmt::format("{:.2f}", s.total_token_throughput));
  distribution(out, "Time to First Token", "TTFT", s.ttft_ms);
  distribution(out, "Time per Output Token (excl. 1st token)", "TPOT", s.tpot_ms);
  distribution(out, "Inter-token Latency", "ITL", s.itl_ms);
  distribution(out, "End-to-end Latency", "E2EL", s.e2el_ms);
  std::fprintf(out, "%s\n", std::string(50, '=').c_str());
}

json record_json(const RequestRecord& r) {
  const std::optional<double> tpot = r.tpot();
  json j = {{"index", r.index},
          {"scheduled_time", r.scheduled_time},
          {"send_time", r.send_time},
          {"success", r.success},
          {"error", r.error},
          {"ttft", optional_number(r.ttft, r.success)},
          {"tpot", optional_number(tpot.value_or(0), tpot.has_value())},
          {"e2el", r.e2el},
          {"itl", r.itl},
          {"num_chunks", r.num_chunks},
          {"prompt_len", optional_count(r.expected_prompt_len)},
          {"output_len", r.expected_output_len},
          {"prompt_tokens", optional_count(r.prompt_tokens)},
          {"output_tokens", optional_count(r.output_tokens)},
          {"cached_tokens", optional_count(r.cached_tokens)},
          {"usage_reported", r.usage_reported},
          {"finish_reason", r.finish_reason}};
  if (!r.tenant.empty()) j["tenant"] = r.tenant;
  return j;
}

json result_json(const ServeBenchmarkOptions& o, const GoodputSlo& slo, const std::vector<double>& percentiles,
                 const ServeBenchmarkRun& run, const Summary& s, const std::string& label) {
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y%m%d-%H%M%S", std::localtime(&now));
  json goodput = json::object();
  if (slo.ttft_ms) goodput["ttft"] = *slo.ttft_ms;
  if (slo.tpot_ms) goodput["tpot"] = *slo.tpot_ms;
  if (slo.e2el_ms) goodput["e2el"] = *slo.e2el_ms;
  json j = {
      {"date", date},
      {"tool", std::string("pagoda bench serve ") + PAGODA_VERSION},
      {"label", label},
      {"base_url", o.base_url},
      {"endpoint", o.endpoint},
      {"endpoint_type", o.chat() ? "openai-chat" : "openai"},
      {"model_id", run.model},
      {"dataset", o.dataset},
      {"dataset_path", o.dataset_path},
      {"random_input_len", o.synthetic.input_len},
      {"random_output_len", o.synthetic.output_len},
      {"random_range_ratio", o.synthetic.range_ratio},
      {"random_vocab_size", o.random_vocab_size > 0 ? json(o.random_vocab_size) : json(nullptr)},
      {"prefix_len", o.dataset == "prefix" || o.dataset == "multi-tenant" ? o.synthetic.prefix_len : 0},
      {"num_prefix_groups", o.dataset == "prefix" ? o.synthetic.num_prefix_groups : 0},
      {"num_prompts", static_cast<int>(run.records.size())},
      {"request_rate", std::isinf(o.request_rate) ? json("inf") : json(o.request_rate)},
      {"burstiness", o.burstiness},
      {"max_concurrency", o.max_concurrency > 0 ? json(o.max_concurrency) : json(nullptr)},
      {"ignore_eos", o.ignore_eos},
      {"temperature", o.temperature},
      {"seed", o.seed},
      {"goodput_slo_ms", goodput},
      {"metric_percentiles", percentiles},
      {"connections_opened", run.connections_opened},
      {"duration", s.duration},
      {"completed", s.completed},
      {"failed", s.failed},
      {"total_input_tokens", s.total_input},
      {"total_cached_input_tokens", s.total_cached_input >= 0 ? json(s.total_cached_input) : json(nullptr)},
      {"total_output_tokens", s.total_output},
      {"request_throughput", s.request_throughput},
      {"request_goodput", slo.any() ? json(s.request_goodput) : json(nullptr)},
      {"output_throughput", s.output_throughput},
      {"total_token_throughput", s.total_token_throughput},
      {"max_output_tokens_per_s", s.peak_output_throughput},
      {"max_concurrent_requests", s.peak_concurrency},
  };
  add_distribution(j, "ttft", s.ttft_ms);
  add_distribution(j, "tpot", s.tpot_ms);
  add_distribution(j, "itl", s.itl_ms);
  add_distribution(j, "e2el", s.e2el_ms);
  const double bin = std::clamp(s.duration / 100, 0.05, 1.0);
  const ThroughputTimeline t = throughput_timeline(run.records, s.duration, bin);
  j["timeline"] = {{"bin_seconds", t.bin_seconds},
                   {"output_tokens_per_s", t.output_tokens_per_s},
                   {"requests_running", t.requests_running},
                   {"completed_per_s", t.completed_per_s}};
  json requests = json::array();
  for (const RequestRecord& r : run.records) requests.push_back(record_json(r));
  j["requests"] = std::move(requests);
  return j;
}

}  // namespace pagoda::bench
