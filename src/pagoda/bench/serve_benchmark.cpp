// The benchmark's set-up and its load loop on one Asio thread: a dispatcher coroutine waits for each
// arrival time and spawns the request, which waits for a concurrency slot, streams, and is timed.
#include "pagoda/bench/serve_benchmark.h"

#include <sys/resource.h>

#include <boost/asio.hpp>
#include <fmt/format.h>

#include <cmath>
#include <deque>
#include <random>

#include "pagoda/bench/arrivals.h"
#include "pagoda/bench/http_client.h"
#include "pagoda/bench/progress.h"
#include "pagoda/bench/request_body.h"
#include "pagoda/bench/server_tokenizer.h"
#include "pagoda/bench/sse_parser.h"
#include "pagoda/bench/stream_measure.h"
#include "pagoda/bench/url.h"
#include "pagoda/core/error.h"
#include "pagoda/core/logging.h"

namespace pagoda::bench {
namespace {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

// At most N holders; release() hands the slot straight to the oldest waiter.
class Slots {
 public:
  Slots(asio::any_io_executor ex, int n) : ex_(std::move(ex)), free_(n) {}
  asio::awaitable<void> acquire() {
    if (free_ > 0) {
      --free_;
      co_return;
    }
    asio::steady_timer wait(ex_, asio::steady_timer::time_point::max());
    waiters_.push_back(&wait);
    co_await wait.async_wait(asio::as_tuple(asio::use_awaitable));  // cancelled by release(): ours now
  }
  void release() {
    if (waiters_.empty()) {
      ++free_;
      return;
    }
    asio::steady_timer* next = waiters_.front();
    waiters_.pop_front();
    next->cancel();
  }

 private:
  asio::any_io_executor ex_;
  int free_;
  std::deque<asio::steady_timer*> waiters_;
};

// Every request in flight holds a socket: lift the soft descriptor limit towards the hard one if needed.
void raise_open_file_limit(size_t wanted) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= wanted) return;
  const rlim_t before = limit.rlim_cur;
  limit.rlim_cur = limit.rlim_max == RLIM_INFINITY ? wanted : std::min<rlim_t>(wanted, limit.rlim_max);
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur < wanted)
    spdlog::warn("bench: up to {} connections but the open-file limit is {}: requests may fail", wanted - 64,
                 limit.rlim_cur > before ? limit.rlim_cur : before);
}

std::string first_model(BlockingHttpClient& http, const std::string& where) {
  const HttpResult r = http.request("GET", "/v1/models");
  if (!r.error.empty()) throw Error(fmt::format("cannot reach the server at {}: {}", where, r.error));
  if (!r.ok()) throw Error("GET /v1/models: " + r.describe() + " (give the model with --model)");
  const nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
  if (!j.is_object() || !j.contains("data") || !j["data"].is_array() || j["data"].empty() ||
      !j["data"][0].contains("id") || !j["data"][0]["id"].is_string())
    throw Error("GET /v1/models: no model in the answer (give the model with --model)");
  return j["data"][0]["id"].get<std::string>();
}

// The context the server gives `model`: GET /v1/models' max_model_len (vLLM and Pagoda report it), or 0
// when the server does not say.
int server_max_model_len(BlockingHttpClient& http, const std::string& model) {
  const HttpResult r = http.request("GET", "/v1/models");
  if (!r.ok()) return 0;
  const nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
  if (!j.is_object() || !j.contains("data") || !j["data"].is_array()) return 0;
  for (const nlohmann::json& m : j["data"]) {
    if (m.is_object() && m.value("id", std::string()) == model && m.contains("max_model_len") &&
        m["max_model_len"].is_number_integer())
      return m["max_model_len"].get<int>();
  }
  return 0;
}

