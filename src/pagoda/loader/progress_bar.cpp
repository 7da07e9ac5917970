// Terminal progress bar for checkpoint loading and evaluations (redrawn at most ~10 times a second).
#include "pagoda/loader/progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace pagoda {

ProgressBar::ProgressBar(std::string label, int64_t total_bytes, bool requested)
    : label_(std::move(label)), total_(std::max<int64_t>(total_bytes, 1)) {
  enabled_ = requested && total_bytes >= kMinBytes && ::isatty(STDERR_FILENO) == 1;
  start_ = last_draw_ = std::chrono::steady_clock::now();
}

ProgressBar::ProgressBar(std::string label, int64_t total, std::string unit, bool requested)
    : label_(std::move(label)), unit_(std::move(unit)), total_(std::max<int64_t>(total, 1)) {
  enabled_ = requested && total > 0 && ::isatty(STDERR_FILENO) == 1;
  start_ = last_draw_ = std::chrono::steady_clock::now();
}

ProgressBar::~ProgressBar() {
  if (enabled_ && !finished_) {  // interrupted by an exception: end the line so the error prints cleanly
    std::fputc('\n', stderr);
    std::fflush(stderr);
  }
}

void ProgressBar::set(int64_t done) {
  done_ = std::min(done, total_);
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  draw();
}

void ProgressBar::finish() {
  if (finished_) return;
  done_ = total_;
  if (enabled_) {
    draw();
    std::fputc('\n', stderr);
    std::fflush(stderr);
  }
  finished_ = true;
}

void ProgressBar::draw() {
  constexpr int kWidth = 30;
  const double frac = static_cast<double>(done_) / static_cast<double>(total_);
  const int filled = static_cast<int>(frac * kWidth);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (!unit_.empty()) {
    std::fprintf(stderr, "\r%s [%.*s%*s] %3d%% %lld/%lld %s %.1f %s/s ", label_.c_str(), filled,
                 "##############################", kWidth - filled, "", static_cast<int>(frac * 100),
                 static_cast<long long>(done_), static_cast<long long>(total_), unit_.c_str(),
                 secs > 0 ? static_cast<double>(done_) / secs : 0.0, unit_.c_str());
    std::fflush(stderr);
    return;
  }
  const double gib = static_cast<double>(done_) / (1 << 30);
  std::fprintf(stderr, "\r%s [%.*s%*s] %3d%% %.2f/%.2f GiB %.1f GiB/s ", label_.c_str(), filled,
               "##############################", kWidth - filled, "", static_cast<int>(frac * 100), gib,
               static_cast<double>(total_) / (1 << 30), secs > 0 ? gib / secs : 0.0);
  std::fflush(stderr);
}

}  // namespace pagoda
