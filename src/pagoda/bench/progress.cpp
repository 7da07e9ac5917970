// Drawing the progress bar.
#include "pagoda/bench/progress.h"

#include <unistd.h>

#include <cstdio>
#include <string>

namespace pagoda::bench {
namespace {

std::string clock_text(double seconds) {
  const int s = static_cast<int>(seconds + 0.5);
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%02d:%02d", s / 60, s % 60);
  return buf;
}

}  // namespace

RequestProgress::RequestProgress(int total, bool enabled)
    : total_(total), enabled_(enabled), tty_(isatty(STDERR_FILENO) != 0), start_(std::chrono::steady_clock::now()) {
  draw(true);
}

void RequestProgress::update(int done, int failed) {
  done_ = done;
  failed_ = failed;
  draw(false);
}

void RequestProgress::finish() {
  if (finished_) return;
  draw(true);
  finished_ = true;
  if (enabled_ && tty_) std::fputc('\n', stderr);
}

void RequestProgress::draw(bool force) {
  if (!enabled_ || finished_ || total_ <= 0) return;
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double rate = elapsed > 0 ? done_ / elapsed : 0;
  if (!tty_) {
    const int tenth = done_ * 10 / total_;
    if (tenth == last_tenth_ && (!force || done_ == printed_)) return;
    last_tenth_ = tenth;
    printed_ = done_;
    std::fprintf(stderr, "bench: %d/%d requests (%d%%), %s elapsed, %.1f req/s, %d failed\n", done_, total_,
                 done_ * 100 / total_, clock_text(elapsed).c_str(), rate, failed_);
    return;
  }
  if (!force && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  constexpr int kWidth = 30;
  const int filled = done_ * kWidth / total_;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kWidth, ' ');
  const std::string eta = rate > 0 ? clock_text((total_ - done_) / rate) : "?";
  std::fprintf(stderr, "\r%4d%%|%s| %d/%d [%s<%s, %.1f req/s, %d failed]  ", done_ * 100 / total_, bar.c_str(), done_,
               total_, clock_text(elapsed).c_str(), eta.c_str(), rate, failed_);
  std::fflush(stderr);
}

}  // namespace pagoda::bench
