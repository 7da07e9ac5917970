// `pagoda serve`: load the model, start the engine, serve the OpenAI-compatible HTTP API until
// SIGINT/SIGTERM, then drain and exit 0.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "pagoda/cli/commands.h"
#include "pagoda/cli/engine_options.h"
#include "pagoda/cli/number_checks.h"
#include "pagoda/core/error.h"
#include "pagoda/core/logging.h"
#include "pagoda/core/text_file.h"
#include "pagoda/metrics/gpu_sampler.h"
#include "pagoda/server/gpu_timeline.h"
#include "pagoda/server/http_server.h"
#include "pagoda/server/openai_server.h"
#include "pagoda/server/trace_writer.h"
#if PAGODA_HAVE_CHAT_TEMPLATE
#include "pagoda/tokenizer/chat_template.h"
#endif

namespace pagoda::cli {
namespace {

namespace fs = std::filesystem;

struct ServeOptions {
  EngineCliOptions engine;
  server::HttpServerOptions http;
  std::string served_model_name;
  std::vector<std::string> api_keys;
  std::string api_keys_file;
  std::string tenants_file;
  int max_waiting_requests = 0;
  server::RequestLimits limits;
  int request_threads = 2;
  std::string chat_template;
  std::string trace_file;
  int gpu_sample_interval_ms = 50;
  std::vector<int> gpu_sample_devices;
  std::string gpu_timeline_file;
  std::string allowed_origins = "*", allowed_methods = "*", allowed_headers = "*";  // CORS (server/cors.h)
  bool allow_credentials = false;
  server::ToolServingOptions tools;
};

// The NVML devices to sample: --gpu-sample-devices, else the first of CUDA_VISIBLE_DEVICES when it is a
// number (NVML and CUDA agree on order when CUDA_DEVICE_ORDER=PCI_BUS_ID), else 0.
std::vector<int> gpu_devices(const ServeOptions& o) {
  if (!o.gpu_sample_devices.empty()) return o.gpu_sample_devices;
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
    char* end = nullptr;
    const long d = std::strtol(visible, &end, 10);
    if (end != visible && (*end == '\0' || *end == ',') && d >= 0) return {static_cast<int>(d)};
  }
  return {0};
}

void write_timeline(const server::GpuTimeline& timeline, const std::string& path) {
  const metrics::Heatmap h = timeline.heatmap();
  std::ofstream out(path);
  if (path.size() >= 4 && path.compare(path.size() - 4, 4, ".svg") == 0) {
    out << metrics::render_svg(h);
  } else {
    out << metrics::to_json(h).dump(1) << "\n";
  }
  if (!out) throw Error(path + ": cannot write the GPU timeline");
  spdlog::info("GPU timeline ({} steps) written to {}", timeline.num_steps(), path);
}

// Clears the engine's step observer when the objects it points to go away.
struct StepObserverGuard {
  Engine* engine;
  ~StepObserverGuard() {
    if (engine) engine->set_step_observer({});
  }
};

// The model's chat template (--chat-template, else tokenizer_config.json next to the weights, else the
// documented ChatML-like default).
server::ChatRenderer make_chat_renderer(const ServeOptions& o, const std::string& model_path, const Tokenizer* tok) {
  if (tok == nullptr) return {};
  const auto token_text = [tok](std::optional<TokenId> id) { return id ? std::string(tok->token_string(*id)) : ""; };
  const std::vector<TokenId> eos = tok->eos_token_ids();
  const std::string bos_text = token_text(tok->bos_token_id());
  const std::string eos_text = token_text(eos.empty() ? std::nullopt : std::optional<TokenId>(eos.front()));
#if PAGODA_HAVE_CHAT_TEMPLATE
  std::shared_ptr<ChatTemplate> tmpl;
  if (!o.chat_template.empty()) {
    tmpl = std::make_shared<ChatTemplate>(read_text_file(o.chat_template, "the chat template"), bos_text, eos_text, o.chat_template);
  } else {
    const fs::path config = fs::path(model_path) / "tokenizer_config.json";
    std::error_code ec;
    if (fs::is_directory(model_path, ec) && fs::is_regular_file(config, ec))
      tmpl = std::shared_ptr<ChatTemplate>(ChatTemplate::from_tokenizer_config(config.string()));
    if (!tmpl) {
      spdlog::info("no chat template in the model; using the ChatML-like default");
      tmpl = std::shared_ptr<ChatTemplate>(ChatTemplate::fallback());
    }
  }
  return [tmpl](const nlohmann::ordered_json& messages, bool add_generation_prompt,
                const nlohmann::ordered_json& template_kwargs) {
    return tmpl->render(ChatTemplateInputs{messages, add_generation_prompt, template_kwargs});
  };
#else
  (void)model_path;
  (void)bos_text;
  (void)eos_text;
  if (!o.chat_template.empty()) throw Error("--chat-template needs a build with chat-template support");
  // The same ChatML-like default ChatTemplate::fallback() documents.
  return [](const nlohmann::ordered_json& messages, bool add_generation_prompt, const nlohmann::ordered_json&) {
    std::string out;
    for (const auto& m : messages) {
      std::string content;
      if (m.contains("content") && m["content"].is_string()) {
        content = m["content"].get<std::string>();
      } else if (m.contains("content") && m["content"].is_array()) {
        for (const auto& part : m["content"])
          if (part.is_object() && part.value("type", "") == "text") content += part.value("text", "");
      }
      out += "<|im_start|>" + m["role"].get<std::string>() + "\n" + content + "<|im_end|>\n";
    }
    if (add_generation_prompt) out += "<|im_start|>assistant\n";
    return out;
  };
#endif
}

void run_serve(ServeOptions& o) {
  o.http.cors.origins = server::parse_cors_list("--allowed-origins", o.allowed_origins);
  o.http.cors.methods = server::parse_cors_list("--allowed-methods", o.allowed_methods);
  o.http.cors.headers = server::parse_cors_list("--allowed-headers", o.allowed_headers);
  o.http.cors.credentials = o.allow_credentials;
  LlmOptions llm_options = o.engine.llm_options();
  const std::string model_path = llm_options.load.model_path;
  server::OpenAiServerOptions so;
  so.served_model_name =
      o.served_model_name.empty() ? fs::path(model_path).filename().string() : o.served_model_name;
  if (so.served_model_name.empty()) so.served_model_name = fs::path(model_path).parent_path().filename().string();
  so.model_path = model_path;
  so.max_waiting_requests = o.max_waiting_requests;
  so.limits = o.limits;
  so.num_workers = o.request_threads;
  if (o.tools.enable_auto_tool_choice && o.tools.parser.empty())
    throw Error("--enable-auto-tool-choice needs --tool-call-parser (" + std::string(toolcall::kToolCallParsers) + ")");
  so.tools = o.tools;
  for (const std::string& key : o.api_keys) so.api_keys.add(key, server::Tenant{"default", 0});
  if (!o.api_keys_file.empty()) so.api_keys.load_file(o.api_keys_file);
  if (!o.tenants_file.empty()) so.api_keys.load_tenants_file(o.tenants_file);
  std::unique_ptr<server::TraceWriter> trace;
  if (!o.trace_file.empty()) {
    trace = std::make_unique<server::TraceWriter>(o.trace_file);
    so.trace = trace.get();
  }
  auto llm = std::make_unique<LLM>(llm_options);
  so.max_model_len = llm->max_model_len();
  so.num_logits = static_cast<int>(llm->model().config.vocab_size);
  so.eos_token_ids = model_eos_token_ids(llm->model());
  server::OpenAiServer api(llm->engine(), llm->tokenizer(), make_chat_renderer(o, model_path, llm->tokenizer()), so);
  o.http.on_stream_delivery = [&api](double seconds) { api.metrics().observe_stream_delivery(seconds); };
  o.http.screen = [&api](const server::HttpRequest& head) { return api.screen(head); };
  server::HttpServer http(o.http, [&api](std::shared_ptr<server::Exchange> ex) { api.handle(ex); });
  metrics::GpuSamplerOptions gpu;
  gpu.interval_ms = o.gpu_sample_interval_ms;
  gpu.devices = gpu_devices(o);
  metrics::GpuSampler sampler(gpu, api.metrics().registry(), api.metrics().labels());
  spdlog::info("GPU sampler {}", sampler.status());
  server::GpuTimeline timeline(&sampler);
  api.set_gpu_timeline(&timeline);
  llm->engine().set_step_observer([&timeline, &api](const StepRecord& step) {
    timeline.add_step(step);
    api.metrics().observe_step(step);
  });
  StepObserverGuard guard{&llm->engine()};
  if (trace) spdlog::info("tracing requests to {}", trace->path());
  spdlog::info("serving {} on http://{}:{} ({} I/O threads{})", so.served_model_name, o.http.host, http.bound_port(),
               o.http.num_threads, so.api_keys.enabled() ? ", API keys required" : "");
  http.run();
  // Stop the engine while the I/O context still exists: its last events (aborts) are posted to it.
  guard.engine = nullptr;
  api.finish_background_work();  // it reads the tokenizer, which goes with the LLM
  llm.reset();
  if (!o.gpu_timeline_file.empty()) write_timeline(timeline, o.gpu_timeline_file);
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto opts = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve a model over an OpenAI-compatible HTTP API");
  opts->engine.add_to(*cmd);
  auto& h = opts->http;
  cmd->add_option("--host", h.host, "address to listen on (default 0.0.0.0)");
  cmd->add_option("--port", h.port, "port (default 8000; 0: any free port)")->check(CLI::Range(0, 65535));
  cmd->add_option("--served-model-name", opts->served_model_name, "model id in the API (default: the model path's basename)");
  cmd->add_option("--allowed-origins", opts->allowed_origins,
                  "origins whose browser pages may call the API (CORS), as a JSON list or comma-separated (default * : any)");
  cmd->add_option("--allowed-methods", opts->allowed_methods, "CORS: methods cross-origin pages may use (default *)");
  cmd->add_option("--allowed-headers", opts->allowed_headers, "CORS: request headers cross-origin pages may send (default *)");
  cmd->add_flag("--allow-credentials", opts->allow_credentials,
                "CORS: let cross-origin pages send credentials (cookies); the allowed origin is then named, never *");
  cmd->add_option("--api-key", opts->api_keys, "require this bearer key (repeatable; tenant \"default\")");
  cmd->add_option("--api-keys-file", opts->api_keys_file,
                  "keys and tenants: JSON {\"KEY\": \"tenant\" | {\"tenant\", \"max_concurrent_requests\", "
                  "\"max_requests_per_second\"}} or lines \"KEY TENANT [MAX_CONCURRENT [MAX_PER_SECOND]]\"");
  cmd->add_option("--tenants-file", opts->tenants_file,
                  "tenants and their keys: JSON {\"tenants\": {\"NAME\": {\"keys\": [...], \"weight\": W, "
                  "\"kv_share\": S, \"kv_cap\": C, \"max_concurrent_requests\": N, \"max_requests_per_second\": R, "
                  "\"share_prefixes\": B}}}; shares and caps are fractions of the KV pool (<= 1) or tokens")
      ->check(CLI::ExistingFile);
  cmd->add_option("--max-waiting-requests", opts->max_waiting_requests,
                  "answer 429 when this many requests wait to start (default 0: unlimited)")
      ->check(kNonNegative);
  cmd->add_option("--chat-template", opts->chat_template, "a Jinja chat template file (default: the model's)");
  cmd->add_flag("--enable-auto-tool-choice", opts->tools.enable_auto_tool_choice,
                "let the model decide when to call tools (tool_choice \"auto\", the default when a request has tools); "
                "needs --tool-call-parser");
  cmd->add_option("--tool-call-parser", opts->tools.parser,
                  "how the model writes tool calls: llama3_json (Llama 3.1/3.2), hermes (<tool_call> blocks), "
                  "mistral ([TOOL_CALLS] and a JSON array)")
      ->check(CLI::IsMember({"llama3_json", "hermes", "mistral"}));
  cmd->add_flag("--exclude-tools-when-tool-choice-none", opts->tools.exclude_tools_when_tool_choice_none,
                "leave a request's tools out of the prompt when its tool_choice is \"none\" (by default the template "
                "still sees them)");
  // Bounded: thread creation failing (100,000 asked) aborted the process instead of a one-line error.
  cmd->add_option("--io-threads", h.num_threads, "HTTP I/O threads, 1 to 256 (default 2)")->check(CLI::Range(1, 256));
  cmd->add_option("--request-threads", opts->request_threads,
                  "threads that parse, template and tokenize large request bodies, and as many that turn generated "
                  "tokens into responses, off the I/O threads, 1 to 256 (default 2)")
      ->check(CLI::Range(1, 256));
  cmd->add_option("--timeout-keep-alive", h.idle_timeout_s, "seconds an idle connection stays open (default 60)")
      ->check(kPositive);
  cmd->add_option("--shutdown-timeout", h.shutdown_deadline_s,
                  "seconds in-flight requests get to finish after SIGINT/SIGTERM (default 10)")
      ->check(kNonNegative);
  cmd->add_option("--max-connections-per-client", h.max_connections_per_client,
                  "open connections one client address may hold; more get 429 (default 2048; 0: no limit)")
      ->check(kNonNegative);
  cmd->add_option("--max-request-body", h.body_limit, "largest request body in bytes (default 16 MiB)")
      ->check(kPositive);
  server::RequestLimits& l = opts->limits;
  cmd->add_option("--max-json-depth", l.max_json_depth,
                  fmt::format("deepest nesting of arrays and objects in a request body (default {})", l.max_json_depth))
      ->check(CLI::Range(2, 10000));
  cmd->add_option("--max-request-sequences", l.max_sequences,
                  fmt::format("most prompts x n in one request (default {})", l.max_sequences))
      ->check(kPositive);
  cmd->add_option("--max-n", l.max_n, fmt::format("largest n (default {})", l.max_n))->check(kPositive);
  cmd->add_option("--max-request-tokens", l.max_tokens,
                  fmt::format("most tokens one request may ask for: (prompt + max_tokens) x n over its prompts "
                              "(default {})", l.max_tokens))
      ->check(kPositive);
  cmd->add_option("--max-stop-strings", l.max_stop_strings,
                  fmt::format("most `stop` strings in one request (default {})", l.max_stop_strings))
      ->check(kPositive);
  cmd->add_option("--max-stop-bytes", l.max_stop_bytes,
                  fmt::format("most bytes of `stop` strings in one request, summed (default {})", l.max_stop_bytes))
      ->check(kPositive);
  cmd->add_option("--max-response-logprobs", l.max_response_logprobs,
                  fmt::format("most logprob entries (a token's and each alternative's) one non-streamed response may "
                              "hold: (max_tokens x (logprobs + 1) and the prompt's with echo) x n over the prompts "
                              "(default {}); streams are not limited", l.max_response_logprobs))
      ->check(kPositive);
  cmd->add_option("--trace-file", opts->trace_file,
                  "append one JSON line per finished request: engine times (queued, scheduled, prefill done, each "
                  "token, finished)");
  cmd->add_option("--gpu-sample-interval-ms", opts->gpu_sample_interval_ms,
                  "NVML GPU sampling period (default 50; 0: off; without NVML the sampler is off)")
      ->check(CLI::Range(0, 10000));
  cmd->add_option("--gpu-sample-devices", opts->gpu_sample_devices,
                  "NVML device indices to sample, e.g. 0,1 (default: the first of CUDA_VISIBLE_DEVICES, else 0)")
      ->delimiter(',');
  cmd->add_option("--gpu-timeline-file", opts->gpu_timeline_file,
                  "at shutdown, write the GPU/step timeline heatmap here (.svg: an image; else JSON)");
  cmd->callback([opts] { run_serve(*opts); });
}

}  // namespace pagoda::cli
