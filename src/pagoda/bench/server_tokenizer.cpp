// /tokenize and /detokenize calls.
#include "pagoda/bench/server_tokenizer.h"

#include <nlohmann/json.hpp>

#include "pagoda/core/error.h"

namespace pagoda::bench {
namespace {

nlohmann::json call(BlockingHttpClient& http, const std::string& endpoint, const nlohmann::json& body) {
  const HttpResult r = http.request("POST", endpoint, body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  if (!r.ok()) {
    const std::string hint = r.status == 404 ? " (synthetic prompts need the server's " + endpoint +
                                                   " endpoint; use --dataset jsonl with text prompts otherwise)"
                                             : "";
    throw Error("POST " + endpoint + ": " + r.describe() + hint);
  }
  nlohmann::json j = nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) throw Error("POST " + endpoint + ": the answer is not a JSON object");
  return j;
}

}  // namespace

std::vector<TokenId> ServerTokenizer::encode(const std::string& text) {
  const nlohmann::json j = call(http_, "/tokenize", {{"model", model_}, {"prompt", text}, {"add_special_tokens", false}});
  if (!j.contains("tokens") || !j["tokens"].is_array()) throw Error("POST /tokenize: no \"tokens\" list in the answer");
  return j["tokens"].get<std::vector<TokenId>>();
}

size_t ServerTokenizer::count(const std::string& text) {
  if (!chat_) return encode(text).size();
  const nlohmann::json messages = nlohmann::json::array({{{"role", "user"}, {"content", text}}});
  const nlohmann::json j = call(http_, "/tokenize", {{"model", model_}, {"messages", messages}, {"add_generation_prompt", true}});
  if (j.contains("count") && j["count"].is_number_integer()) return j["count"].get<size_t>();
  if (!j.contains("tokens") || !j["tokens"].is_array()) throw Error("POST /tokenize: no \"tokens\" list in the answer");
  return j["tokens"].size();
}

std::string ServerTokenizer::decode(const std::vector<TokenId>& ids) {
  const nlohmann::json j = call(http_, "/detokenize", {{"model", model_}, {"tokens", ids}});
  if (!j.contains("prompt") || !j["prompt"].is_string()) throw Error("POST /detokenize: no \"prompt\" text in the answer");
  return j["prompt"].get<std::string>();
}

}  // namespace pagoda::bench
