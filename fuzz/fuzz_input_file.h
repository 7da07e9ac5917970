// The fuzz input as a file (the loaders read paths: the file formats are fuzzed through the same mmap
// and parsing a user's file goes through). One file per process, in /dev/shm when it exists.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

namespace pagoda::fuzz {

inline std::string write_input(const uint8_t* data, size_t size, const char* suffix) {
  static const std::string path = (std::filesystem::exists("/dev/shm") ? std::string("/dev/shm") : std::string("/tmp")) +
                                  "/pagoda_fuzz_" + std::to_string(::getpid()) + suffix;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) __builtin_trap();
  if (size > 0) std::fwrite(data, 1, size, f);
  std::fclose(f);
  return path;
}

}  // namespace pagoda::fuzz
