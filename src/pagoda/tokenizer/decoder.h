// Decoder steps: how token strings become text, as a chain of HF-style steps over the token strings
// (ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace). GGUF vocabularies use the same steps.
#pragma once

#include <string>
#include <vector>

namespace pagoda {

struct DecoderStep {
  enum class Kind { kByteLevel, kReplace, kByteFallback, kFuse, kStrip, kMetaspace };
  Kind kind;
  std::string pattern{};  // kReplace: the text replaced; kMetaspace: the replacement char ("▁")
  std::string content{};  // kReplace: the replacement; kStrip: the single character stripped
  int start = 0;        // kStrip: characters stripped from the left of each token
  int stop = 0;         // kStrip: characters stripped from the right
  bool strip_first_space = false;  // kMetaspace: drop the leading space of the first token
};

// Runs the chain and joins the result; the text is valid UTF-8 (invalid bytes become U+FFFD). With no
// steps the tokens are joined with spaces, as HF does without a decoder. `keep_invalid_bytes` leaves broken
// UTF-8 as the bytes the tokens spell (a token holding part of a character), for constrained decoding.
std::string run_decoder(const std::vector<DecoderStep>& steps, std::vector<std::string> tokens,
                        bool keep_invalid_bytes = false);

}  // namespace pagoda
