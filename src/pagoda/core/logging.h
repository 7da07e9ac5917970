// Logging goes through spdlog; this header fixes the format once for the whole process.
#pragma once

#include <spdlog/spdlog.h>

namespace pagoda {
// Logs go to stderr so that stdout stays machine-readable (--json). level: "debug", "info", "warn", ...
void init_logging(const std::string& level);
}  // namespace pagoda
