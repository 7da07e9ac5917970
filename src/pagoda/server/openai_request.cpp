// Request-body parsing and validation for the OpenAI endpoints.
#include "pagoda/server/openai_request.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "pagoda/core/error.h"
#include "pagoda/runner/logit_bias.h"
#include "pagoda/server/api_error.h"
#include "pagoda/server/bad_words.h"
#include "pagoda/server/output_constraint_fields.h"
#include "pagoda/server/request_fields.h"

namespace pagoda::server {
namespace {

using json = nlohmann::ordered_json;  // parse_json_object's

constexpr int kMaxLogprobs = 20;

[[noreturn]] void bad(const std::string& field, const std::string& expected) {
  throw ApiError(400, fmt::format("'{}' must be {}", field, expected), field);
}

bool present(const json& o, const char* field) { return o.contains(field) && !o[field].is_null(); }

double number(const json& o, const char* field, double fallback) {
  if (!present(o, field)) return fallback;
  if (!o[field].is_number()) bad(field, "a number");
  return o[field].get<double>();
}

// An integer field within [lo, hi] (an integral number written as a float, such as 4.0, counts), checked
// before any narrowing: 2^32 + 1 is out of range, not 1. Anything else is a 400 naming the field.
int64_t integer(const json& o, const char* field, int64_t fallback, int64_t lo = std::numeric_limits<int64_t>::min(),
                int64_t hi = std::numeric_limits<int64_t>::max()) {
  if (!present(o, field)) return fallback;
  const json& v = o[field];
  const std::string expected = lo == std::numeric_limits<int64_t>::min() && hi == std::numeric_limits<int64_t>::max()
                                   ? "an integer"
                                   : fmt::format("an integer in [{}, {}]", lo, hi);
  if (v.is_number_unsigned()) {  // nlohmann stores every non-negative integer literal as unsigned
    const uint64_t u = v.get<uint64_t>();
    if (hi < 0 || u > static_cast<uint64_t>(hi) || (lo > 0 && u < static_cast<uint64_t>(lo))) bad(field, expected);
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    if (i < lo || i > hi) bad(field, expected);
    return i;
  }
  if (!v.is_number_float()) bad(field, expected);
  const double d = v.get<double>();
  // A float is an integer only where doubles hold every integer, |d| <= 2^53 (-9223372036854775809 reads as -2^63);
  // the bounds are compared as doubles only inside that range.
  if (!(std::fabs(d) <= 0x1p53) || d != std::floor(d)) bad(field, expected);
  const auto i = static_cast<int64_t>(d);
  if (i < lo || i > hi) bad(field, expected);
  return i;
}

bool boolean(const json& o, const char* field, bool fallback) {
  if (!present(o, field)) return fallback;
  if (!o[field].is_boolean()) bad(field, "true or false");
  return o[field].get<bool>();
}

std::string string(const json& o, const char* field) {
  if (!present(o, field)) return "";
  if (!o[field].is_string()) bad(field, "a string");
  return o[field].get<std::string>();
}

void range(const char* field, double v, double lo, double hi, const char* what) {
  if (!(v >= lo && v <= hi)) bad(field, what);
}

std::vector<TokenId> token_ids(const json& v, const std::string& field) {
  std::vector<TokenId> ids;
  for (const json& e : v) {
    if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() > std::numeric_limits<int32_t>::max())
      bad(field, "a string, a list of strings, a list of token ids or a list of token-id lists");
    ids.push_back(static_cast<TokenId>(e.get<int64_t>()));
  }
  return ids;
}

// Fields shared by both endpoints.
void parse_common(const json& o, const RequestLimits& limits, ParsedRequest& r) {
  r.model = string(o, "model");
  r.constraint = parse_output_constraint(o);
  SamplingParams& p = r.params;
  p.temperature = number(o, "temperature", 1.0);
  range("temperature", p.temperature, 0, 100, "in [0, 100]");
  p.top_p = number(o, "top_p", 1.0);
  if (!(p.top_p > 0 && p.top_p <= 1)) bad("top_p", "in (0, 1]");
  p.top_k = static_cast<int>(integer(o, "top_k", 0, -1, std::numeric_limits<int32_t>::max()));
  p.min_p = number(o, "min_p", 0.0);
  range("min_p", p.min_p, 0, 1, "in [0, 1]");
  p.presence_penalty = number(o, "presence_penalty", 0.0);
  range("presence_penalty", p.presence_penalty, -2, 2, "in [-2, 2]");
  p.frequency_penalty = number(o, "frequency_penalty", 0.0);
  range("frequency_penalty", p.frequency_penalty, -2, 2, "in [-2, 2]");
  p.repetition_penalty = number(o, "repetition_penalty", 1.0);
  if (!(p.repetition_penalty > 0 && p.repetition_penalty <= 100)) bad("repetition_penalty", "in (0, 100]");
  if (present(o, "seed")) p.seed = static_cast<uint64_t>(integer(o, "seed", 0));
  p.ignore_eos = boolean(o, "ignore_eos", false);
  if (present(o, "logit_bias")) {
    try {
      p.logit_bias = parse_logit_bias(o["logit_bias"]);
    } catch (const InvalidRequest& e) {
      throw ApiError(400, e.what(), "logit_bias");
    }
  }
  if (present(o, "allowed_token_ids")) {  // vLLM's: only these may be sampled
    const json& v = o["allowed_token_ids"];
    if (!v.is_array() || v.empty()) bad("allowed_token_ids", "a non-empty list of token ids");
    for (const json& e : v) {
      if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() > std::numeric_limits<int32_t>::max())
        bad("allowed_token_ids", "a non-empty list of token ids");
      r.allowed_token_ids.push_back(static_cast<TokenId>(e.get<int64_t>()));
    }
    std::sort(r.allowed_token_ids.begin(), r.allowed_token_ids.end());
    r.allowed_token_ids.erase(std::unique(r.allowed_token_ids.begin(), r.allowed_token_ids.end()),
                              r.allowed_token_ids.end());
  }
  if (present(o, "bad_words")) {  // vLLM's: encoded by the server (bad_words.h), which holds the tokenizer
    const json& v = o["bad_words"];
    const std::string expected = fmt::format("a list of at most {} strings of 1 to {} bytes, not only spaces",
                                             kMaxBadWords, kMaxBadWordBytes);
    if (!v.is_array() || v.size() > kMaxBadWords) bad("bad_words", expected);
    for (const json& e : v) {
      if (!e.is_string()) bad("bad_words", expected);
      const std::string& word = e.get_ref<const std::string&>();
      if (word.empty() || word.size() > kMaxBadWordBytes || word.find_first_not_of(" \t\n\r") == std::string::npos)
        bad("bad_words", expected);
      r.bad_words.push_back(word);
    }
  }
  if (present(o, "stop_token_ids")) {
    if (!o["stop_token_ids"].is_array()) bad("stop_token_ids", "a list of token ids");
    p.stop_token_ids = token_ids(o["stop_token_ids"], "stop_token_ids");
  }
  r.n = static_cast<int>(integer(o, "n", 1, 1, limits.max_n));
  r.stream = boolean(o, "stream", false);
  if (present(o, "stream_options")) {
    const json& so = o["stream_options"];
    if (!so.is_object()) bad("stream_options", "an object");
    if (present(so, "include_usage")) {
      if (!so["include_usage"].is_boolean()) bad("stream_options.include_usage", "true or false");
      r.include_usage = so["include_usage"].get<bool>();
    }
  }
  if (present(o, "stop")) {
    const json& s = o["stop"];
    if (s.is_string()) {
      r.stop.push_back(s.get<std::string>());
    } else if (s.is_array()) {
      for (const json& e : s) {
        if (!e.is_string()) bad("stop", "a string or a list of strings");
        r.stop.push_back(e.get<std::string>());
      }
    } else {
      bad("stop", "a string or a list of strings");
    }
    // As vLLM refuses it (SamplingParams: "stop cannot contain an empty string"): it was dropped without a word.
    if (std::ranges::any_of(r.stop, [](const std::string& s) { return s.empty(); }))
      throw ApiError(400, "stop cannot contain an empty string", "stop");
    if (r.stop.size() > static_cast<size_t>(limits.max_stop_strings))
      throw ApiError(400, fmt::format("stop: {} strings, more than the {} allowed (--max-stop-strings)", r.stop.size(),
                                      limits.max_stop_strings),
                     "stop");
    int64_t bytes = 0;
    for (const std::string& s : r.stop) bytes += static_cast<int64_t>(s.size());
    if (bytes > limits.max_stop_bytes)
      throw ApiError(400, fmt::format("stop: {} bytes in all, more than the {} allowed (--max-stop-bytes)", bytes,
                                      limits.max_stop_bytes),
                     "stop");
  }
  r.priority = static_cast<int>(
      integer(o, "priority", 0, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()));
  r.cache_salt = string(o, "cache_salt");
  r.user = string(o, "user");
  r.skip_special_tokens = boolean(o, "skip_special_tokens", true);
  r.include_stop_str_in_output = boolean(o, "include_stop_str_in_output", false);
  // vLLM's: keep the prompt's last k tokens (-1: as many as the context holds with one token to generate).
  r.truncate_prompt_tokens = integer(o, "truncate_prompt_tokens", 0, -1, std::numeric_limits<int32_t>::max());
  if (r.truncate_prompt_tokens == 0 && present(o, "truncate_prompt_tokens")) bad("truncate_prompt_tokens", "-1 or >= 1");
  const char* max_field = r.chat && present(o, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  if (present(o, max_field)) {
    p.max_tokens = static_cast<int>(integer(o, max_field, 0, 1, std::numeric_limits<int32_t>::max()));
    r.max_tokens_given = true;
  }
}

// An assistant message's tool_calls as templates read them: each call's function.arguments (a JSON string in
// OpenAI's API) parsed into an object, "" or null as {} (vLLM's conversion before rendering).
json template_tool_calls(const json& calls, const std::string& field, int max_json_depth) {
  if (!calls.is_array()) bad(field, "a list of tool calls");
  json out = calls;
  for (size_t j = 0; j < out.size(); ++j) {
    const std::string where = fmt::format("{}[{}]", field, j);
    json& call = out[j];
    if (!call.is_object() || !present(call, "function") || !call["function"].is_object())
      bad(where, "an object {\"id\": ..., \"type\": \"function\", \"function\": {\"name\": ..., \"arguments\": ...}}");
    json& fn = call["function"];
    if (!present(fn, "name") || !fn["name"].is_string()) bad(where + ".function.name", "a string");
    if (!present(fn, "arguments") || (fn["arguments"].is_string() && fn["arguments"].get<std::string>().empty())) {
      fn["arguments"] = json::object();
    } else if (fn["arguments"].is_string()) {
      json args;
      try {  // (a JSON text inside the body: bounded as deep as the body)
        args = parse_ordered_json(fn["arguments"].get_ref<const std::string&>(), max_json_depth);
      } catch (const JsonTooDeep&) {
        bad(where + ".function.arguments", fmt::format("a JSON object nested at most {} levels deep", max_json_depth));
      } catch (const json::exception&) {
        bad(where + ".function.arguments", "a JSON object as a string");
      }
      fn["arguments"] = std::move(args);
    } else if (!fn["arguments"].is_object()) {
      bad(where + ".function.arguments", "a JSON object as a string");
    }
  }
  return out;
}

}  // namespace

