// Engine events -> OpenAI completion / chat responses, whole or as server-sent events.
#include "pagoda/server/generation_job.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <limits>
#include <optional>
#include <random>
#include <span>

#include "pagoda/server/api_error.h"
#include "pagoda/tokenizer/token_piece.h"
#include "pagoda/tokenizer/utf8.h"

namespace pagoda::server {
namespace {

using nlohmann::json;

constexpr size_t kPieceContext = kDecodeContextTokens;  // ids a token's piece is decoded after (tokenizer.h)
const std::string kNoText;

std::string random_hex() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{:016x}{:016x}", rng(), rng());
}

double seconds(GenerationJob::Clock::duration d) { return std::chrono::duration<double>(d).count(); }

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

json logprob_value(float v) { return std::isfinite(v) ? json(v) : json(-9999.0); }

}  // namespace

GenerationJob::GenerationJob(JobContext context, ParsedRequest parsed, std::vector<GenerateRequest> requests,
                             std::shared_ptr<Exchange> exchange, std::function<void()> on_done)
    : ctx_(std::move(context)),
      parsed_(std::move(parsed)),
      requests_(std::move(requests)),
      exchange_(std::move(exchange)),
      on_done_(std::move(on_done)),
      arrival_(Clock::now()),
      arrival_wall_(std::chrono::system_clock::now()) {}

GenerationJob::~GenerationJob() {
  // The server counted every engine request in (choices_ is empty if start() never ran); each started one is out.
  const auto started = std::ranges::count_if(choices_, [](const Choice& c) { return c.started; });
  const int unstarted = static_cast<int>(requests_.size()) * parsed_.n - static_cast<int>(started);
  if (unstarted > 0) ctx_.num_pending->fetch_sub(unstarted);
}

void GenerationJob::start() {
  id_ = (parsed_.chat ? "chatcmpl-" : "cmpl-") + random_hex();
  created_ = static_cast<int64_t>(std::time(nullptr));
  const int n = parsed_.n;
  const StopMatcher stops(parsed_.stop);  // its automata, shared by every choice's copy
  for (size_t p = 0; p < requests_.size(); ++p) {
    if (parsed_.echo) {
      const PromptInput& in = parsed_.prompts[p];
      // (a truncated prompt echoes the tokens the model saw)
      const bool truncated = in.ids.size() != requests_[p].prompt_ids.size() || parsed_.truncate_prompt_tokens != 0;
      prompt_texts_.push_back(in.text && !truncated ? *in.text
                              : ctx_.tokenizer ? ctx_.tokenizer->decode(requests_[p].prompt_ids, parsed_.skip_special_tokens)
                                               : "");
      prompt_chars_.push_back(utf8::char_count(prompt_texts_.back()));
    }
    for (int i = 0; i < n; ++i) {
      Choice c;
      c.index = static_cast<int>(p) * n + i;
      c.prompt = p;
      if (ctx_.tokenizer) c.detok.emplace(*ctx_.tokenizer, requests_[p].prompt_ids, parsed_.skip_special_tokens);
      const std::vector<TokenId>& ids = requests_[p].prompt_ids;
      c.recent.assign(ids.end() - static_cast<std::ptrdiff_t>(std::min(ids.size(), kPieceContext)), ids.end());
      c.stop.emplace(stops);
      if (parsed_.stream && parsed_.chat && ctx_.tool_format) c.tool_calls.emplace(*ctx_.tool_format);
      choices_.push_back(std::move(c));
    }
  }
  if (parsed_.stream) exchange_->begin_stream(200, "text/event-stream");
  std::weak_ptr<GenerationJob> weak = weak_from_this();
  exchange_->on_cancel([weak] {
    if (auto self = weak.lock()) self->cancel_all();
  });
  auto self = shared_from_this();
  std::vector<Engine::Submission> submissions;
  submissions.reserve(choices_.size());
  for (size_t k = 0; k < choices_.size(); ++k) {
    const Choice& c = choices_[k];
    GenerateRequest r = requests_[c.prompt];
    const int i = c.index % n;
    if (r.params.seed && i > 0) r.params.seed = *r.params.seed + static_cast<uint64_t>(i);
    r.params.logprobs = parsed_.top_logprobs;
    if (parsed_.echo && parsed_.top_logprobs >= 0) r.params.prompt_logprobs = parsed_.top_logprobs;
    submissions.push_back({std::move(r), [self, k](const RequestEvent& e) {
                             // Engine thread: hand the event to the job's strand, never block here. The time stamp is
                             // where the server's own per-token overhead starts (HttpServerOptions::on_stream_delivery).
                             self->exchange_->post([self, k, e, produced = Clock::now()] {
                               self->event_time_ = produced;
                               self->on_event(k, e);
                             });
                           }});
  }
  // At once: a request's prompts and choices start in the same step. Their events run on this strand after this
  // returns, so the ids are set before any is read.
  const std::vector<RequestId> ids = ctx_.engine->submit_all(std::move(submissions));
  for (size_t k = 0; k < choices_.size(); ++k) choices_[k].engine_id = ids[k];
}

