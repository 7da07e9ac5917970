// PAGODA_CHECK: programmer-error assertions that abort with file:line. Recoverable errors (bad files,
// bad requests) use pagoda::Error instead (error.h).
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

namespace pagoda::detail {
[[noreturn]] inline void check_failed(const char* expr, const char* file, int line, const std::string& msg) {
  std::fprintf(stderr, "PAGODA_CHECK failed: %s at %s:%d%s%s\n", expr, file, line, msg.empty() ? "" : ": ",
               msg.c_str());
  std::fflush(stderr);
  std::abort();
}
}  // namespace pagoda::detail

#define PAGODA_CHECK(cond, ...)                                                                 \
  do {                                                                                          \
    if (!(cond)) [[unlikely]]                                                                   \
      ::pagoda::detail::check_failed(#cond, __FILE__, __LINE__, ::fmt::format("" __VA_ARGS__)); \
  } while (0)
