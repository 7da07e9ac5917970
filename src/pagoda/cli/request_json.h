// Reading OpenAI-completion-shaped request objects ({"prompt", "max_tokens", "temperature", ...}) into
// GenerateRequests, and writing outputs in `pagoda generate --json` shape.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "pagoda/engine/llm.h"
#include "pagoda/tokenizer/tokenizer.h"

namespace pagoda::cli {

// `defaults` supplies fields the object leaves out. `where` prefixes error messages ("line 3").
// Throws InvalidRequest naming the field for wrong types or out-of-range values.
GenerateRequest parse_request_json(const nlohmann::json& object, const GenerateRequest& defaults,
                                   const Tokenizer* tokenizer, bool add_special_tokens, const std::string& where);

// Range checks shared by every way a request arrives. Throws InvalidRequest naming the field.
void validate_sampling_params(const SamplingParams& params, const std::string& where);

// {"prompt_ids", "output_ids", "text", "finish_reason", ["logprobs"], ["prompt_logprobs"], "usage"}
nlohmann::json completion_json(const CompletionOutput& out, const std::string& text, const SamplingParams& params);

// Generated text of `out`, decoded with the prompt as context (skip special tokens).
std::string completion_text(const Tokenizer* tokenizer, const CompletionOutput& out);

}  // namespace pagoda::cli
