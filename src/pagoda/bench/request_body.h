// The JSON body of one benchmark request: /v1/completions ({"prompt": text or ids, "max_tokens"}) or
// /v1/chat/completions ({"messages": [{"role": "user", ...}], "max_completion_tokens"}), always streamed
// with stream_options.include_usage, greedy unless told otherwise, ignore_eos stated either way, and
// --extra-body merged last.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "pagoda/bench/dataset.h"

namespace pagoda::bench {

struct RequestSettings {
  bool chat = false;
  std::string model;
  double temperature = 0;
  bool ignore_eos = false;
  nlohmann::json extra_body = nlohmann::json::object();
};

std::string request_body(const RequestSettings& settings, const BenchPrompt& prompt);

}  // namespace pagoda::bench
