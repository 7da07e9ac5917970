// replace_all: every occurrence of `from` in `s` replaced by `to`, in one left-to-right pass (linear in
// the input and the output: no in-place replace that moves the rest of the string each time).
#pragma once

#include <string>
#include <string_view>

namespace pagoda {

inline void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  size_t pos = s.find(from);
  if (pos == std::string::npos) return;
  std::string out;
  out.reserve(s.size() + (to.size() > from.size() ? s.size() / from.size() * (to.size() - from.size()) : 0));
  size_t begin = 0;
  for (; pos != std::string::npos; pos = s.find(from, begin)) {
    out.append(s, begin, pos - begin);
    out.append(to);
    begin = pos + from.size();
  }
  out.append(s, begin, std::string::npos);
  s = std::move(out);
}

}  // namespace pagoda
