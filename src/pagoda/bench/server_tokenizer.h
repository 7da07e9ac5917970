// ServerTokenizer: the served model's tokenizer through the server's POST /tokenize and /detokenize
// (vLLM's and Pagoda's shapes), for building prompts of exact token lengths without a local copy of the
// tokenizer. With `chat`, count() is the whole chat prompt (the text as one user message, rendered by the
// model's template: /tokenize with "messages"). Failures throw pagoda::Error saying which endpoint and why.
#pragma once

#include <string>

#include "pagoda/bench/http_client.h"
#include "pagoda/bench/prompt_text.h"

namespace pagoda::bench {

class ServerTokenizer : public PromptTokenizer {
 public:
  ServerTokenizer(BlockingHttpClient& http, std::string model, bool chat = false)
      : http_(http), model_(std::move(model)), chat_(chat) {}
  std::vector<TokenId> encode(const std::string& text) override;
  std::string decode(const std::vector<TokenId>& ids) override;
  size_t count(const std::string& text) override;

 private:
  BlockingHttpClient& http_;
  std::string model_;
  bool chat_;
};

}  // namespace pagoda::bench