void GenerationJob::cancel_all() {
  for (const Choice& c : choices_)
    if (!c.finished) ctx_.engine->cancel(c.engine_id);
}

GenerationJob::LogprobEntry GenerationJob::logprob_entry(std::span<const TokenId> context, TokenId id,
                                                         const TopLogprobs& top) const {
  std::optional<TokenPieces> pieces;  // the context decoded once for the token and its alternatives
  if (ctx_.tokenizer != nullptr) pieces.emplace(*ctx_.tokenizer, context);
  const auto text = [&](TokenId t) { return pieces ? pieces->piece(t) : fmt::format("token_id:{}", t); };
  LogprobEntry e;
  e.token = text(id);
  e.bytes = pieces ? pieces->bytes(id) : e.token;
  e.special = ctx_.tokenizer != nullptr && ctx_.tokenizer->is_special(id);
  e.logprob = NAN;
  for (const TokenLogprob& t : top)
    if (t.id == id) e.logprob = t.logprob;
  const size_t k = std::min(top.size(), static_cast<size_t>(std::max(parsed_.top_logprobs, 0)));
  for (size_t i = 0; i < k; ++i) e.top.emplace_back(text(top[i].id), top[i].logprob);
  return e;
}

void GenerationJob::on_event(size_t k, const RequestEvent& e) {
  Choice& c = choices_[k];
  const auto now = Clock::now();
  if (!c.started) {
    c.started = true;
    ctx_.num_pending->fetch_sub(1);
    // The engine's own figure (submit to first scheduled); requests it never scheduled have none.
    if (e.queue_seconds >= 0) ctx_.metrics->observe_queue_time(e.queue_seconds);
    if (!e.new_token_ids.empty()) ctx_.metrics->observe_time_to_first_token(seconds(now - arrival_));
  } else if (!e.new_token_ids.empty()) {
    ctx_.metrics->observe_inter_token_latency(seconds(now - c.last_token));
  }
  if (!e.new_token_ids.empty()) c.last_token = now;
  if (c.finished) return;  // stopped on a stop string; this is the engine catching up
  c.usage = e.usage;
  c.times = e.times;
  if (!e.prompt_logprobs.empty()) c.prompt_logprobs = e.prompt_logprobs;
  const Clock::time_point emitted = e.time != Clock::time_point{} ? e.time : now;

  std::string delta;
  std::vector<LogprobEntry> logprobs;
  const size_t text_offset = c.text_chars;
  for (size_t t = 0; t < e.new_token_ids.size() && !c.finished; ++t) {
    const TokenId id = e.new_token_ids[t];
    ++c.num_tokens;
    c.token_times.push_back(emitted);
    if (parsed_.top_logprobs >= 0 && t < e.logprobs.size()) {
      logprobs.push_back(logprob_entry(c.recent, id, e.logprobs[t]));
      c.logprobs.push_back(logprobs.back());
    }
    c.recent.push_back(id);
    if (c.recent.size() > 2 * kPieceContext) c.recent.erase(c.recent.begin(), c.recent.end() - kPieceContext);
    // The token that stopped generation (EOS, or one of stop_token_ids) adds no text, as in vLLM (whose detokenizer
    // drops it unless include_stop_str_in_output); a stop_token_ids stop names the token in stop_reason, an EOS
    // stop leaves it null. Read for tool calls, the text would otherwise run past the calls.
    const bool stop_token = e.finished && e.finish_reason == FinishReason::kStop && t + 1 == e.new_token_ids.size();
    if (stop_token && !(!parsed_.params.ignore_eos && std::ranges::count(ctx_.eos_token_ids, id) > 0) &&
        std::ranges::count(parsed_.params.stop_token_ids, id) > 0)
      c.stop_reason = id;
    const bool keep_token_text = !stop_token || parsed_.include_stop_str_in_output;
    const std::string piece = c.detok && keep_token_text ? c.detok->push(id) : "";
    if (stopped_by_string(c, c.stop->push(piece), delta)) {
      ctx_.engine->cancel(c.engine_id);
      finish_choice(c, FinishReason::kStop, e);
    }
  }
  if (!c.finished && e.finished) {
    if (stopped_by_string(c, c.stop->push(c.detok ? c.detok->finish() : ""), delta)) {
      finish_choice(c, FinishReason::kStop, e);
    } else {
      delta += c.stop->flush();
      c.error_kind = e.error_kind;
      c.error = e.error;
      finish_choice(c, e.finish_reason, e);
    }
  }
  c.text += delta;
  c.text_chars += utf8::char_count(delta);
  if (c.tool_calls && c.finish_reason != FinishReason::kError) {
    send_tool_chunks(c, delta, logprobs);
  } else if (parsed_.stream && c.finish_reason != FinishReason::kError) {
    const std::string& prompt_text = parsed_.echo ? prompt_texts_[c.prompt] : kNoText;
    // where this chunk's first entry starts, in characters
    size_t chunk_start = (parsed_.echo ? prompt_chars_[c.prompt] : 0) + text_offset;
    if (parsed_.echo && !c.sent_role) {
      std::vector<LogprobEntry> all = parsed_.top_logprobs >= 0 ? echo_logprobs(c) : std::vector<LogprobEntry>{};
      all.insert(all.end(), logprobs.begin(), logprobs.end());
      logprobs = std::move(all);
      delta = prompt_text + delta;
      chunk_start = 0;
    }
    if (!delta.empty() || c.finished || !logprobs.empty()) {
      send_chunk(c, delta, logprobs, c.finished, chunk_start);
      c.sent_role = true;
    }
  }
  if (num_finished_ == choices_.size()) complete();
}

