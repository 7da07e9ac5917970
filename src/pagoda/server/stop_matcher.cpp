// Stop-string matching with hold-back.
#include "pagoda/server/stop_matcher.h"

#include <algorithm>

namespace pagoda::server {

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (auto& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

StopMatcher::Result StopMatcher::push(const std::string& piece) {
  Result r;
  if (stopped_) return r;
  held_ += piece;
  if (stops_.empty()) {
    r.text.swap(held_);
    return r;
  }
  // The earliest match wins (ties: the longer stop string).
  size_t best = std::string::npos;
  const std::string* best_stop = nullptr;
  for (const std::string& s : stops_) {
    const size_t pos = held_.find(s);
    if (pos != std::string::npos && (pos < best || (pos == best && s.size() > best_stop->size()))) {
      best = pos;
      best_stop = &s;
    }
  }
  if (best_stop != nullptr) {
    stopped_ = true;
    r.text = held_.substr(0, best);
    r.stopped = *best_stop;
    held_.clear();
    return r;
  }
  // Hold back the longest suffix of held_ that is a proper prefix of some stop string.
  size_t keep = 0;
  for (const std::string& s : stops_) {
    const size_t max_len = std::min(s.size() - 1, held_.size());
    for (size_t len = max_len; len > keep; --len) {
      if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
        keep = len;
        break;
      }
    }
  }
  r.text = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return r;
}

std::string StopMatcher::flush() {
  std::string out;
  if (!stopped_) out.swap(held_);
  return out;
}

}  // namespace pagoda::server