// Prompts whose tokens and max_tokens the server's context cannot hold would all fail: say so, with the
// flags to change, before sending any.
void check_prompts_fit(const ServeBenchmarkOptions& o, const std::vector<BenchPrompt>& prompts, int max_model_len) {
  if (max_model_len <= 0) return;
  const BenchPrompt* longest = nullptr;
  for (const BenchPrompt& p : prompts) {
    if (p.prompt_len >= 0 && (longest == nullptr || p.prompt_len + p.output_len > longest->prompt_len + longest->output_len))
      longest = &p;
  }
  if (longest == nullptr || longest->prompt_len + longest->output_len <= max_model_len) return;
  throw InvalidRequest(fmt::format(
      "a prompt of {} tokens plus {} output tokens exceeds the server's max_model_len of {}: lower {}", longest->prompt_len,
      longest->output_len, max_model_len,
      o.dataset == "jsonl" ? "the dataset's prompts or --random-output-len"
      : o.dataset == "multi-tenant"
          ? "--random-input-len, --random-output-len, --prefix-len, --mt-noisy-input-len or --random-range-ratio"
          : "--random-input-len, --random-output-len" + std::string(o.dataset == "prefix" ? ", --prefix-len" : "") +
                " or --random-range-ratio"));
}

// The arrival process's times (seconds) for `n` requests.
std::vector<double> process_arrivals(const ServeBenchmarkOptions& o, int n) {
  return o.rate_schedule.empty() ? arrival_times(n, o.request_rate, o.burstiness, o.seed)
                                 : arrival_times(n, o.rate_schedule, o.burstiness, o.seed);
}

// The prompts and when each is sent (non-decreasing), and the multi-tenant dataset's tenants.
struct Workload {
  std::vector<BenchPrompt> prompts;
  std::vector<double> arrivals;
  std::vector<BenchTenant> tenants;
};

Workload build_workload(const ServeBenchmarkOptions& o, BlockingHttpClient& http, const std::string& model) {
  Workload w;
  std::vector<BenchPrompt>& prompts = w.prompts;
  std::unique_ptr<ServerTokenizer> tokenizer;
  std::vector<TokenId> pool;
  if (o.random_vocab_size > 0)  // a server without /tokenize (or a model without a tokenizer)
    for (int id = std::min(300, o.random_vocab_size - 1); id < o.random_vocab_size; ++id) pool.push_back(id);
  const auto need_tokenizer = [&] {
    if (tokenizer) return;
    tokenizer = std::make_unique<ServerTokenizer>(http, model);
    if (pool.empty()) pool = token_pool(*tokenizer);
  };
  if (o.dataset == "jsonl") {
    prompts = jsonl_prompts(o.dataset_path, o.synthetic.num_prompts, o.synthetic.output_len);
  } else {
    if (pool.empty()) need_tokenizer();
    SyntheticOptions s = o.synthetic;
    s.seed = o.seed;
    if (o.dataset == "random") s.prefix_len = 0;
    if (o.dataset == "multi-tenant") {
      MultiTenantWorkload mt = multi_tenant_workload(o.multi_tenant, s, pool, process_arrivals(o, s.num_prompts));
      prompts = std::move(mt.prompts);
      w.arrivals = std::move(mt.arrivals);
      w.tenants = std::move(mt.tenants);
    } else {
      prompts = synthetic_prompts(s, pool);
    }
  }
  if (w.arrivals.empty()) w.arrivals = process_arrivals(o, static_cast<int>(prompts.size()));
  if (o.chat()) {  // chat prompts are text: find text whose whole chat prompt has the same token count
    std::mt19937_64 rng(o.seed ^ 0x9e3779b97f4a7c15ULL);
    ServerTokenizer chat_tokenizer(http, model, /*chat=*/true);
    for (BenchPrompt& p : prompts) {
      if (p.is_text) continue;
      need_tokenizer();
      int count = 0;
      p.text = exact_text(chat_tokenizer, p.ids, pool, rng, &count);
      p.is_text = true;
      p.prompt_len = count;
      p.ids.clear();
    }
  }
  return w;
}

struct LoadRun {
  const ServeBenchmarkOptions& o;
  HttpClient& client;
  const std::vector<std::string>& bodies;
  const std::vector<Headers>& own_headers;  // per request (multi-tenant: its tenant's key); empty: none
  std::vector<RequestRecord>& records;
  RequestProgress& progress;
  std::optional<Slots> slots;
  Clock::time_point start;
  Clock::time_point last_end;
  int done = 0, failed = 0;

