// ProgressBar: a one-line byte-count progress bar on stderr for loading large checkpoints. It draws only
// when asked for, stderr is a terminal and the work is large enough to be worth watching.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace pagoda {

class ProgressBar {
 public:
  static constexpr int64_t kMinBytes = int64_t{256} << 20;

  // `total_bytes` of work; draws only if `requested`, stderr is a TTY and total_bytes >= kMinBytes.
  ProgressBar(std::string label, int64_t total_bytes, bool requested);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  bool enabled() const { return enabled_; }
  void advance(int64_t bytes) { set(done_ + bytes); }
  void set(int64_t done_bytes);
  void finish();  // draws 100% and ends the line; idempotent

 private:
  void draw();

  std::string label_;
  int64_t total_ = 0;
  int64_t done_ = 0;
  bool enabled_ = false;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace pagoda
