// How a request ended, as every layer passes it on: the scheduler sets the first three, the engine adds kError,
// and only the places that write JSON or text turn it into OpenAI's words (to_string).
#pragma once

#include <cstdint>

namespace pagoda {

enum class FinishReason : uint8_t {
  kNone,     // not finished
  kLength,   // max_tokens generated or max_model_len reached (OpenAI "length")
  kStop,     // the caller's stop check (EOS, stop token ids, a stop string) said so (OpenAI "stop")
  kAborted,  // cancelled ("abort")
  kError,    // it failed; ErrorKind says whose fault (engine/request.h) ("error")
};

inline const char* to_string(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone: return "none";
    case FinishReason::kLength: return "length";
    case FinishReason::kStop: return "stop";
    case FinishReason::kAborted: return "abort";
    case FinishReason::kError: return "error";
  }
  return "?";
}

}  // namespace pagoda