bool GenerationJob::stopped_by_string(Choice& c, const StopMatcher::Result& r, std::string& delta) const {
  delta += r.text;
  if (!r.stopped) return false;
  if (parsed_.include_stop_str_in_output) delta += *r.stopped;
  c.stop_reason = *r.stopped;
  return true;
}

void GenerationJob::finish_choice(Choice& c, FinishReason reason, const RequestEvent& e) {
  if (c.finished) return;
  c.finished = true;
  c.finish_reason = reason;
  ++num_finished_;
  ctx_.metrics->request_finished(reason);
  ctx_.metrics->observe_e2e_latency(seconds(Clock::now() - arrival_));
  trace_choice(c, e.time != Clock::time_point{} ? e.time : Clock::now());
}

void GenerationJob::trace_choice(Choice& c, Clock::time_point finished) {
  RequestTrace t;
  t.id = id_;
  t.choice = c.index;
  t.engine_id = c.engine_id;
  t.model = ctx_.model_name;
  t.tenant = ctx_.tenant.empty() ? "-" : ctx_.tenant;
  t.finish_reason = to_string(c.finish_reason);
  t.usage = c.usage;
  t.usage.prompt_tokens = static_cast<int>(requests_[c.prompt].prompt_ids.size());
  t.completion_tokens = c.num_tokens;
  t.arrival = arrival_;
  t.arrival_wall = arrival_wall_;
  t.times = c.times;
  t.token_times = std::move(c.token_times);
  t.finished = finished;
  ctx_.metrics->observe_trace(t);
  c.timing = t.log_summary();
  if (ctx_.trace) ctx_.trace->write(t);
}