json parse_json_object(const std::string& body, int max_depth) {
  json o;
  try {
    o = parse_ordered_json(body, max_depth);
  } catch (const JsonTooDeep&) {
    throw ApiError(400, fmt::format("the request body nests arrays and objects deeper than {} levels", max_depth));
  } catch (const json::parse_error& e) {
    throw ApiError(400, fmt::format("the request body is not valid JSON (at byte {})", e.byte));
  } catch (const json::out_of_range&) {  // a number beyond double's range, such as 1e400
    throw ApiError(400, "the request body holds a number out of range (JSON numbers must fit a double)");
  }
  if (!o.is_object()) throw ApiError(400, "the request body must be a JSON object");
  return o;
}

ChatOptions parse_chat_options(const json& o) {
  ChatOptions c;
  c.continue_final_message = boolean(o, "continue_final_message", false);
  c.add_generation_prompt = boolean(o, "add_generation_prompt", !c.continue_final_message);
  if (c.continue_final_message && c.add_generation_prompt)
    throw ApiError(400, "'continue_final_message' and 'add_generation_prompt' cannot both be true",
                   "continue_final_message");
  if (present(o, "chat_template_kwargs")) {
    if (!o["chat_template_kwargs"].is_object()) bad("chat_template_kwargs", "an object of template variables");
    for (const char* reserved : {"messages", "add_generation_prompt"})
      if (o["chat_template_kwargs"].contains(reserved))
        throw ApiError(400, fmt::format("'chat_template_kwargs' cannot set '{}': it is a request field", reserved),
                       "chat_template_kwargs");
    c.template_kwargs = o["chat_template_kwargs"];
  }
  return c;
}

