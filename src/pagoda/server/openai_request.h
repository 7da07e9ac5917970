// Parsing OpenAI /v1/completions and /v1/chat/completions request bodies (plus vLLM's extra sampling
// fields) into ParsedRequest. Wrong types and out-of-range values throw ApiError 400 naming the field.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pagoda/core/types.h"
#include "pagoda/runner/sampling_params.h"
#include "pagoda/server/tool_request.h"

namespace pagoda::server {

struct PromptInput {
  std::optional<std::string> text;  // given as text
  std::vector<TokenId> ids;         // given as ids (text unset), or filled by tokenizing
};

// The request fields that steer a chat template (chat completions and /tokenize with messages).
struct ChatOptions {
  bool add_generation_prompt = true;
  bool continue_final_message = false;  // the last message stays open: the model continues it ("prefill")
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();  // vLLM's chat_template_kwargs
  nlohmann::ordered_json tools;  // the template's `tools` (null: none); the server sets it (template_tools)
};

// What a request's output must match: response_format (json_object, json_schema), vLLM's guided_json /
// guided_regex / guided_choice, or a tool_choice that names a function or is "required". Enforced by
// constrained decoding (structured/).
struct OutputConstraint {
  enum class Kind { kNone, kJsonObject, kJsonSchema, kRegex, kChoice };
  Kind kind = Kind::kNone;
  std::string spec;                  // kJsonSchema: the schema as JSON text; kRegex: the pattern
  std::vector<std::string> choices;  // kChoice: the output is exactly one of these
  std::string field;                 // the request field it came from, for errors ("response_format", ...)
};

struct ParsedRequest {
  bool chat = false;
  std::string model;  // "" when left out
  std::vector<PromptInput> prompts;  // completions: one or more; chat: filled after the template
  nlohmann::ordered_json messages;   // chat, with each object's keys in the order they were sent
  ChatOptions chat_options;          // chat
  ToolRequest tools;                 // chat: tools and tool_choice
  bool add_special_tokens = true;    // completions; chat decides from the rendered template
  SamplingParams params;
  bool max_tokens_given = false;
  int n = 1;
  bool stream = false;
  bool include_usage = false;
  bool echo = false;
  int top_logprobs = -1;  // -1: no logprobs; else the number of alternatives per token
  std::vector<std::string> stop;
  int priority = 0;
  std::string cache_salt;
  std::string user;
  bool skip_special_tokens = true;
  OutputConstraint constraint;
};

// What one request may ask for (`pagoda serve` flags; docs/API.md). Parsing checks the first three; the
// server checks the token total once the prompts are tokenized.
struct RequestLimits {
  int max_json_depth = 128;          // nested arrays and objects in a body
  int max_sequences = 1024;          // prompts x n
  int max_n = 128;                   // n
  int64_t max_tokens = int64_t{1} << 22;  // (prompt + max_tokens) x n, summed over the prompts
};

// Throws ApiError(400) for malformed input. `body` is the raw request body.
ParsedRequest parse_completion_request(const std::string& body, const RequestLimits& limits = {});
ParsedRequest parse_chat_request(const std::string& body, const RequestLimits& limits = {});

// Parses a body as a JSON object or throws ApiError(400), also when it nests arrays and objects deeper
// than `max_depth` (checked before parsing, so that nothing later recurses without a bound). Objects keep
// their keys in the order they were sent, so a chat template renders messages as transformers would.
nlohmann::ordered_json parse_json_object(const std::string& body, int max_depth = RequestLimits{}.max_json_depth);
// The deepest nesting of arrays and objects in `text` (brackets inside strings do not count), scanning
// only until it exceeds `limit`: linear, and no recursion.
int json_nesting_depth(std::string_view text, int limit);
// add_generation_prompt, continue_final_message (vLLM's; they cannot both be true, and the second turns
// the first off when it is left out) and chat_template_kwargs (an object of extra template variables that
// cannot set messages or add_generation_prompt) of a parsed body; 400 naming the field otherwise.
ChatOptions parse_chat_options(const nlohmann::ordered_json& o);
// Chat messages checked (each an object with a string 'role'; 'content' a string, null or a list of
// parts) and given to the template as vLLM gives them to a text-only one: text parts joined by newlines,
// null or missing content as ""; other part types (image_url, ...) are a 400 naming the part. An assistant
// message's tool_calls are checked and each call's arguments, a JSON string in OpenAI's API, become the
// object that tool-calling templates read (as vLLM does); a tool message's tool_call_id must be a string.
// Throws ApiError (400).
nlohmann::ordered_json parse_chat_messages(const nlohmann::ordered_json& messages);

}  // namespace pagoda::server
