// Reading OpenAI stream chunks.
#include "pagoda/bench/stream_measure.h"

#include <nlohmann/json.hpp>

namespace pagoda::bench {
namespace {

using nlohmann::json;

std::string error_message(const json& e) {
  if (e.is_object() && e.contains("message") && e["message"].is_string()) return e["message"].get<std::string>();
  return e.dump();
}

}  // namespace

void StreamMeasure::on_event(std::string_view data, Clock::time_point at) {
  if (data == "[DONE]") {
    done_ = true;
    return;
  }
  const json j = json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    if (r_.error.empty()) r_.error = "malformed stream event: " + std::string(data.substr(0, 200));
    return;
  }
  if (j.contains("error") && !j["error"].is_null()) {
    if (r_.error.empty()) r_.error = error_message(j["error"]);
    return;
  }
  if (j.contains("choices") && j["choices"].is_array() && !j["choices"].empty()) {
    const json& choice = j["choices"][0];
    if (first_chunk_ == Clock::time_point{}) first_chunk_ = at;
    const json* text = nullptr;
    if (chat_ && choice.contains("delta") && choice["delta"].is_object() && choice["delta"].contains("content")) {
      text = &choice["delta"]["content"];
    } else if (!chat_ && choice.contains("text")) {
      text = &choice["text"];
    }
    if (text && text->is_string() && !text->get_ref<const std::string&>().empty()) {
      if (r_.num_chunks == 0) {
        r_.ttft = since_sent(at);
      } else {
        r_.itl.push_back(std::chrono::duration<double>(at - last_text_).count());
      }
      last_text_ = at;
      ++r_.num_chunks;
    }
    if (choice.contains("finish_reason") && choice["finish_reason"].is_string())
      r_.finish_reason = choice["finish_reason"].get<std::string>();
  }
  if (j.contains("usage") && j["usage"].is_object()) {
    const json& u = j["usage"];
    r_.usage_reported = true;
    if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number_integer()) r_.prompt_tokens = u["prompt_tokens"];
    if (u.contains("completion_tokens") && u["completion_tokens"].is_number_integer())
      r_.output_tokens = u["completion_tokens"];
    if (u.contains("prompt_tokens_details") && u["prompt_tokens_details"].is_object() &&
        u["prompt_tokens_details"].contains("cached_tokens") && u["prompt_tokens_details"]["cached_tokens"].is_number_integer())
      r_.cached_tokens = u["prompt_tokens_details"]["cached_tokens"];
  }
}

void StreamMeasure::finish(Clock::time_point at, const std::string& transport_error) {
  r_.e2el = since_sent(at);
  if (r_.error.empty() && !transport_error.empty()) r_.error = transport_error;
  if (r_.error.empty() && !done_) r_.error = "the stream ended without data: [DONE]";
  r_.success = r_.error.empty();
  if (!r_.success) return;
  if (r_.num_chunks == 0) r_.ttft = first_chunk_ != Clock::time_point{} ? since_sent(first_chunk_) : r_.e2el;
  if (r_.output_tokens < 0) r_.output_tokens = r_.num_chunks;  // no usage from the server: one token per chunk
}

}  // namespace pagoda::bench
