// OpenAiServer: the request handler behind `pagoda serve`. Routes the OpenAI-compatible endpoints,
// checks keys and tenant limits, tokenizes (chat template first), enforces context and queue limits, and
// hands generation to a GenerationJob per request. All errors leave as OpenAI error objects.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "pagoda/engine/engine.h"
#include "pagoda/server/api_keys.h"
#include "pagoda/server/exchange.h"
#include "pagoda/server/gpu_timeline.h"
#include "pagoda/server/openai_request.h"
#include "pagoda/server/server_metrics.h"
#include "pagoda/server/trace_writer.h"
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
  ApiKeys api_keys;              // empty: no authentication
  TraceWriter* trace = nullptr;  // --trace-file: a JSON line per finished engine request; null: none
};

class OpenAiServer {
 public:
  // `tokenizer` may be null (token-id prompts only); `chat` may be empty (no chat endpoint).
  OpenAiServer(Engine& engine, const Tokenizer* tokenizer, ChatRenderer chat, OpenAiServerOptions options);

  // The HTTP handler; runs on the exchange's strand.
  void handle(const std::shared_ptr<Exchange>& exchange);
  ServerMetrics& metrics() { return metrics_; }
  // GET /debug/gpu_timeline draws this (null: 404). Set before serving.
  void set_gpu_timeline(GpuTimeline* timeline) { timeline_ = timeline; }

 private:
  void route(const std::shared_ptr<Exchange>& exchange);
  void generate(const std::shared_ptr<Exchange>& exchange, ParsedRequest parsed, const Tenant* tenant);
  // The rendered chat (400 when the model has no template, or the final message to continue is not in it).
  std::string chat_prompt(const nlohmann::ordered_json& messages, const ChatOptions& options) const;
  std::vector<TokenId> encode_chat(const std::string& rendered) const;
  void tokenize(const std::shared_ptr<Exchange>& exchange);
  void detokenize(const std::shared_ptr<Exchange>& exchange);
  void gpu_timeline(const std::shared_ptr<Exchange>& exchange);
  void check_model(const std::string& model) const;

  Engine& engine_;
  const Tokenizer* tokenizer_;
  ChatRenderer chat_;
  OpenAiServerOptions options_;
  ServerMetrics metrics_;
  GpuTimeline* timeline_ = nullptr;
  std::atomic<int> num_pending_{0};
  std::mutex tenants_mutex_;
  std::unordered_map<std::string, int> tenant_active_;  // HTTP requests in flight per tenant
  int64_t created_ = 0;
};

}  // namespace pagoda::server