std::vector<GenerationJob::LogprobEntry> GenerationJob::echo_logprobs(const Choice& c) const {
  std::vector<LogprobEntry> out;
  const std::vector<TokenId>& ids = requests_[c.prompt].prompt_ids;
  for (size_t j = 0; j < ids.size(); ++j) {
    const std::span<const TokenId> context(ids.data() + (j > kPieceContext ? j - kPieceContext : 0), ids.data() + j);
    const bool scored = j > 0 && j < c.prompt_logprobs.size();  // the first token has no logprob
    out.push_back(logprob_entry(context, ids[j], scored ? c.prompt_logprobs[j] : TopLogprobs{}));
  }
  return out;
}

namespace {

// A completions logprob entry's four values, one for each of the parallel arrays.
struct CompletionItem {
  size_t text_offset = 0;
  json token_logprob;
  const std::string* token = nullptr;
  json top;  // null for the prompt's first token
};

// The items of `entries` in order; `text` is the response text from the first entry on, starting at `text_offset`.
// `text_is_final`: nothing follows `text` (the whole response, or a stream's last chunk), so tokens past its end
// (those of a stop string, which the text leaves out) stand at its end; in a stream's other chunks they stand
// where the text they hold back will go.
template <typename Entries, typename Fn>
void for_each_completion_item(const Entries& entries, size_t text_offset, std::string_view text, bool text_is_final,
                              Fn&& fn) {
  const size_t end = text_is_final ? text_offset + utf8::char_count(text) : std::numeric_limits<size_t>::max();
  // Walks the entries' bytes along `text`: `local` bytes in, holding `chars` characters (counted at their first
  // byte), `pending` more bytes of the last one to come. A token inside a character (a byte-fallback token's
  // second byte of three) stands at that character's offset.
  size_t local = 0, chars = 0, pending = 0;
  for (const auto& e : entries) {
    CompletionItem item;
    item.token = &e.token;
    item.text_offset = std::min(end, text_offset + chars - (pending > 0 ? 1 : 0));
    const size_t advance = text_advance(text, local, e.bytes, e.special);  // the token's bytes, or all but its space
    for (const char byte : std::string_view(e.bytes).substr(e.bytes.size() - advance)) {
      if (utf8::is_continuation(byte) && pending > 0) {
        --pending;
      } else {
        ++chars;
        pending = utf8::sequence_length(byte) - 1;
      }
    }
    local += advance;
    const bool prompt_start = std::isnan(e.logprob) && e.top.empty();
    item.token_logprob = prompt_start ? json(nullptr) : logprob_value(e.logprob);
    if (!prompt_start) {
      item.top = json::object();
      for (const auto& [tok, lp] : e.top) item.top[tok] = logprob_value(lp);
    }
    fn(item);
  }
}

template <typename Entry>
json chat_item(const Entry& e) {
  json top = json::array();
  for (const auto& [tok, lp] : e.top) top.push_back({{"token", tok}, {"logprob", logprob_value(lp)}, {"bytes", bytes_of(tok)}});
  return {{"token", e.token}, {"logprob", logprob_value(e.logprob)}, {"bytes", bytes_of(e.bytes)}, {"top_logprobs", std::move(top)}};
}

// `object` dumped with one more member, `key`, whose value is the JSON text `raw`, in the place dump() would give
// it (nlohmann::json sorts keys).
std::string dump_with_member(const json& object, const std::string& key, std::string_view raw) {
  json before = json::object(), after = json::object();
  for (const auto& [k, v] : object.items()) (k < key ? before : after)[k] = v;
  std::string out = dump_json(before);
  out.pop_back();  // '}'
  if (!before.empty()) out += ',';
  out += dump_json(json(key));
  out += ':';
  out += raw;
  if (after.empty()) {
    out += '}';
  } else {
    out += ',';
    out += std::string_view(dump_json(after)).substr(1);
  }
  return out;
}

}  // namespace