  double since_start(Clock::time_point t) const { return std::chrono::duration<double>(t - start).count(); }

  // One streamed request, timed from `sent`.
  asio::awaitable<void> send(size_t i, RequestRecord& r) {
    SseParser parser;
    const Clock::time_point sent = Clock::now();
    r.send_time = since_start(sent);
    StreamMeasure measure(r, o.chat(), sent);
    // A named copy: GCC destroys a conditional's temporary twice when it spans a co_await.
    Headers own;
    if (i < own_headers.size()) own = own_headers[i];
    const HttpResult result = co_await client.stream(
        o.endpoint, bodies[i],
        [&](std::string_view bytes, Clock::time_point at) {
          for (const std::string& data : parser.feed(bytes)) measure.on_event(data, at);
        },
        std::move(own));
    const Clock::time_point end = Clock::now();
    std::string transport = result.error;
    if (transport.empty() && result.status != 200) transport = result.describe();
    measure.finish(end, transport);
    last_end = std::max(last_end, end);
  }

  asio::awaitable<void> request(size_t i) {
    if (slots) co_await slots->acquire();
    co_await send(i, records[i]);
    if (slots) slots->release();
    ++done;
    failed += !records[i].success;
    progress.update(done, failed);
  }

  asio::awaitable<void> dispatch(std::vector<double> arrivals) {
    auto ex = co_await asio::this_coro::executor;
    asio::steady_timer timer(ex);
    for (size_t i = 0; i < arrivals.size(); ++i) {
      const auto at = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(arrivals[i]));
      if (at > Clock::now()) {
        timer.expires_at(at);
        co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
      }
      records[i].scheduled_time = since_start(Clock::now());
      asio::co_spawn(ex, request(i), asio::detached);
    }
  }
};

}  // namespace

void ServeBenchmarkOptions::validate() const {
  if (endpoint != "/v1/completions" && endpoint != "/v1/chat/completions")
    throw InvalidRequest("--endpoint must be /v1/completions or /v1/chat/completions");
  if (!(request_rate > 0)) throw InvalidRequest("--request-rate must be a positive number or inf");
  if (!(burstiness > 0) || std::isinf(burstiness)) throw InvalidRequest("--burstiness must be a positive number");
  if (max_concurrency < 0) throw InvalidRequest("--max-concurrency must not be negative");
  if (synthetic.num_prompts < 1) throw InvalidRequest("--num-prompts must be at least 1");
  if (!(timeout_s > 0)) throw InvalidRequest("--timeout must be positive");
  if (dataset == "jsonl") {
    if (dataset_path.empty()) throw InvalidRequest("--dataset jsonl needs --dataset-path FILE");
  } else if (dataset == "random" || dataset == "prefix" || dataset == "multi-tenant") {
    if (!dataset_path.empty()) throw InvalidRequest("--dataset-path is for --dataset jsonl");
    if (dataset != "random" && synthetic.prefix_len < 1) throw InvalidRequest("--dataset " + dataset + " needs --prefix-len >= 1");
    if (dataset == "multi-tenant") multi_tenant.validate();
  } else {
    throw InvalidRequest("--dataset must be random, prefix, jsonl or multi-tenant");
  }
  if (!extra_body.is_object()) throw InvalidRequest("--extra-body must be a JSON object");
  if (random_vocab_size < 0) throw InvalidRequest("--random-vocab-size must not be negative");
}

