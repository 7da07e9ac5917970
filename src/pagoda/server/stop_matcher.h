// StopMatcher: finds OpenAI `stop` strings in streamed text across token boundaries without leaking
// them: text that could still become the start of a stop string is held back until it cannot.
#pragma once

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
  // Adds generated text. After a match, further calls return nothing.
  Result push(const std::string& piece);
  // The held-back tail, at the end of generation (nothing if a stop matched).
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace pagoda::server