json GenerationJob::completion_logprobs(const std::vector<LogprobEntry>& entries, size_t text_offset,
                                       std::string_view text, bool last_chunk) const {
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(), offsets = json::array();
  for_each_completion_item(entries, text_offset, text, last_chunk, [&](CompletionItem& item) {
    offsets.push_back(item.text_offset);
    token_logprobs.push_back(std::move(item.token_logprob));
    tokens.push_back(*item.token);
    top.push_back(std::move(item.top));
  });
  return {{"text_offset", offsets}, {"token_logprobs", token_logprobs}, {"tokens", tokens}, {"top_logprobs", top}};
}

json GenerationJob::chat_logprobs(const std::vector<LogprobEntry>& entries) const {
  json content = json::array();
  for (const LogprobEntry& e : entries) content.push_back(chat_item(e));
  return {{"content", std::move(content)}};
}

std::string GenerationJob::completion_logprobs_text(const std::vector<LogprobEntry>& entries, std::string_view text) const {
  // The members in dump()'s (sorted) order, as completion_logprobs() gives them.
  std::string offsets, token_logprobs, tokens, top;
  for_each_completion_item(entries, 0, text, /*text_is_final=*/true, [&](const CompletionItem& item) {
    if (!offsets.empty()) {
      offsets += ',';
      token_logprobs += ',';
      tokens += ',';
      top += ',';
    }
    offsets += std::to_string(item.text_offset);
    token_logprobs += dump_json(item.token_logprob);
    tokens += dump_json(json(*item.token));
    top += dump_json(item.top);
  });
  return R"({"text_offset":[)" + offsets + R"(],"token_logprobs":[)" + token_logprobs + R"(],"tokens":[)" + tokens +
         R"(],"top_logprobs":[)" + top + "]}";
}

std::string GenerationJob::chat_logprobs_text(const std::vector<LogprobEntry>& entries) const {
  std::string content;
  for (const LogprobEntry& e : entries) {
    if (!content.empty()) content += ',';
    content += dump_json(chat_item(e));
  }
  return R"({"content":[)" + content + "]}";
}

std::string GenerationJob::whole_choice_text(Choice& c) const {
  std::vector<LogprobEntry> entries;
  if (parsed_.top_logprobs >= 0) {
    if (parsed_.echo) entries = echo_logprobs(c);
    entries.insert(entries.end(), std::make_move_iterator(c.logprobs.begin()), std::make_move_iterator(c.logprobs.end()));
    std::vector<LogprobEntry>().swap(c.logprobs);
  }
  json choice = {{"index", c.index}};
  bool called = false;
  std::string logprobs = "null";
  if (parsed_.chat) {
    choice["message"] = {{"role", "assistant"}, {"content", c.text}};
    if (ctx_.tool_format) {
      toolcall::ParsedOutput out =
          toolcall::parse_tool_calls(*ctx_.tool_format, c.text, c.finish_reason == FinishReason::kLength);
      called = !out.tool_calls.empty();
      if (called) {
        json calls = json::array();
        for (const toolcall::ToolCall& t : out.tool_calls)
          calls.push_back({{"id", t.id}, {"type", "function"}, {"function", {{"name", t.name}, {"arguments", t.arguments}}}});
        choice["message"]["content"] = out.content.empty() ? json(nullptr) : json(out.content);
        choice["message"]["tool_calls"] = std::move(calls);
      }
    }
    if (parsed_.top_logprobs >= 0) logprobs = chat_logprobs_text(entries);
  } else {
    const std::string text = (parsed_.echo ? prompt_texts_[c.prompt] : "") + c.text;
    if (parsed_.top_logprobs >= 0) logprobs = completion_logprobs_text(entries, text);
    choice["text"] = text;
  }
  choice["finish_reason"] = finish_reason(c, called);
  choice["stop_reason"] = c.stop_reason;
  return dump_with_member(choice, "logprobs", logprobs);
}