ServeBenchmarkRun run_serve_benchmark(const ServeBenchmarkOptions& o) {
  o.validate();
  const BaseUrl url = parse_base_url(o.base_url);
  const bool multi_tenant = o.dataset == "multi-tenant";
  Headers headers;
  std::string setup_key = o.api_key;
  if (setup_key.empty() && multi_tenant) setup_key = bench_tenants(o.multi_tenant.num_tenants).front().key;
  if (!setup_key.empty()) headers.emplace_back("Authorization", "Bearer " + setup_key);

  ServeBenchmarkRun run;
  BlockingHttpClient setup(url, headers, o.timeout_s);
  run.model = o.model.empty() ? first_model(setup, url.to_string()) : o.model;
  const Workload workload = build_workload(o, setup, run.model);
  const std::vector<BenchPrompt>& prompts = workload.prompts;
  const std::vector<double>& arrivals = workload.arrivals;
  run.tenants = workload.tenants;
  check_prompts_fit(o, prompts, server_max_model_len(setup, run.model));
  RequestSettings settings{o.chat(), run.model, o.temperature, o.ignore_eos, o.extra_body};
  std::vector<std::string> bodies;
  bodies.reserve(prompts.size());
  for (const BenchPrompt& p : prompts) bodies.push_back(request_body(settings, p));
  run.records.resize(prompts.size());
  std::vector<Headers> own_headers;  // multi-tenant: each request's tenant's key
  for (size_t i = 0; i < prompts.size(); ++i) {
    run.records[i].index = static_cast<int>(i);
    run.records[i].expected_prompt_len = prompts[i].prompt_len;
    run.records[i].expected_output_len = prompts[i].output_len;
    if (multi_tenant) {
      const BenchTenant& tenant = run.tenants.at(static_cast<size_t>(prompts[i].tenant));
      run.records[i].tenant = tenant.name;
      own_headers.push_back({{"Authorization", "Bearer " + tenant.key}});
    }
  }
  if (multi_tenant && o.rate_schedule.empty() && std::isinf(o.request_rate))
    spdlog::warn("bench: multi-tenant at --request-rate inf: every request but the periodic ones at 0 (give a rate)");

  const size_t in_flight = o.max_concurrency > 0 ? std::min<size_t>(o.max_concurrency, prompts.size()) : prompts.size();
  raise_open_file_limit(in_flight + 64);
  asio::io_context ioc;
  HttpClient client(ioc.get_executor(), url, headers, o.timeout_s);
  RequestProgress progress(static_cast<int>(prompts.size()), false);
  // The test request: the first prompt, alone, so that a wrong model or endpoint fails at once. Multi-tenant:
  // under a cache salt of its own, so that it warms no tenant's prefix cache (a noisy prompt sent twice
  // would hit).
  std::vector<std::string> test_body = {bodies[0]};
  if (multi_tenant) {
    RequestSettings salted = settings;
    salted.extra_body["cache_salt"] = "pagoda-bench-test-request";
    test_body[0] = request_body(salted, prompts[0]);
  }
  LoadRun load{o, client, test_body, own_headers, run.records, progress, std::nullopt, Clock::now(), {}, 0, 0};

  spdlog::info("bench: {} {} on {}, model {}: test request", prompts.size(), o.dataset, url.target(o.endpoint), run.model);
  RequestRecord test;
  asio::co_spawn(ioc, load.send(0, test), asio::detached);
  ioc.run();
  if (!test.success) throw Error("the test request failed: " + test.error);

  spdlog::info("bench: request rate {}, burstiness {}, max concurrency {}: starting",
               std::isinf(o.request_rate) ? "inf" : fmt::format("{}", o.request_rate), o.burstiness,
               o.max_concurrency > 0 ? std::to_string(o.max_concurrency) : "none");
  RequestProgress live(static_cast<int>(prompts.size()), o.progress);
  LoadRun main{o, client, bodies, own_headers, run.records, live, std::nullopt, Clock::now(), {}, 0, 0};
  if (o.max_concurrency > 0) main.slots.emplace(ioc.get_executor(), o.max_concurrency);
  main.start = Clock::now();
  main.last_end = main.start;
  asio::co_spawn(ioc, main.dispatch(arrivals), asio::detached);
  ioc.restart();
  ioc.run();
  live.finish();
  run.duration = main.since_start(main.last_end);
  run.connections_opened = client.connections_opened();
  return run;
}

}  // namespace pagoda::bench
