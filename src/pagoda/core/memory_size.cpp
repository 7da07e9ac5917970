// Memory size parsing and /proc/meminfo.
#include "pagoda/core/memory_size.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <fstream>
#include <string_view>

#include "pagoda/core/error.h"

namespace pagoda {

int64_t parse_memory_size(const std::string& text) {
  size_t pos = 0;
  double value = 0;
  try {
    value = std::stod(text, &pos);
  } catch (const std::exception&) {
    throw InvalidRequest("memory size '" + text + "': expected a number with an optional unit (e.g. 4MiB, 2GB)");
  }
  std::string unit = text.substr(pos);
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!unit.empty() && unit[0] == ' ') unit.erase(0, 1);
  double scale = 0;
  if (unit.empty() || unit == "b") scale = 1;
  else if (unit == "k" || unit == "kib") scale = 1024.0;
  else if (unit == "m" || unit == "mib") scale = 1024.0 * 1024;
  else if (unit == "g" || unit == "gib") scale = 1024.0 * 1024 * 1024;
  else if (unit == "kb") scale = 1e3;
  else if (unit == "mb") scale = 1e6;
  else if (unit == "gb") scale = 1e9;
  if (scale == 0 || value < 0 || !std::isfinite(value))
    throw InvalidRequest("memory size '" + text + "': unknown unit (use B, KiB, MiB, GiB, KB, MB, GB)");
  return static_cast<int64_t>(value * scale);
}

std::string format_memory_size(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return fmt::format("{:.2f} MiB", b / (1024.0 * 1024));
  if (b >= 1024.0) return fmt::format("{:.2f} KiB", b / 1024.0);
  return fmt::format("{} B", bytes);
}

int64_t host_available_memory() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

}  // namespace pagoda
