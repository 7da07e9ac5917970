// ProgressBar: a one-line progress bar on stderr, counting bytes (loading large checkpoints) or items (the
// chunks of `pagoda eval perplexity`). It draws only when asked for, stderr is a terminal and the work is
// large enough to be worth watching.
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
  // `total` items named `unit` (e.g. "chunks"); draws if `requested` and stderr is a TTY, however few.
  ProgressBar(std::string label, int64_t total, std::string unit, bool requested);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  bool enabled() const { return enabled_; }
  void advance(int64_t amount) { set(done_ + amount); }
  void set(int64_t done);
  void finish();  // draws 100% and ends the line; idempotent

 private:
  void draw();

  std::string label_;
  std::string unit_;  // empty: bytes
  int64_t total_ = 0;
  int64_t done_ = 0;
  bool enabled_ = false;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace pagoda
