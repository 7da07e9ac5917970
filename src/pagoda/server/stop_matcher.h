// StopMatcher: finds OpenAI `stop` strings in streamed text across token boundaries without leaking
// them: text that could still become the start of a stop string is held back until it cannot.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace pagoda::server {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  struct Result {
    std::string text;                   // safe to emit now
    std::optional<std::string> stopped;  // the stop string that matched; nothing after it is emitted
  };
  // Adds generated text. After a match, further calls return nothing. Linear: each byte of `piece` advances one
  // automaton per stop string (Knuth-Morris-Pratt), whatever the held-back text's length; the earliest match
  // wins (ties: the longer stop string).
  Result push(const std::string& piece);
  // The held-back tail, at the end of generation (nothing if a stop matched).
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  struct Pattern {
    std::string text;
    std::vector<uint32_t> fallback;  // [text.size()]: the longest proper border of text[0, i] (KMP's failure function)
  };
  std::shared_ptr<const std::vector<Pattern>> patterns_;  // shared by copies (the n choices of a request)
  std::vector<uint32_t> matched_;  // per pattern: its longest prefix that the text so far ends with
  std::string held_;               // the text since the last emission: its end may start a stop string
  bool stopped_ = false;
};

}  // namespace pagoda::server
