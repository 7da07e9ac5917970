// Stop-string matching with hold-back: one Knuth-Morris-Pratt automaton per stop string.
#include "pagoda/server/stop_matcher.h"

#include <algorithm>

namespace pagoda::server {

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  auto patterns = std::make_shared<std::vector<Pattern>>();
  for (auto& s : stops) {
    if (s.empty()) continue;
    Pattern p{std::move(s), {}};
    p.fallback.assign(p.text.size(), 0);
    for (size_t i = 1, k = 0; i < p.text.size(); ++i) {
      while (k > 0 && p.text[i] != p.text[k]) k = p.fallback[k - 1];
      if (p.text[i] == p.text[k]) ++k;
      p.fallback[i] = static_cast<uint32_t>(k);
    }
    patterns->push_back(std::move(p));
  }
  matched_.assign(patterns->size(), 0);
  patterns_ = std::move(patterns);
}

StopMatcher::Result StopMatcher::push(const std::string& piece) {
  Result r;
  if (stopped_) return r;
  const size_t base = held_.size();  // where piece starts in held_
  held_ += piece;
  const std::vector<Pattern>& patterns = *patterns_;
  if (patterns.empty()) {
    r.text.swap(held_);
    return r;
  }
  // Each automaton reads the new bytes; a pattern's first completion is its earliest occurrence in held_ (an
  // earlier one would have stopped an earlier push). The earliest start wins, ties to the longer stop string.
  size_t best = std::string::npos;
  const std::string* best_stop = nullptr;
  size_t keep = 0;  // the longest end of held_ that is a proper prefix of some stop string
  for (size_t s = 0; s < patterns.size(); ++s) {
    const Pattern& p = patterns[s];
    size_t k = matched_[s];
    for (size_t i = base; i < held_.size(); ++i) {
      while (k > 0 && held_[i] != p.text[k]) k = p.fallback[k - 1];
      if (held_[i] == p.text[k]) ++k;
      if (k == p.text.size()) {
        const size_t start = i + 1 - k;
        if (start < best || (start == best && k > best_stop->size())) {
          best = start;
          best_stop = &p.text;
        }
        break;
      }
    }
    matched_[s] = static_cast<uint32_t>(k);
    keep = std::max(keep, k);
  }
  if (best_stop != nullptr) {
    stopped_ = true;
    r.text = held_.substr(0, best);
    r.stopped = *best_stop;
    held_.clear();
    return r;
  }
  // (Every matched_ is at most held_'s length: it was at most the held text's before this piece.)
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
