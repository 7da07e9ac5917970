// Appending trace lines.
#include "pagoda/server/trace_writer.h"

#include <cerrno>
#include <cstring>

#include "pagoda/core/error.h"
#include "pagoda/server/api_error.h"

namespace pagoda::server {

TraceWriter::TraceWriter(const std::string& path) : path_(path) {
  file_ = std::fopen(path.c_str(), "a");
  if (file_ == nullptr) throw Error(path + ": cannot open the trace file: " + std::strerror(errno));
}

TraceWriter::~TraceWriter() {
  if (file_) std::fclose(file_);
}

void TraceWriter::write(const RequestTrace& trace) {
  const std::string line = dump_json(trace.to_json()) + "\n";
  std::lock_guard lock(mutex_);
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fflush(file_);
}

}  // namespace pagoda::server