ParsedRequest parse_completion_request(const std::string& body, const RequestLimits& limits) {
  const json o = parse_json_object(body, limits.max_json_depth);
  check_and_log_request_fields(o, /*chat=*/false);
  ParsedRequest r;
  parse_common(o, limits, r);
  if (!present(o, "prompt")) throw ApiError(400, "'prompt' is required", "prompt");
  const json& prompt = o["prompt"];
  const char* shape = "a string, a list of strings, a list of token ids or a list of token-id lists";
  const bool batch = prompt.is_array() && !prompt.empty() && (prompt[0].is_string() || prompt[0].is_array());
  const int64_t num_sequences = static_cast<int64_t>(batch ? prompt.size() : 1) * r.n;
  if (num_sequences > limits.max_sequences)
    throw ApiError(400, fmt::format("{} prompts x n = {} sequences: a request may ask for at most {}",
                                    batch ? prompt.size() : 1, num_sequences, limits.max_sequences), "prompt");
  if (prompt.is_string()) {
    r.prompts.push_back(PromptInput{prompt.get<std::string>(), {}});
  } else if (prompt.is_array()) {
    if (prompt.empty()) bad("prompt", "non-empty");
    if (prompt[0].is_string()) {
      for (const json& e : prompt) {
        if (!e.is_string()) bad("prompt", shape);
        r.prompts.push_back(PromptInput{e.get<std::string>(), {}});
      }
    } else if (prompt[0].is_number_integer()) {
      r.prompts.push_back(PromptInput{std::nullopt, token_ids(prompt, "prompt")});
    } else if (prompt[0].is_array()) {
      for (const json& e : prompt) {
        if (!e.is_array()) bad("prompt", shape);
        r.prompts.push_back(PromptInput{std::nullopt, token_ids(e, "prompt")});
      }
    } else {
      bad("prompt", shape);
    }
  } else {
    bad("prompt", shape);
  }
  r.echo = boolean(o, "echo", false);
  r.add_special_tokens = boolean(o, "add_special_tokens", true);
  if (present(o, "logprobs")) {
    r.top_logprobs = static_cast<int>(integer(o, "logprobs", 0, 0, kMaxLogprobs));
  }
  return r;
}

