// GenerationJob: one /v1/completions or /v1/chat/completions request in flight. It submits one engine
// request per prompt and choice, turns engine events (posted onto the exchange's strand) into text through
// an incremental detokenizer and stop-string matcher, and answers with one JSON body or an SSE stream.
// The server gives it a WorkerExchange, whose strand is on its generation threads (a WorkerPool): all of that
// work runs there, and the HTTP I/O threads only write what it answers.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pagoda/engine/engine.h"
#include "pagoda/server/exchange.h"
#include "pagoda/server/openai_request.h"
#include "pagoda/server/server_metrics.h"
#include "pagoda/server/stop_matcher.h"
#include "pagoda/server/trace_writer.h"
#include "pagoda/tokenizer/incremental_detokenizer.h"
#include "pagoda/toolcall/tool_call_parser.h"

namespace pagoda::server {

struct JobContext {
  Engine* engine = nullptr;
  const Tokenizer* tokenizer = nullptr;  // may be null (token-id prompts only, no text)
  ServerMetrics* metrics = nullptr;
  // Engine requests not started yet: the server counts a job's in before creating it; the job counts each out as
  // it starts, and any left (never started: the job failed or was dropped at shutdown) when it ends.
  std::atomic<int>* num_pending = nullptr;
  std::string model_name;
  std::string tenant;
  TraceWriter* trace = nullptr;  // --trace-file; may be null
  // How a chat output is read into content and tool_calls (tool_request.h); null: it is all content.
  std::shared_ptr<const toolcall::ToolCallFormat> tool_format;
  std::vector<TokenId> eos_token_ids;  // the model's: a stop on one of them has no stop_reason (vLLM's rule)
  // Runs CPU work (a large response's body) on the request-thread pool, then what it returns on the job's strand; an
  // exception becomes the error response (OpenAiServer::off_io_threads). Null: work runs where asked for. Seconds of
  // work there would hold up every other stream's tokens on the generation threads.
  std::function<void(std::function<std::function<void()>()>)> off_io;
};

class GenerationJob : public std::enable_shared_from_this<GenerationJob> {
 public:
  using Clock = std::chrono::steady_clock;

  // `requests`: one per prompt (already tokenized), each run `parsed.n` times. `on_done` runs once, on the
  // exchange's strand, when the exchange has been answered. Every method runs on that strand.
  GenerationJob(JobContext context, ParsedRequest parsed, std::vector<GenerateRequest> requests,
                std::shared_ptr<Exchange> exchange, std::function<void()> on_done);
  ~GenerationJob();  // counts out its engine requests that never started (JobContext::num_pending)
  GenerationJob(const GenerationJob&) = delete;
  GenerationJob& operator=(const GenerationJob&) = delete;
  // Starts the response (for streams) and submits the engine requests.
  void start();

 private:
  struct LogprobEntry {
    std::string token;  // the token's piece in its context (tokenizer/token_piece.h)
    std::string bytes;  // what it adds to the text, broken UTF-8 kept (TokenPieces::bytes): text_offset walks these
    bool special = false;
    float logprob = 0;
    std::vector<std::pair<std::string, float>> top;
  };
  struct Choice {
    int index = 0;
    size_t prompt = 0;
    RequestId engine_id = 0;
    bool started = false, finished = false;
    std::optional<IncrementalDetokenizer> detok;
    std::vector<TokenId> recent;  // the last ids (prompt, then generated): the context of the next piece
    std::optional<StopMatcher> stop;
    std::string text;
    size_t text_chars = 0;  // utf8::char_count(text): text_offset counts characters
    int num_tokens = 0;
    FinishReason finish_reason = FinishReason::kNone;
    ErrorKind error_kind = ErrorKind::kNone;
    std::string error;
    nlohmann::json stop_reason;  // null, the stop string matched, or the stop token id (vLLM's stop_reason)
    std::vector<LogprobEntry> logprobs;
    std::vector<TopLogprobs> prompt_logprobs;
    Usage usage;
    Clock::time_point last_token;
    bool sent_role = false;
    std::optional<toolcall::ToolCallStream> tool_calls;  // streamed chat with a tool format
    RequestTimes times;                          // the engine's, as of the latest event
    std::vector<Clock::time_point> token_times;  // engine emission time of each token counted
    std::string timing;                          // RequestTrace::log_summary() once finished
  };

