// Measurement knobs: environment variables that switch an implementation choice for A/B runs (PAGODA_NO_PDL,
// PAGODA_DECODE_LONG_SPAN, ...). Each call site reads its knob once, into a function-local static, never on a
// hot path; the defaults are what users get.
#pragma once

#include <cstdlib>

namespace pagoda {

// A knob that is on or off: "1..." on, "0..." off; unset, empty or anything else: `fallback`.
inline bool env_flag(const char* name, bool fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr) return fallback;
  return v[0] == '1' ? true : v[0] == '0' ? false : fallback;
}

// A knob that is a number: its leading integer (atoi) when set and not empty; otherwise `fallback`. Callers bound it.
inline int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

}  // namespace pagoda
