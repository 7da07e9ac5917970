// OpenAiServer: the request handler behind `pagoda serve`. Routes the OpenAI-compatible endpoints,
// checks keys and tenant limits, tokenizes (chat template first), enforces context and queue limits, and
// hands generation to a GenerationJob per request. All errors leave as OpenAI error objects.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "pagoda/engine/engine.h"
#include "pagoda/server/api_keys.h"
#include "pagoda/server/constraint_compiler.h"
#include "pagoda/server/exchange.h"
#include "pagoda/server/gpu_timeline.h"
#include "pagoda/server/openai_request.h"
#include "pagoda/server/server_metrics.h"
#include "pagoda/server/trace_writer.h"
#include "pagoda/server/worker_pool.h"
#include "pagoda/tokenizer/tokenizer.h"

namespace pagoda::server {

// Renders chat messages into a prompt with the model's chat template (add_generation_prompt, extra template
// variables as an object); throws pagoda::InvalidRequest for messages the template rejects.
using ChatRenderer = std::function<std::string(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                               const nlohmann::ordered_json& template_kwargs)>;

struct OpenAiServerOptions {
  std::string served_model_name;
  std::string model_path;  // shown as "root" in /v1/models
  int max_model_len = 0;
  int max_waiting_requests = 0;  // engine requests not yet started; 0: unlimited
  RequestLimits limits;          // what one request may ask for
  // Threads that parse, render and tokenize bodies, and as many that run generations' per-token work.
  int num_workers = 2;
  ApiKeys api_keys;              // empty: no authentication
  TraceWriter* trace = nullptr;  // --trace-file: a JSON line per finished engine request; null: none
  // For constrained decoding: the model's logits width (0: the tokenizer's vocabulary) and end tokens.
  int num_logits = 0;
  std::vector<TokenId> eos_token_ids;
  ToolServingOptions tools;      // --enable-auto-tool-choice, --tool-call-parser, ...
};

class OpenAiServer {
 public:
  // `tokenizer` may be null (token-id prompts only); `chat` may be empty (no chat endpoint).
  OpenAiServer(Engine& engine, const Tokenizer* tokenizer, ChatRenderer chat, OpenAiServerOptions options);

  // The HTTP handler; runs on the exchange's strand.
  void handle(const std::shared_ptr<Exchange>& exchange);
  // HttpServerOptions::screen, decided from the headers of a request with a body, before the body is read: a 400 for
  // a body on a request that takes none (GET, HEAD, OPTIONS: CORS preflights too) and a 405 for one to the open
  // endpoints (/health, /version, /metrics: GET only), whether keys are configured or not; a 401 for a request that
  // needs a key and lacks a valid one.
  std::optional<HttpResponse> screen(const HttpRequest& head) const;
  ServerMetrics& metrics() { return metrics_; }
  // Waits for work the server started in the background that reads the tokenizer: the constraint compiler's
  // vocabulary index, and the request threads' tasks (a body still parsing at shutdown, which then posts to the I/O
  // context; a generation's queued events). Call after the HTTP server stops, while its I/O context and the tokenizer
  // still exist; the engine's later events (its aborts as it stops) are then dropped (WorkerPool::submit).
  void finish_background_work() {
    constraints_.wait_for_index();
    workers_.stop();
    generation_workers_.stop();
  }
  // GET /debug/gpu_timeline draws this (null: 404). Set before serving.
  void set_gpu_timeline(GpuTimeline* timeline) { timeline_ = timeline; }

 private:
  // Bodies from this size up are parsed and tokenized on the worker pool.
  static constexpr size_t kInlineBodyBytes = 4096;

  void route(const std::shared_ptr<Exchange>& exchange);
  // Runs fn; an exception becomes the exchange's error response (an OpenAI error object).
  void guarded(const std::shared_ptr<Exchange>& exchange, const std::function<void()>& fn);
  // Runs `work` (a request's CPU work: parsing, chat template, tokenizing) on the worker pool when the body
  // is large (or `always`: work whose cost the body does not tell), else here; then what it returns on the
  // exchange's strand. Errors become the response. The pool serves the tenant's (else the client address's)
  // queued work in turn with other clients'.
  void off_io_threads(const std::shared_ptr<Exchange>& exchange, const Tenant* tenant,
                      std::function<std::function<void()>()> work, bool always = false);
  // The pool's queue for the exchange's work: the tenant's, else the client address's.
  static std::string work_queue(const Exchange& exchange, const Tenant* tenant);
  static std::function<void()> respond_with(const std::shared_ptr<Exchange>& exchange, HttpResponse response);
  // The engine requests for a parsed request: prompts tokenized (chat template first), checked against
  // the context and the request's token limit. Thread-safe.
  std::vector<GenerateRequest> engine_requests(ParsedRequest& parsed, const Tenant* tenant) const;
  // One of a tenant's max_concurrent_requests, held until the last copy goes (null: the tenant has no limit). Taken
  // when a request is routed, before its body is parsed, so that a tenant at its limit queues no work.
  using TenantSlot = std::shared_ptr<int>;
  // Throws ApiError(429) when the tenant has all its requests in flight.
  TenantSlot take_tenant_slot(const Tenant* tenant);
  // On the strand: the waiting-queue limit, then a GenerationJob on its own WorkerStrand (the generation threads),
  // which holds `slot` until it ends.
  void generate(const std::shared_ptr<Exchange>& exchange, ParsedRequest parsed, std::vector<GenerateRequest> requests,
                const Tenant* tenant, TenantSlot slot);
  // The rendered chat (400 when the model has no template, or the final message to continue is not in it).
  std::string chat_prompt(const nlohmann::ordered_json& messages, const ChatOptions& options) const;
  std::vector<TokenId> encode_chat(const std::string& rendered) const;
  HttpResponse tokenize(const std::string& body) const;    // thread-safe
  HttpResponse detokenize(const std::string& body) const;  // thread-safe
  HttpResponse gpu_timeline(const std::string& target) const;  // GET /debug/gpu_timeline (query in `target`)
  void check_model(const std::string& model) const;
  // 429 (with Retry-After) when the tenant is over its max_requests_per_second.
  void admit_at_tenant_rate(const Tenant& tenant);

  Engine& engine_;
  const Tokenizer* tokenizer_;
  ChatRenderer chat_;
  OpenAiServerOptions options_;
  ServerMetrics metrics_;
  GpuTimeline* timeline_ = nullptr;
  std::atomic<int> num_pending_{0};
  std::mutex tenants_mutex_;
  std::unordered_map<std::string, int> tenant_active_;  // HTTP requests in flight per tenant
  struct TokenBucket {
    double tokens;
    std::chrono::steady_clock::time_point refilled;
  };
  std::unordered_map<std::string, TokenBucket> tenant_buckets_;  // tenants with max_requests_per_second
  int64_t created_ = 0;
  ConstraintCompiler constraints_;  // response_format and guided_* into grammars, cached
  // Last: joined before the members their tasks use are destroyed. Two pools of num_workers threads: one prepares
  // requests (parsing, chat templates, tokenizing: a large body takes seconds), one runs generations' per-token work
  // (GenerationJob on a WorkerStrand), so that a stream's tokens never wait behind a body being parsed.
  WorkerPool workers_;
  WorkerPool generation_workers_;
};

}  // namespace pagoda::server
