// SseParser: splits a server-sent-events byte stream into the data of each event, however the bytes
// arrive. An event ends at an empty line; its "data:" lines (one leading space dropped) are joined with
// "\n"; other fields and ":" comments are ignored; lines end with "\n" or "\r\n".
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pagoda::bench {

class SseParser {
 public:
  // The data of every event completed by `bytes`, in order.
  std::vector<std::string> feed(std::string_view bytes);
  // True when bytes of an unfinished event are held.
  bool pending() const { return !line_.empty() || has_data_; }

 private:
  std::string line_;  // the current line, incomplete
  std::string data_;  // the current event's data
  bool has_data_ = false;
};

}  // namespace pagoda::bench