json GenerationJob::usage_json() const {
  int prompt = 0, completion = 0, cached = 0;
  for (size_t p = 0; p < requests_.size(); ++p) {
    prompt += static_cast<int>(requests_[p].prompt_ids.size());
    cached += choices_[p * parsed_.n].usage.cached_tokens;
  }
  for (const Choice& c : choices_) completion += c.num_tokens;
  return {{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

void GenerationJob::send_event(const json& j) { exchange_->write("data: " + dump_json(j) + "\n\n", event_time_); }

const char* GenerationJob::finish_reason(const Choice& c, bool called) const {
  // A call to the function tool_choice named stays "stop", as in vLLM (and OpenAI).
  const bool named = parsed_.tools.choice == ToolRequest::Choice::kFunction;
  return called && !named && c.finish_reason == FinishReason::kStop ? "tool_calls" : to_string(c.finish_reason);
}

void GenerationJob::send_tool_chunks(Choice& c, const std::string& text, const std::vector<LogprobEntry>& logprobs) {
  std::vector<toolcall::OutputDelta> deltas = c.tool_calls->push(text);
  if (c.finished) {
    std::vector<toolcall::OutputDelta> rest = c.tool_calls->finish(c.finish_reason == FinishReason::kLength);
    deltas.insert(deltas.end(), std::make_move_iterator(rest.begin()), std::make_move_iterator(rest.end()));
  }
  if (deltas.empty() && !logprobs.empty()) deltas.push_back({});  // the logprobs of text held back go out now
  static const std::vector<LogprobEntry> kNoLogprobs;
  for (size_t i = 0; i < deltas.size(); ++i) {
    const toolcall::OutputDelta& d = deltas[i];
    send_chunk(c, d.content, i == 0 ? logprobs : kNoLogprobs, false, 0, d.tool_call ? &*d.tool_call : nullptr);
    c.sent_role = true;
  }
  if (c.finished) {
    send_chunk(c, "", {}, true, 0);
    c.sent_role = true;
  }
}

void GenerationJob::send_chunk(const Choice& c, const std::string& delta, const std::vector<LogprobEntry>& logprobs,
                               bool finished, size_t text_offset, const toolcall::ToolCallDelta* tool_call) {
  json choice;
  choice["index"] = c.index;
  if (parsed_.chat) {
    json d = json::object();
    if (!c.sent_role) d["role"] = "assistant";
    if (tool_call != nullptr) {
      json entry = {{"index", tool_call->index}};
      if (tool_call->id) {
        entry["id"] = *tool_call->id;
        entry["type"] = "function";
        entry["function"] = {{"name", tool_call->name.value_or("")}, {"arguments", tool_call->arguments}};
      } else {
        entry["function"] = {{"arguments", tool_call->arguments}};
      }
      d["tool_calls"] = json::array({std::move(entry)});
    } else if (!delta.empty() || !finished) {
      d["content"] = delta;
    }
    choice["delta"] = std::move(d);
    choice["logprobs"] = logprobs.empty() ? json(nullptr) : chat_logprobs(logprobs);
  } else {
    choice["text"] = delta;
    choice["logprobs"] = logprobs.empty() ? json(nullptr) : completion_logprobs(logprobs, text_offset, delta, finished);
  }
  choice["finish_reason"] = finished ? json(finish_reason(c, c.tool_calls && c.tool_calls->called())) : json(nullptr);
  choice["stop_reason"] = finished ? c.stop_reason : json(nullptr);
  json chunk = {{"id", id_}, {"object", parsed_.chat ? "chat.completion.chunk" : "text_completion"}, {"created", created_},
                {"model", ctx_.model_name}, {"choices", json::array({std::move(choice)})}};
  if (parsed_.include_usage) chunk["usage"] = nullptr;
  send_event(chunk);
}

void GenerationJob::complete() {
  if (completed_) return;
  completed_ = true;
  const json usage = usage_json();
  // Timings are choice 0's (the engine request of a plain n = 1 request).
  exchange_->log_note = fmt::format("id={} tenant={} prompt_tokens={} completion_tokens={} {}{}", id_,
                                    ctx_.tenant.empty() ? "-" : ctx_.tenant, usage["prompt_tokens"].get<int>(),
                                    usage["completion_tokens"].get<int>(), choices_.front().timing,
                                    choices_.size() > 1 ? fmt::format(" choices={}", choices_.size()) : "");
  const Choice* failed = nullptr;
  for (const Choice& c : choices_)
    if (c.finish_reason == FinishReason::kError) failed = &c;
  if (failed != nullptr) {
    const bool internal = failed->error_kind == ErrorKind::kInternal;
    const ApiError error(internal ? 500 : 400, failed->error.empty() ? "the request failed" : failed->error);
    if (parsed_.stream) {
      send_event(error.to_json());
      exchange_->write("data: [DONE]\n\n");
      exchange_->end_stream();
    } else {
      exchange_->respond(HttpResponse{error.status(), "application/json", dump_json(error.to_json()), {}});
    }
  } else if (parsed_.stream) {
    if (parsed_.include_usage) {
      send_event({{"id", id_}, {"object", parsed_.chat ? "chat.completion.chunk" : "text_completion"},
                  {"created", created_}, {"model", ctx_.model_name}, {"choices", json::array()}, {"usage", usage}});
    }
    exchange_->write("data: [DONE]\n\n");
    exchange_->end_stream();
  } else {
    // Written a choice at a time (whole_choice_text), so that a large response exists once, as its text.
    auto build = [self = shared_from_this(), usage] {
      std::string choices = "[";
      for (Choice& c : self->choices_) {
        if (choices.size() > 1) choices += ',';
        choices += self->whole_choice_text(c);
      }
      choices += ']';
      const json body = {{"id", self->id_}, {"object", self->parsed_.chat ? "chat.completion" : "text_completion"},
                         {"created", self->created_}, {"model", self->ctx_.model_name}, {"usage", usage}};
      return HttpResponse{200, "application/json", dump_with_member(body, "choices", choices), {}};
    };
    // Tens of MB of logprobs take seconds to write: on the request-thread pool, not on the generation threads, where
    // it would hold up other clients' streams (two such responses built on the I/O threads held /health for 20 s).
    // The choices are finished: later engine events for them change nothing it reads.
    size_t entries = 0;
    for (const Choice& c : choices_)
      entries += c.text.size() / 16 + c.logprobs.size() * (std::max(parsed_.top_logprobs, 0) + 1);
    if (ctx_.off_io && entries > kInlineResponseEntries) {
      ctx_.off_io([self = shared_from_this(), build = std::move(build)]() -> std::function<void()> {
        auto response = std::make_shared<HttpResponse>(build());
        return [self, response] {
          self->exchange_->respond(std::move(*response));
          self->done();
        };
      });
      return;
    }
    exchange_->respond(build());
  }
  done();
}

void GenerationJob::done() {
  if (on_done_) {
    auto fn = std::move(on_done_);
    fn();
  }
}

}  // namespace pagoda::server
