// Parsing OpenAI /v1/completions and /v1/chat/completions request bodies (plus vLLM's extra sampling
// fields) into ParsedRequest. Wrong types and out-of-range values throw ApiError 400 naming the field.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "pagoda/core/types.h"
#include "pagoda/runner/sampling_params.h"

namespace pagoda::server {

struct PromptInput {
  std::optional<std::string> text;  // given as text
  std::vector<TokenId> ids;         // given as ids (text unset), or filled by tokenizing
};

struct ParsedRequest {
  bool chat = false;
  std::string model;  // "" when left out
  std::vector<PromptInput> prompts;  // completions: one or more; chat: filled after the template
  nlohmann::ordered_json messages;   // chat, with each object's keys in the order they were sent
  bool add_generation_prompt = true;
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();  // extra template variables
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
};

// Throws ApiError(400) for malformed input. `body` is the raw request body.
ParsedRequest parse_completion_request(const std::string& body);
ParsedRequest parse_chat_request(const std::string& body);

// Parses a body as a JSON object or throws ApiError(400).
nlohmann::json parse_json_object(const std::string& body);
// body[key] with objects' keys in the order they were sent (for chat templates); body is valid JSON.
nlohmann::ordered_json ordered_field(const std::string& body, const char* key);
// vLLM's `chat_template_kwargs`: an object of extra chat-template variables (empty when left out); 400
// naming the field for another type or a key the renderer sets itself.
nlohmann::ordered_json chat_template_kwargs(const nlohmann::json& o, const std::string& body);

}  // namespace pagoda::server
