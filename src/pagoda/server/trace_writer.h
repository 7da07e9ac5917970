// TraceWriter: `pagoda serve --trace-file FILE`: one JSON line per finished engine request (see
// RequestTrace::to_json), appended and flushed as each finishes, from any thread.
#pragma once

#include <cstdio>
#include <mutex>
#include <string>

#include "pagoda/server/request_trace.h"

namespace pagoda::server {

class TraceWriter {
 public:
  // Opens `path` for appending; throws pagoda::Error naming it when that fails.
  explicit TraceWriter(const std::string& path);
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  void write(const RequestTrace& trace);  // thread-safe
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::mutex mutex_;
  std::FILE* file_ = nullptr;
};

}  // namespace pagoda::server