json parse_chat_messages(const json& messages, int max_json_depth) {
  if (!messages.is_array() || messages.empty()) bad("messages", "a non-empty list of messages");
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    const std::string field = fmt::format("messages[{}]", i);
    if (!m.is_object()) bad(field, "an object with 'role' and 'content'");
    if (!m.contains("role") || !m["role"].is_string()) bad(field + ".role", "a string");
    if (m.contains("content") && !(m["content"].is_string() || m["content"].is_array() || m["content"].is_null()))
      bad(field + ".content", "a string or a list of content parts");
    if (present(m, "tool_call_id") && !m["tool_call_id"].is_string()) bad(field + ".tool_call_id", "a string");
  }
  json out = messages;
  for (size_t i = 0; i < out.size(); ++i) {
    json& m = out[i];
    // vLLM renders a message without content (an assistant turn that only calls tools) with content "".
    if (!present(m, "content")) m["content"] = "";
    if (present(m, "tool_calls")) m["tool_calls"] = template_tool_calls(m["tool_calls"], fmt::format("messages[{}].tool_calls", i), max_json_depth);
  }
  // Content parts, as vLLM gives them to a text-only chat template: the text parts joined by newlines.
  for (size_t i = 0; i < out.size(); ++i) {
    json& m = out[i];
    if (!m.contains("content") || !m["content"].is_array()) continue;
    std::string text;
    for (size_t j = 0; j < m["content"].size(); ++j) {
      const json& part = m["content"][j];
      const std::string where = fmt::format("messages[{}].content[{}]", i, j);
      if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
        bad(where, "a content part with a 'type'");
      const std::string type = part["type"].get<std::string>();
      if (type != "text")
        throw ApiError(400, fmt::format("{}: content parts of type '{}' are not supported: this model takes text", where,
                                        type), where);
      if (!part.contains("text") || !part["text"].is_string()) bad(where + ".text", "a string");
      if (j > 0) text += '\n';
      text += part["text"].get<std::string>();
    }
    m["content"] = std::move(text);
  }
  return out;
}

ParsedRequest parse_chat_request(const std::string& body, const RequestLimits& limits) {
  const json o = parse_json_object(body, limits.max_json_depth);
  check_and_log_request_fields(o, /*chat=*/true);
  ParsedRequest r;
  r.chat = true;
  parse_common(o, limits, r);
  if (!present(o, "messages")) throw ApiError(400, "'messages' is required", "messages");
  r.messages = parse_chat_messages(o["messages"], limits.max_json_depth);
  r.chat_options = parse_chat_options(o);
  r.tools = parse_tool_request(o);
  // tool_choice "required" or a named function: the output must be the calls, as vLLM forces them.
  if (std::string schema = forced_tool_schema(r.tools); !schema.empty()) {
    if (r.constraint.kind != OutputConstraint::Kind::kNone)
      throw ApiError(400, "You can only either use guided decoding or tools, not both.", "tool_choice");
    r.constraint = OutputConstraint{OutputConstraint::Kind::kJsonSchema, std::move(schema), {}, "tool_choice"};
  }
  if (boolean(o, "logprobs", false)) {
    r.top_logprobs = static_cast<int>(integer(o, "top_logprobs", 0, 0, kMaxLogprobs));
  } else if (present(o, "top_logprobs") && integer(o, "top_logprobs", 0) > 0) {
    throw ApiError(400, "'top_logprobs' needs 'logprobs' set to true", "top_logprobs");
  }
  return r;
}

}  // namespace pagoda::server
