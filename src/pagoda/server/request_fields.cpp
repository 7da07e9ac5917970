// Refused and ignored request fields (request_fields.h).
#include "pagoda/server/request_fields.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <set>
#include <string_view>

#include "pagoda/server/api_error.h"

namespace pagoda::server {
namespace {

using json = nlohmann::ordered_json;

// What openai_request.cpp reads.
constexpr std::string_view kCommon[] = {
    "model", "temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty",
    "repetition_penalty", "seed", "ignore_eos", "logit_bias", "stop_token_ids", "n", "stream", "stream_options",
    "stop", "priority", "cache_salt", "user", "skip_special_tokens", "max_tokens", "include_stop_str_in_output",
    "truncate_prompt_tokens", "allowed_token_ids", "bad_words",
    // output_constraint_fields.cpp
    "response_format", "guided_json", "guided_regex", "guided_choice", "guided_grammar", "guided_whitespace_pattern",
    "structured_outputs"};
constexpr std::string_view kCompletion[] = {"prompt", "echo", "logprobs", "add_special_tokens"};
constexpr std::string_view kChat[] = {"messages", "max_completion_tokens", "logprobs", "top_logprobs",
                                      "add_generation_prompt", "continue_final_message", "chat_template_kwargs",
                                      "tools", "tool_choice"};

template <size_t N>
bool among(const std::string_view (&names)[N], const std::string& name) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

[[noreturn]] void refuse(const std::string& field, const std::string& why) {
  throw ApiError(400, fmt::format("'{}': {}", field, why), field);
}

bool is_empty(const json& v) {
  return v.is_null() || ((v.is_array() || v.is_object() || v.is_string()) && v.empty());
}

bool is_off(const json& v) { return v.is_null() || (v.is_boolean() && !v.get<bool>()); }  // a flag not asked for

}  // namespace

std::vector<std::string> check_request_fields(const json& o, bool chat) {
  std::vector<std::string> ignored;
  for (const auto& [name, v] : o.items()) {
    if (among(kCommon, name) || (chat ? among(kChat, name) : among(kCompletion, name))) continue;
    if (name == "functions" || name == "function_call") {
      // OpenAI's deprecated form of tools / tool_choice, which vLLM does not read either.
      if (!is_empty(v)) refuse(name, fmt::format("the deprecated '{}' is not supported; use '{}'", name,
                                                 name == "functions" ? "tools" : "tool_choice"));
    } else if (name == "best_of") {
      if (v.is_null()) continue;
      // An integer (2.0 too, as the other integer fields), at least 1; above n it would rank extra samples.
      const bool integral = v.is_number_integer() || (v.is_number_float() && std::isfinite(v.get<double>()) &&
                                                       std::trunc(v.get<double>()) == v.get<double>());
      if (!integral || v.get<double>() < 1) refuse(name, "must be an integer of at least 1");
      const double n = o.contains("n") && o["n"].is_number() ? o["n"].get<double>() : 1;
      if (v.get<double>() > n) refuse(name, "best_of above n is not supported (ranking extra samples by logprob)");
    } else if (name == "min_tokens") {
      // vLLM keeps EOS and stop tokens out until min_tokens are generated; Pagoda does not, so it refuses rather
      // than return an output that ignores the request.
      if (!(v.is_null() || (v.is_number() && v.get<double>() == 0))) refuse(name, "min_tokens is not supported");
    } else if (name == "prompt_logprobs") {
      if (!v.is_null()) refuse(name, "prompt_logprobs is not supported; ask for echo with logprobs (completions)");
    } else if (name == "suffix") {
      if (!is_empty(v)) refuse(name, "suffix is not supported");
    } else if (name == "use_beam_search") {
      if (v.is_boolean() && v.get<bool>()) refuse(name, "beam search is not supported");
    } else if (name == "logits_processors") {
      // vLLM's processors by name: ignoring them would sample exactly the tokens the client ruled out.
      if (!is_empty(v))
        refuse(name, "logits_processors is not supported; logit_bias, allowed_token_ids, bad_words or an output "
                     "constraint (guided_choice, guided_regex) can do the same");
    } else if (name == "return_tokens_as_token_ids") {
      if (!is_off(v)) refuse(name, "return_tokens_as_token_ids is not supported");
    } else if (chat && name == "echo") {
      // vLLM's chat echo puts the last message's content before the reply.
      if (!is_off(v)) refuse(name, "echo is not supported in chat completions");
    } else if (chat && name == "chat_template") {
      if (!is_empty(v)) refuse(name, "a request's own chat_template is not supported; the model's template is used");
    } else {
      ignored.push_back(name);
    }
  }
  return ignored;
}

void check_and_log_request_fields(const json& o, bool chat) {
  static std::mutex mutex;
  static std::set<std::string> logged;
  for (const std::string& name : check_request_fields(o, chat)) {
    std::lock_guard lock(mutex);
    if (logged.size() >= 256 || !logged.insert(name).second) continue;  // bounded: names come from clients
    spdlog::warn("request field '{}' is not used by Pagoda and was ignored (logged once per field)", name);
  }
}

}  // namespace pagoda::server
