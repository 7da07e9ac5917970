// ServerTokenizer: the served model's tokenizer through the server's POST /tokenize and /detokenize
// (vLLM's and Pagoda's shapes), for building prompts of exact token lengths without a local copy of the
// tokenizer. Failures throw pagoda::Error saying which endpoint and why.
#pragma once

#include <string>

#include "pagoda/bench/http_client.h"
#include "pagoda/bench/prompt_text.h"

namespace pagoda::bench {

class ServerTokenizer : public PromptTokenizer {
 public:
  ServerTokenizer(BlockingHttpClient& http, std::string model) : http_(http), model_(std::move(model)) {}
  std::vector<TokenId> encode(const std::string& text) override;
  std::string decode(const std::vector<TokenId>& ids) override;

 private:
  BlockingHttpClient& http_;
  std::string model_;
};

}  // namespace pagoda::bench
