// Memory sizes as people write them ("4MiB", "2GB", "512k", "1073741824") and the host's free memory.
#pragma once

#include <cstdint>
#include <string>

namespace pagoda {

// Binary (KiB, MiB, GiB) and decimal (KB, MB, GB) units; K/M/G alone are binary. Throws InvalidRequest.
int64_t parse_memory_size(const std::string& text);
std::string format_memory_size(int64_t bytes);  // "4.00 MiB"
// MemAvailable from /proc/meminfo, or 0 when unknown.
int64_t host_available_memory();

}  // namespace pagoda
