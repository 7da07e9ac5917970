// The GPT-2 byte-level alphabet: every byte maps to one printable Unicode character ("Ġ" for space), so
// byte-level BPE vocabularies can be stored as text. Used by HF ByteLevel and GGUF "gpt2" vocabularies.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace pagoda::byte_level {

// The byte-level spelling of raw bytes (each byte becomes one 1–2 byte UTF-8 character).
std::string encode(std::string_view bytes);
void encode_append(std::string_view bytes, std::string& out);

// The raw bytes a byte-level token stands for, or nullopt when it contains a character outside the
// alphabet (HF then keeps such a token's text as is, e.g. added tokens with spaces).
std::optional<std::string> decode(std::string_view token);

}  // namespace pagoda::byte_level
