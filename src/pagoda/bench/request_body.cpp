// Request bodies.
#include "pagoda/bench/request_body.h"

namespace pagoda::bench {

std::string request_body(const RequestSettings& s, const BenchPrompt& p) {
  nlohmann::json body = {{"model", s.model}, {"temperature", s.temperature}, {"ignore_eos", s.ignore_eos},
                         {"stream", true}, {"stream_options", {{"include_usage", true}}}};
  if (s.chat) {
    body["messages"] = nlohmann::json::array({{{"role", "user"}, {"content", p.text}}});
    body["max_completion_tokens"] = p.output_len;
  } else {
    body["prompt"] = p.is_text ? nlohmann::json(p.text) : nlohmann::json(p.ids);
    body["max_tokens"] = p.output_len;
  }
  for (const auto& [key, value] : s.extra_body.items()) body[key] = value;
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace pagoda::bench
