// Routing, auth, limits and the small endpoints of the OpenAI-compatible server.
#include "pagoda/server/openai_server.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <limits>

#include "pagoda/core/error.h"
#include "pagoda/core/logging.h"
#include "pagoda/core/number_text.h"
#include "pagoda/server/api_error.h"
#include "pagoda/server/bad_words.h"
#include "pagoda/server/generation_job.h"
#include "pagoda/server/worker_exchange.h"
#include "pagoda/server/worker_strand.h"

namespace pagoda::server {
namespace {

using nlohmann::json;

HttpResponse json_response(const json& body, int status = 200) {
  return HttpResponse{status, "application/json", dump_json(body), {}};
}

// The value of `name` in the target's query string ("" when absent); no percent-decoding (numbers only).
std::string query_param(const std::string& target, const std::string& name) {
  const size_t q = target.find('?');
  if (q == std::string::npos) return "";
  size_t pos = q + 1;
  while (pos <= target.size()) {
    size_t end = target.find('&', pos);
    if (end == std::string::npos) end = target.size();
    const std::string pair = target.substr(pos, end - pos);
    const size_t eq = pair.find('=');
    if (pair.substr(0, eq) == name) return eq == std::string::npos ? "" : pair.substr(eq + 1);
    pos = end + 1;
  }
  return "";
}

double query_number(const std::string& target, const std::string& name, double fallback) {
  const std::string v = query_param(target, name);
  if (v.empty()) return fallback;
  if (const std::optional<double> x = parse_number(v); x && *x >= 0) return *x;
  throw ApiError(400, fmt::format("'{}' must be a non-negative number", name), name);
}

HttpResponse error_response(const ApiError& e) {
  HttpResponse r = json_response(e.to_json(), e.status());
  if (e.status() == 429 || e.status() == 503) r.headers.emplace_back("Retry-After", std::to_string(e.retry_after_seconds()));
  if (e.status() == 405 && !e.allow().empty()) r.headers.emplace_back("Allow", e.allow());
  if (e.status() == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

}  // namespace

OpenAiServer::OpenAiServer(Engine& engine, const Tokenizer* tokenizer, ChatRenderer chat, OpenAiServerOptions options)
    : engine_(engine),
      tokenizer_(tokenizer),
      chat_(std::move(chat)),
      options_(std::move(options)),
      metrics_(options_.served_model_name),
      created_(static_cast<int64_t>(std::time(nullptr))),
      constraints_(tokenizer, options_.num_logits, options_.eos_token_ids),
      workers_(options_.num_workers),
      generation_workers_(options_.num_workers) {
  for (const Tenant& t : options_.api_keys.tenants()) engine_.check_tenant(t.kv());
}

void OpenAiServer::handle(const std::shared_ptr<Exchange>& exchange) {
  guarded(exchange, [&] { route(exchange); });
}

void OpenAiServer::guarded(const std::shared_ptr<Exchange>& exchange, const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ApiError& e) {
    exchange->respond(error_response(e));
  } catch (const InvalidRequest& e) {
    exchange->respond(error_response(ApiError(400, e.what())));
  } catch (const std::exception& e) {
    spdlog::error("{} {}: {}", exchange->request().method, exchange->request().target, e.what());
    exchange->respond(error_response(ApiError(500, std::string("internal error: ") + e.what())));
  }
}

void OpenAiServer::off_io_threads(const std::shared_ptr<Exchange>& ex, const Tenant* tenant,
                                  std::function<std::function<void()>()> work, bool always) {
  // Small bodies take microseconds: a hop to the pool and back would only add latency.
  if (!always && ex->request().body.size() < kInlineBodyBytes) {
    work()();
    return;
  }
  workers_.submit(work_queue(*ex, tenant), [this, ex, work = std::move(work)] {
    std::function<void()> then;
    std::exception_ptr error;
    try {
      // A client gone while its body waited in the queue: nothing to prepare (the strand answers it below).
      if (!ex->cancelled()) then = work();
    } catch (...) {
      error = std::current_exception();
    }
    ex->post([this, ex, then = std::move(then), error] {
      guarded(ex, [&] {
        if (error) std::rethrow_exception(error);
        if (ex->cancelled()) {  // the client left while its request was being prepared
          ex->respond(error_response(ApiError(400, "the request was cancelled")));
          return;
        }
        then();
      });
    });
  });
}

std::string OpenAiServer::work_queue(const Exchange& ex, const Tenant* tenant) {
  // The tenant's, or the client address's without keys: the pool takes from each in turn.
  return tenant ? "tenant " + tenant->name : "address " + ex.request().client;
}

std::function<void()> OpenAiServer::respond_with(const std::shared_ptr<Exchange>& ex, HttpResponse response) {
  return [ex, response = std::move(response)]() mutable { ex->respond(std::move(response)); };
}

void OpenAiServer::admit_at_tenant_rate(const Tenant& tenant) {
  // A token bucket per tenant: max_requests_per_second tokens a second, as many in a burst (at least one, so that a
  // rate below 1 admits one request every 1 / rate seconds).
  const double rate = tenant.max_requests_per_second;
  const double burst = std::max(1.0, rate);
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(tenants_mutex_);
  auto [it, fresh] = tenant_buckets_.try_emplace(tenant.name, TokenBucket{burst, now});
  TokenBucket& b = it->second;
  b.tokens = std::min(burst, b.tokens + rate * std::chrono::duration<double>(now - b.refilled).count());
  b.refilled = now;
  if (b.tokens >= 1) {
    b.tokens -= 1;
    return;
  }
  // (At most a day: a rate of 1e-10 would otherwise overflow the conversion.)
  const int wait_s = static_cast<int>(std::min(86400.0, std::ceil((1 - b.tokens) / rate)));
  throw ApiError(429, fmt::format("tenant '{}' is over its {} requests per second", tenant.name, rate))
      .retry_after(std::max(1, wait_s));
}

// The 401 of a request that needs a key and lacks a valid one, from the headers (screen) or the route.
constexpr const char* kUnauthorized = "Unauthorized: a valid API key is required (Authorization: Bearer KEY)";

std::optional<HttpResponse> OpenAiServer::screen(const HttpRequest& head) const {
  const std::string path = head.path();
  // Nothing that takes no body may make the server hold one: a key-less client could make it buffer
  // --max-request-body a connection through the open endpoints or a preflight (30 connections: +450 MB).
  if (head.method == "GET" || head.method == "HEAD" || head.method == "OPTIONS")
    return error_response(ApiError(400, fmt::format("a {} request takes no body", head.method)));
  const bool open_path = path == "/health" || path == "/version" || path == "/metrics";
  if (open_path) return error_response(ApiError(405, "use GET").allow("GET, HEAD"));
  if (!options_.api_keys.enabled()) return std::nullopt;
  if (options_.api_keys.authenticate(head.header("authorization")) != nullptr) return std::nullopt;
  return error_response(ApiError(401, kUnauthorized));
}

void OpenAiServer::check_model(const std::string& model) const {
  if (!model.empty() && model != options_.served_model_name)
    throw ApiError(404, fmt::format("The model `{}` does not exist.", model), "model", "NotFoundError");
}

void OpenAiServer::route(const std::shared_ptr<Exchange>& ex) {
  const HttpRequest& req = ex->request();
  const std::string path = req.path();
  const bool get = req.method == "GET" || req.method == "HEAD";
  const bool post = req.method == "POST";
  if (path == "/health") {
    if (!get) throw ApiError(405, "use GET").allow("GET, HEAD");
    ex->respond(HttpResponse{200, "text/plain", "", {}});
    return;
  }
  if (path == "/version") {
    if (!get) throw ApiError(405, "use GET").allow("GET, HEAD");
    ex->respond(json_response({{"version", PAGODA_VERSION}}));
    return;
  }
  if (path == "/metrics") {
    if (!get) throw ApiError(405, "use GET").allow("GET, HEAD");
    ex->respond(HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8", metrics_.render(engine_.stats()), {}});
    return;
  }
  // Everything below needs a key when keys are configured, the debug endpoints included.
  const Tenant* tenant = nullptr;
  if (options_.api_keys.enabled()) {
    tenant = options_.api_keys.authenticate(req.header("authorization"));
    if (tenant == nullptr) throw ApiError(401, kUnauthorized);
    if (tenant->max_requests_per_second > 0) admit_at_tenant_rate(*tenant);
  }
  if (path == "/debug/gpu_timeline") {
    if (!get) throw ApiError(405, "use GET").allow("GET, HEAD");
    // The heatmap over the whole step ring and its SVG take about 0.1 s of CPU: on the I/O threads, 16 clients
    // fetching it in a loop held /health for over a second.
    off_io_threads(
        ex, tenant, [this, ex] { return respond_with(ex, gpu_timeline(ex->request().target)); }, /*always=*/true);
    return;
  }
  if (path == "/v1/models") {
    if (!get) throw ApiError(405, "use GET").allow("GET, HEAD");
    json model = {{"id", options_.served_model_name}, {"object", "model"}, {"created", created_},
                  {"owned_by", "pagoda"}, {"root", options_.model_path}, {"parent", nullptr},
                  {"max_model_len", options_.max_model_len}};
    ex->respond(json_response({{"object", "list"}, {"data", json::array({model})}}));
  } else if (path == "/v1/completions" || path == "/v1/chat/completions") {
    if (!post) throw ApiError(405, "use POST").allow("POST");
    const bool chat = path == "/v1/chat/completions";
    // The tenant's slot is taken before any work is queued: a tenant at its limit cannot fill the workers' queue.
    TenantSlot slot = take_tenant_slot(tenant);
    off_io_threads(ex, tenant, [this, ex, tenant, chat, slot]() -> std::function<void()> {
      auto parsed = std::make_shared<ParsedRequest>(chat ? parse_chat_request(ex->request().body, options_.limits)
                                                         : parse_completion_request(ex->request().body, options_.limits));
      auto requests = std::make_shared<std::vector<GenerateRequest>>(engine_requests(*parsed, tenant));
      return [this, ex, tenant, parsed, requests, slot] {
        generate(ex, std::move(*parsed), std::move(*requests), tenant, slot);
      };
    });
  } else if (path == "/tokenize") {
    if (!post) throw ApiError(405, "use POST").allow("POST");
    TenantSlot slot = take_tenant_slot(tenant);
    off_io_threads(ex, tenant, [this, ex, slot] { return respond_with(ex, tokenize(ex->request().body)); });
  } else if (path == "/detokenize") {
    if (!post) throw ApiError(405, "use POST").allow("POST");
    TenantSlot slot = take_tenant_slot(tenant);
    off_io_threads(ex, tenant, [this, ex, slot] { return respond_with(ex, detokenize(ex->request().body)); });
  } else {
    throw ApiError(404, fmt::format("no route for {} {}", req.method, path), "", "NotFoundError");
  }
}

namespace {

// The text of a message to continue: its content, or the last text part of a list of parts (as
// transformers' apply_chat_template picks it), without surrounding whitespace (templates often trim it).
std::string final_message_text(const nlohmann::ordered_json& messages) {
  if (!messages.is_array() || messages.empty()) return "";
  const auto& content = messages.back().contains("content") ? messages.back()["content"] : nlohmann::ordered_json();
  std::string text;
  if (content.is_string()) {
    text = content.get<std::string>();
  } else if (content.is_array()) {
    for (auto it = content.rbegin(); it != content.rend(); ++it) {
      if (it->is_object() && it->contains("text") && (*it)["text"].is_string()) {
        text = (*it)["text"].get<std::string>();
        break;
      }
    }
  }
  const auto first = text.find_first_not_of(" \t\n\r\f\v");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\n\r\f\v") - first + 1);
}

}  // namespace

std::string OpenAiServer::chat_prompt(const nlohmann::ordered_json& messages, const ChatOptions& options) const {
  if (!chat_) throw ApiError(400, "this model has no chat template");
  // The tools reach the template as its `tools` variable, as transformers' apply_chat_template passes them;
  // chat_template_kwargs may still set it (vLLM applies them last).
  nlohmann::ordered_json variables = options.template_kwargs;
  if (!options.tools.is_null() && !variables.contains("tools")) variables["tools"] = options.tools;
  std::string rendered = chat_(messages, options.add_generation_prompt, variables);
  if (!options.continue_final_message) return rendered;
  // As transformers does: cut the rendered chat right after the final message's text, dropping whatever
  // the template closes it with (end-of-turn tokens), so the model continues that message.
  const std::string text = final_message_text(messages);
  const size_t at = text.empty() ? std::string::npos : rendered.rfind(text);
  if (at == std::string::npos)
    throw ApiError(400, "'continue_final_message' is set but the final message's text is not in the rendered chat",
                   "continue_final_message");
  rendered.resize(at + text.size());
  return rendered;
}

std::vector<TokenId> OpenAiServer::encode_chat(const std::string& rendered) const {
  // Templates that write the BOS token themselves get no second one; others (e.g. the fallback) get the
  // tokenizer's usual special tokens.
  bool has_bos = false;
  if (auto bos = tokenizer_->bos_token_id()) {
    const std::string_view bos_text = tokenizer_->token_string(*bos);
    has_bos = !bos_text.empty() && rendered.compare(0, bos_text.size(), bos_text) == 0;
  }
  return tokenizer_->encode(rendered, EncodeOptions{.add_special_tokens = !has_bos});
}

std::vector<GenerateRequest> OpenAiServer::engine_requests(ParsedRequest& parsed, const Tenant* tenant) const {
  check_model(parsed.model);
  if (parsed.chat) {
    if (tokenizer_ == nullptr) throw ApiError(400, "this model has no tokenizer; chat is unavailable");
    check_tool_choice_served(parsed.tools, options_.tools);
    parsed.chat_options.tools = template_tools(parsed.tools, options_.tools);
    parsed.prompts.push_back(PromptInput{std::nullopt, encode_chat(chat_prompt(parsed.messages, parsed.chat_options))});
  } else {
    for (PromptInput& p : parsed.prompts) {
      if (!p.text) continue;
      if (tokenizer_ == nullptr) throw ApiError(400, "this model has no tokenizer; give the prompt as token ids", "prompt");
      p.ids = tokenizer_->encode(*p.text, EncodeOptions{.add_special_tokens = parsed.add_special_tokens});
    }
  }
  // Token ids the model has no logits row for: a 400 naming the field here, before a stream's 200 is sent (the
  // engine checks too, but by then a stream has begun).
  const int64_t vocab = options_.num_logits > 0 ? options_.num_logits : tokenizer_ ? tokenizer_->vocab_size() : 0;
  if (vocab > 0) {
    for (const PromptInput& p : parsed.prompts)
      for (const TokenId t : p.ids)
        if (t < 0 || t >= vocab)
          throw ApiError(400, fmt::format("token id {} is outside the vocabulary ({})", t, vocab),
                         parsed.chat ? "messages" : "prompt");
    for (const auto& [t, bias] : parsed.params.logit_bias)
      if (t < 0 || t >= vocab)
        throw ApiError(400, fmt::format("logit_bias: token id {} is outside the vocabulary ({})", t, vocab), "logit_bias");
    if (!parsed.allowed_token_ids.empty() && parsed.allowed_token_ids.back() >= vocab)
      throw ApiError(400, fmt::format("allowed_token_ids: token id {} is outside the vocabulary ({})",
                                      parsed.allowed_token_ids.back(), vocab), "allowed_token_ids");
  }
  if (!parsed.allowed_token_ids.empty() || !parsed.bad_words.empty()) {  // one copy, shared by the n choices
    if (!parsed.bad_words.empty() && tokenizer_ == nullptr)
      throw ApiError(400, "this model has no tokenizer; bad_words needs one", "bad_words");
    auto masks = std::make_shared<TokenMasks>();
    masks->allowed = std::move(parsed.allowed_token_ids);
    if (!parsed.bad_words.empty()) masks->bad_words = encode_bad_words(*tokenizer_, parsed.bad_words);
    parsed.params.token_masks = std::move(masks);
  }
  const int context = options_.max_model_len;
  if (parsed.truncate_prompt_tokens != 0) {  // vLLM's: the prompt's last k tokens (-1: all the context can hold)
    const size_t keep = parsed.truncate_prompt_tokens > 0 ? static_cast<size_t>(parsed.truncate_prompt_tokens)
                                                          : static_cast<size_t>(std::max(1, context - 1));
    for (PromptInput& p : parsed.prompts)
      if (p.ids.size() > keep) p.ids.erase(p.ids.begin(), p.ids.end() - static_cast<std::ptrdiff_t>(keep));
  }
  parsed.params.constraint = constraints_.compile(parsed.constraint);
  std::vector<GenerateRequest> requests;
  for (const PromptInput& p : parsed.prompts) {
    const int num_prompt = static_cast<int>(p.ids.size());
    if (num_prompt == 0) throw ApiError(400, "the prompt is empty", parsed.chat ? "messages" : "prompt");
    GenerateRequest r;
    r.prompt_ids = p.ids;
    r.params = parsed.params;
    // A chat request without max_tokens (the OpenAI SDKs' default) may use what is left of the context, or of what
    // its tenant's kv_cap holds where that is less: a capped tenant's requests were all refused for a worst case
    // they never asked for.
    if (tenant) r.tenant = tenant->kv();
    if (!parsed.max_tokens_given && parsed.chat)
      r.params.max_tokens = static_cast<int>(
          std::max<int64_t>(1, std::min<int64_t>(context, engine_.max_sequence_tokens(r.tenant)) - num_prompt));
    const int64_t requested = int64_t{num_prompt} + r.params.max_tokens;  // max_tokens may be near INT32_MAX
    if (requested > context) {
      throw ApiError(400,
                     fmt::format("This model's maximum context length is {} tokens. However, you requested {} tokens "
                                 "({} in the {}, {} in the completion). Please reduce the length of the {} or completion.",
                                 context, requested, num_prompt,
                                 parsed.chat ? "messages" : "prompt", r.params.max_tokens,
                                 parsed.chat ? "messages" : "prompt"),
                     parsed.chat ? "messages" : "max_tokens");
    }
    r.priority = parsed.priority;  // ordered after the tenant's (TenantKv::priority)
    // A tenant's name salts its prefix cache, so tenants never share cached blocks (unless they all
    // opted in: Tenant::cache_salt).
    r.cache_salt = tenant ? tenant->cache_salt(parsed.cache_salt) : parsed.cache_salt;
    requests.push_back(std::move(r));
  }
  int64_t total_tokens = 0;  // what the request may make the engine hold: prompts and completions, n times
  for (const GenerateRequest& r : requests) total_tokens += (int64_t{r.params.max_tokens} + std::ssize(r.prompt_ids)) * parsed.n;
  if (total_tokens > options_.limits.max_tokens)
    throw ApiError(400, fmt::format("the request asks for {} tokens ((prompt + max_tokens) x n over its prompts); "
                                    "the limit is {}", total_tokens, options_.limits.max_tokens),
                   parsed.chat ? "max_tokens" : "prompt");
  if (!parsed.stream && parsed.top_logprobs >= 0) {  // a response built whole: RequestLimits::max_response_logprobs
    int64_t entries = 0;
    for (const GenerateRequest& r : requests) {
      const int64_t tokens = r.params.max_tokens + (parsed.echo ? std::ssize(r.prompt_ids) : 0);
      entries += tokens * (parsed.top_logprobs + 1) * parsed.n;
    }
    if (entries > options_.limits.max_response_logprobs)
      throw ApiError(400, fmt::format("the response could hold {} logprob entries ((max_tokens x (logprobs + 1), and the "
                                      "prompt's with echo) x n over the prompts); the limit for a response that is not "
                                      "streamed is {}: stream it, or ask for fewer",
                                      entries, options_.limits.max_response_logprobs),
                     parsed.chat ? "top_logprobs" : "logprobs");
  }
  // What the engine would refuse whatever else runs (the KV pool, the tenant's kv_cap): a 400 now, not a stream's
  // 200 followed by an error event.
  for (const GenerateRequest& r : requests) {
    try {
      engine_.check(r);
    } catch (const InvalidRequest& e) {
      throw ApiError(400, e.what(), parsed.max_tokens_given ? "max_tokens" : parsed.chat ? "messages" : "prompt");
    }
  }
  return requests;
}

OpenAiServer::TenantSlot OpenAiServer::take_tenant_slot(const Tenant* tenant) {
  if (tenant == nullptr || tenant->max_concurrent_requests <= 0) return nullptr;
  const std::string name = tenant->name;
  {
    std::lock_guard lock(tenants_mutex_);
    int& active = tenant_active_[name];
    if (active >= tenant->max_concurrent_requests)
      throw ApiError(429, fmt::format("tenant '{}' has {} requests in flight, its limit", name, active));
    ++active;
  }
  return TenantSlot(new int(0), [this, name](int* p) {
    delete p;
    std::lock_guard lock(tenants_mutex_);
    --tenant_active_[name];
  });
}

void OpenAiServer::generate(const std::shared_ptr<Exchange>& ex, ParsedRequest parsed,
                            std::vector<GenerateRequest> requests, const Tenant* tenant, TenantSlot slot) {
  const int num_engine_requests = static_cast<int>(requests.size()) * parsed.n;
  if (options_.max_waiting_requests > 0 && num_engine_requests > options_.max_waiting_requests)  // never admissible
    throw ApiError(400,
                   fmt::format("the request makes {} engine requests (prompts x n), more than --max-waiting-requests "
                               "{} lets wait at once",
                               num_engine_requests, options_.max_waiting_requests),
                   "n");
  std::string tenant_name = tenant ? tenant->name : "";
  std::function<void()> on_done;
  if (slot) on_done = [slot]() mutable { slot.reset(); };  // the tenant's slot is given back when the job ends
  auto tool_format = output_tool_format(parsed.tools, options_.tools);
  // Parsers whose markers are special tokens read the output with them ([TOOL_CALLS]), as vLLM's do.
  if (tool_format && parsed.tools.choice == ToolRequest::Choice::kAuto && tool_format->needs_special_tokens())
    parsed.skip_special_tokens = false;
  // Checked and counted in at once, here: the job starts later, on its own strand, so requests racing for the
  // queue's last places could otherwise all pass. The job counts its engine requests out (GenerationJob).
  const int waiting = num_pending_.fetch_add(num_engine_requests);
  if (options_.max_waiting_requests > 0 && waiting + num_engine_requests > options_.max_waiting_requests) {
    num_pending_.fetch_sub(num_engine_requests);
    throw ApiError(429, fmt::format("too many requests waiting ({}); try again later", waiting));
  }
  // The job's work (each token's text, logprob entries and chunk) runs on its own strand over the generation threads,
  // queued as the tenant's (or the address's) work: the I/O threads only write what it answers.
  auto job_exchange = std::make_shared<WorkerExchange>(
      ex, std::make_shared<WorkerStrand>(generation_workers_, work_queue(*ex, tenant)));
  // A large whole response is built on the request threads, queued as the tenant's (or the address's) work, as its
  // body was; what follows runs on the job's strand again.
  auto off_io = [this, job_exchange, tenant](std::function<std::function<void()>()> work) {
    off_io_threads(job_exchange, tenant, std::move(work), /*always=*/true);
  };
  JobContext ctx{&engine_, tokenizer_, &metrics_, &num_pending_, options_.served_model_name, tenant_name, options_.trace,
                 std::move(tool_format), options_.eos_token_ids, std::move(off_io)};
  auto job = std::make_shared<GenerationJob>(std::move(ctx), std::move(parsed), std::move(requests), job_exchange,
                                             std::move(on_done));
  job_exchange->post([job] { job->start(); });
}

HttpResponse OpenAiServer::tokenize(const std::string& request_body) const {
  const auto o = parse_json_object(request_body, options_.limits.max_json_depth);
  if (o.contains("model") && !o["model"].is_null()) {
    if (!o["model"].is_string()) throw ApiError(400, "'model' must be a string", "model");
    check_model(o["model"].get<std::string>());
  }
  if (tokenizer_ == nullptr) throw ApiError(400, "this model has no tokenizer");
  std::vector<TokenId> ids;
  if (o.contains("messages")) {
    // The chat fields of a chat completion, tools included, so a client can count the prompt it would send.
    ChatOptions options = parse_chat_options(o);
    options.tools = template_tools(parse_tool_request(o), options_.tools);
    ids = encode_chat(chat_prompt(parse_chat_messages(o["messages"], options_.limits.max_json_depth), options));
  } else {
    if (!o.contains("prompt") || !o["prompt"].is_string()) throw ApiError(400, "'prompt' must be a string", "prompt");
    bool add_special = true;
    if (o.contains("add_special_tokens")) {
      if (!o["add_special_tokens"].is_boolean()) throw ApiError(400, "'add_special_tokens' must be true or false", "add_special_tokens");
      add_special = o["add_special_tokens"].get<bool>();
    }
    ids = tokenizer_->encode(o["prompt"].get<std::string>(), EncodeOptions{.add_special_tokens = add_special});
  }
  json body = {{"count", ids.size()}, {"max_model_len", options_.max_model_len}, {"tokens", ids}};
  bool return_token_strs = false;
  if (o.contains("return_token_strs") && !o["return_token_strs"].is_null()) {
    if (!o["return_token_strs"].is_boolean())
      throw ApiError(400, "'return_token_strs' must be true or false", "return_token_strs");
    return_token_strs = o["return_token_strs"].get<bool>();
  }
  if (return_token_strs) {
    json strs = json::array();
    for (TokenId id : ids) strs.push_back(std::string(tokenizer_->token_string(id)));
    body["token_strs"] = std::move(strs);
  }
  return json_response(body);
}

HttpResponse OpenAiServer::gpu_timeline(const std::string& target) const {
  if (timeline_ == nullptr) throw ApiError(404, "this server keeps no GPU timeline", "", "NotFoundError");
  const double window = query_number(target, "window_s", 0);
  const double bin = query_number(target, "bin_ms", 0) / 1000;
  std::string format = query_param(target, "format");
  if (format.empty()) format = "svg";
  if (format != "svg" && format != "json") throw ApiError(400, "'format' must be svg or json", "format");
  metrics::Heatmap h;
  try {
    h = timeline_->heatmap(window, bin);
  } catch (const std::invalid_argument& e) {
    throw ApiError(400, e.what(), "bin_ms");
  }
  if (format == "json") return json_response(metrics::to_json(h));
  return HttpResponse{200, "image/svg+xml", metrics::render_svg(h), {}};
}

HttpResponse OpenAiServer::detokenize(const std::string& request_body) const {
  const auto o = parse_json_object(request_body, options_.limits.max_json_depth);
  if (o.contains("model") && !o["model"].is_null()) {
    if (!o["model"].is_string()) throw ApiError(400, "'model' must be a string", "model");
    check_model(o["model"].get<std::string>());
  }
  if (tokenizer_ == nullptr) throw ApiError(400, "this model has no tokenizer");
  if (!o.contains("tokens") || !o["tokens"].is_array()) throw ApiError(400, "'tokens' must be a list of token ids", "tokens");
  std::vector<TokenId> ids;
  for (const auto& t : o["tokens"]) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= tokenizer_->vocab_size())
      throw ApiError(400, "'tokens' must be a list of token ids within the vocabulary", "tokens");
    ids.push_back(t.get<TokenId>());
  }
  return json_response({{"prompt", tokenizer_->decode(ids, false)}});
}

}  // namespace pagoda::server
