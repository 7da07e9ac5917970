// JSON <-> requests and outputs for the CLI.
#include "pagoda/cli/request_json.h"

#include <algorithm>

#include "pagoda/core/error.h"
#include "pagoda/runner/logit_bias.h"
#include "pagoda/tokenizer/incremental_detokenizer.h"

namespace pagoda::cli {
namespace {

using nlohmann::json;

[[noreturn]] void bad_field(const std::string& where, const char* field, const char* expected) {
  throw InvalidRequest(fmt::format("{}: field '{}' must be {}", where, field, expected));
}

template <typename T>
void read_number(const json& o, const char* field, T& out, const std::string& where) {
  if (!o.contains(field) || o[field].is_null()) return;
  const json& v = o[field];
  if constexpr (std::is_integral_v<T>) {
    if (!v.is_number_integer()) bad_field(where, field, "an integer");
  } else {
    if (!v.is_number()) bad_field(where, field, "a number");
  }
  out = v.get<T>();
}

std::vector<TokenId> read_ids(const json& v, const char* field, const std::string& where) {
  if (!v.is_array()) bad_field(where, field, "a list of token ids");
  std::vector<TokenId> ids;
  for (const json& e : v) {
    if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() > INT32_MAX)
      bad_field(where, field, "a list of non-negative integer token ids");
    ids.push_back(e.get<TokenId>());
  }
  return ids;
}

json logprob_entries(const TopLogprobs& entries) {
  json list = json::array();
  for (const TokenLogprob& e : entries) list.push_back({{"id", e.id}, {"logprob", e.logprob}});
  return list;
}

}  // namespace

void validate_sampling_params(const SamplingParams& p, const std::string& where) {
  if (p.temperature < 0) throw InvalidRequest(where + ": temperature must be >= 0");
  if (!(p.top_p > 0 && p.top_p <= 1)) throw InvalidRequest(where + ": top_p must be in (0, 1]");
  if (p.min_p < 0 || p.min_p > 1) throw InvalidRequest(where + ": min_p must be in [0, 1]");
  if (p.top_k < -1) throw InvalidRequest(where + ": top_k must be -1 (off), 0 (off) or positive");
  if (p.repetition_penalty <= 0) throw InvalidRequest(where + ": repetition_penalty must be > 0");
  if (p.presence_penalty < -2 || p.presence_penalty > 2) throw InvalidRequest(where + ": presence_penalty must be in [-2, 2]");
  if (p.frequency_penalty < -2 || p.frequency_penalty > 2)
    throw InvalidRequest(where + ": frequency_penalty must be in [-2, 2]");
  if (p.max_tokens < 1) throw InvalidRequest(where + ": max_tokens must be >= 1");
  if (p.logprobs > 20 || p.prompt_logprobs > 20) throw InvalidRequest(where + ": logprobs must be at most 20");
}