  void on_event(size_t c, const RequestEvent& e);
  // `e`: the event that ended the choice (its time is the finish time).
  void finish_choice(Choice& c, FinishReason reason, const RequestEvent& e);
  // Adds the matcher's released text to `delta`; when a stop string matched, also it (include_stop_str_in_output)
  // and sets the choice's stop_reason, and returns true.
  bool stopped_by_string(Choice& c, const StopMatcher::Result& r, std::string& delta) const;
  void trace_choice(Choice& c, Clock::time_point finished);
  void cancel_all();
  void complete();
  void done();  // the exchange is answered: on_done_, once
  // A whole response of more than about this many logprob entries (or 16 bytes of text each) is built on the
  // request-thread pool (JobContext::off_io).
  static constexpr size_t kInlineResponseEntries = 20'000;
  // `context`: the ids before `id`; each alternative in `top` is decoded in the same context.
  LogprobEntry logprob_entry(std::span<const TokenId> context, TokenId id, const TopLogprobs& top) const;
  // `text`: the response text from the first entry on, which starts at `text_offset` in the whole text. Offsets
  // count characters (code points), as OpenAI's and vLLM's do. In a stream's `last_chunk`, tokens past the text's
  // end (a stop string's) stand at its end, as in the whole response.
  nlohmann::json completion_logprobs(const std::vector<LogprobEntry>& entries, size_t text_offset,
                                     std::string_view text, bool last_chunk) const;
  nlohmann::json chat_logprobs(const std::vector<LogprobEntry>& entries) const;
  // The same as JSON text, written an entry at a time: a whole response's logprobs never exist as one JSON tree
  // (hundreds of bytes an alternative; RequestLimits::max_response_logprobs).
  std::string completion_logprobs_text(const std::vector<LogprobEntry>& entries, std::string_view text) const;
  std::string chat_logprobs_text(const std::vector<LogprobEntry>& entries) const;
  // A non-streamed choice as JSON text; its logprobs are moved out.
  std::string whole_choice_text(Choice& c) const;
  std::vector<LogprobEntry> echo_logprobs(const Choice& c) const;
  nlohmann::json usage_json() const;
  // `text_offset`: where the chunk's first logprob entry (and `delta`) starts in the choice's whole text
  // (the prompt's too, with echo), in characters.
  // `tool_call`: the chunk's delta is this tool-call entry instead of content.
  void send_chunk(const Choice& c, const std::string& delta, const std::vector<LogprobEntry>& logprobs, bool finished,
                  size_t text_offset, const toolcall::ToolCallDelta* tool_call = nullptr);
  // A streamed chat choice read by the tool format: its deltas, each a chunk (logprobs on the first), then the
  // finishing chunk.
  void send_tool_chunks(Choice& c, const std::string& text, const std::vector<LogprobEntry>& logprobs);
  // "tool_calls" for a choice that called tools and stopped by itself, as vLLM reports it.
  // OpenAI's finish_reason of a finished choice: its reason's name, or "tool_calls".
  const char* finish_reason(const Choice& c, bool called) const;
  void send_event(const nlohmann::json& j);

  JobContext ctx_;
  ParsedRequest parsed_;
  std::vector<GenerateRequest> requests_;
  std::shared_ptr<Exchange> exchange_;
  std::function<void()> on_done_;
  std::vector<Choice> choices_;
  std::vector<std::string> prompt_texts_;  // for echo
  std::vector<size_t> prompt_chars_;       // utf8::char_count of each
  size_t num_finished_ = 0;
  bool completed_ = false;
  std::string id_;
  int64_t created_ = 0;
  Clock::time_point arrival_;
  std::chrono::system_clock::time_point arrival_wall_;
  Clock::time_point event_time_{};  // when the engine emitted the event being handled (epoch: none yet)
};

}  // namespace pagoda::server
