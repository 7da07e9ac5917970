// RequestProgress: the benchmark's progress on stderr: a live bar redrawn at most ten times a second on a
// terminal ("  42%|########          | 420/1000 [00:12<00:16, 34.2 req/s, 0 failed]"), one line per
// tenth of the run otherwise (logs stay short).
#pragma once

#include <chrono>

namespace pagoda::bench {

class RequestProgress {
 public:
  RequestProgress(int total, bool enabled);
  void update(int done, int failed);
  void finish();  // the final state and a newline; idempotent

 private:
  void draw(bool force);

  int total_, done_ = 0, failed_ = 0;
  bool enabled_, tty_, finished_ = false;
  int last_tenth_ = -1, printed_ = -1;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace pagoda::bench