GenerateRequest parse_request_json(const json& o, const GenerateRequest& defaults, const Tokenizer* tokenizer,
                                   bool add_special_tokens, const std::string& where) {
  if (!o.is_object()) throw InvalidRequest(where + ": expected a JSON object");
  GenerateRequest r = defaults;
  const bool has_prompt = o.contains("prompt");
  const bool has_ids = o.contains("prompt_ids");
  if (has_prompt == has_ids) throw InvalidRequest(where + ": give exactly one of 'prompt' and 'prompt_ids'");
  if (has_prompt) {
    if (!o["prompt"].is_string()) bad_field(where, "prompt", "a string");
    if (tokenizer == nullptr) throw InvalidRequest(where + ": this model has no tokenizer; use 'prompt_ids'");
    r.prompt_ids = tokenizer->encode(o["prompt"].get<std::string>(), EncodeOptions{.add_special_tokens = add_special_tokens});
  } else {
    r.prompt_ids = read_ids(o["prompt_ids"], "prompt_ids", where);
  }
  SamplingParams& p = r.params;
  read_number(o, "max_tokens", p.max_tokens, where);
  read_number(o, "temperature", p.temperature, where);
  read_number(o, "top_p", p.top_p, where);
  read_number(o, "top_k", p.top_k, where);
  read_number(o, "min_p", p.min_p, where);
  read_number(o, "repetition_penalty", p.repetition_penalty, where);
  read_number(o, "presence_penalty", p.presence_penalty, where);
  read_number(o, "frequency_penalty", p.frequency_penalty, where);
  read_number(o, "logprobs", p.logprobs, where);
  read_number(o, "prompt_logprobs", p.prompt_logprobs, where);
  read_number(o, "priority", r.priority, where);
  if (o.contains("seed") && !o["seed"].is_null()) {
    if (!o["seed"].is_number_integer()) bad_field(where, "seed", "an integer");
    p.seed = static_cast<uint64_t>(o["seed"].get<int64_t>());
  }
  if (o.contains("ignore_eos")) {
    if (!o["ignore_eos"].is_boolean()) bad_field(where, "ignore_eos", "true or false");
    p.ignore_eos = o["ignore_eos"].get<bool>();
  }
  if (o.contains("stop_token_ids")) p.stop_token_ids = read_ids(o["stop_token_ids"], "stop_token_ids", where);
  if (o.contains("logit_bias")) {
    try {
      p.logit_bias = parse_logit_bias(o["logit_bias"]);
    } catch (const InvalidRequest& e) {
      throw InvalidRequest(where + ": " + e.what());
    }
  }
  if (o.contains("allowed_token_ids") && !o["allowed_token_ids"].is_null()) {  // vLLM's: only these are sampled
    auto masks = std::make_shared<TokenMasks>();
    std::vector<TokenId>& allowed = masks->allowed;
    allowed = read_ids(o["allowed_token_ids"], "allowed_token_ids", where);
    if (allowed.empty()) bad_field(where, "allowed_token_ids", "a non-empty list of token ids");
    std::sort(allowed.begin(), allowed.end());
    allowed.erase(std::unique(allowed.begin(), allowed.end()), allowed.end());
    p.token_masks = std::move(masks);
  }
  if (o.contains("cache_salt")) {
    if (!o["cache_salt"].is_string()) bad_field(where, "cache_salt", "a string");
    r.cache_salt = o["cache_salt"].get<std::string>();
  }
  validate_sampling_params(p, where);
  return r;
}

std::string completion_text(const Tokenizer* tokenizer, const CompletionOutput& out) {
  if (tokenizer == nullptr) return "";
  IncrementalDetokenizer detok(*tokenizer, out.prompt_ids, /*skip_special_tokens=*/true);
  for (TokenId id : out.output_ids) detok.push(id);
  detok.finish();
  return detok.text();
}

json completion_json(const CompletionOutput& out, const std::string& text, const SamplingParams& params) {
  json j;
  j["prompt_ids"] = out.prompt_ids;
  j["output_ids"] = out.output_ids;
  j["text"] = text;
  j["finish_reason"] = to_string(out.finish_reason);
  if (!out.error.empty()) j["error"] = out.error;
  if (params.logprobs >= 0) {
    j["logprobs"] = json::array();
    for (const auto& e : out.logprobs) j["logprobs"].push_back(logprob_entries(e));
  }
  if (params.prompt_logprobs >= 0) {
    j["prompt_logprobs"] = json::array();
    for (size_t i = 0; i < out.prompt_logprobs.size(); ++i)
      j["prompt_logprobs"].push_back(i == 0 ? json(nullptr) : logprob_entries(out.prompt_logprobs[i]));
  }
  j["usage"] = {{"prompt_tokens", out.usage.prompt_tokens},
                {"completion_tokens", out.usage.completion_tokens},
                {"cached_tokens", out.usage.cached_tokens}};
  return j;
}

}  // namespace pagoda::cli
