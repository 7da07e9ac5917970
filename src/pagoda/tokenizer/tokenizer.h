// Tokenizer: text <-> token ids. One interface over every vocabulary family Pagoda reads: HF
// tokenizer.json (byte-level BPE as in Llama-3, SentencePiece-style BPE as in Llama-2/Mistral) and the
// vocabularies embedded in GGUF files ("llama" SentencePiece with scores, "gpt2" BPE with merges).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pagoda/core/types.h"

namespace pagoda {

// Decoding this many earlier ids before new ones is enough for every decoder Pagoda has: the SentencePiece
// leading-space strip and multi-token characters both look back at most a few tokens
// (IncrementalDetokenizer, token_piece).
constexpr size_t kDecodeContextTokens = 5;

struct EncodeOptions {
  // Add the tokens the tokenizer's post-processor adds (e.g. BOS for Llama-2/Mistral, GGUF add_bos).
  bool add_special_tokens = true;
  // Recognise special/added tokens written as text (e.g. "<|eot_id|>") and map them to their ids, as HF
  // tokenizers do. llama.cpp's test vectors use parse_special = false.
  bool parse_special = true;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  virtual std::vector<TokenId> encode(std::string_view text, const EncodeOptions& options) const = 0;
  // Concatenated text of `ids`, as HF `decode` does (with clean_up_tokenization_spaces off).
  virtual std::string decode(std::span<const TokenId> ids, bool skip_special_tokens) const = 0;

  // decode(ids, false), except that broken UTF-8 stays as the bytes the tokens spell instead of U+FFFD: what
  // a token adds to an output byte for byte, which constrained decoding matches against its grammar.
  virtual std::string decode_bytes(std::span<const TokenId> ids) const { return decode(ids, false); }

  virtual int vocab_size() const = 0;
  virtual std::optional<TokenId> bos_token_id() const = 0;
  virtual std::vector<TokenId> eos_token_ids() const = 0;
  virtual bool is_special(TokenId id) const = 0;
  // The vocabulary entry as stored (e.g. "Ġworld", "▁Hello", "<0x0A>"), for inspection and errors.
  virtual std::string_view token_string(TokenId id) const = 0;
  // One-line description for `pagoda inspect` ("byte-level BPE, 128256 tokens, 256 special").
  virtual std::string summary() const = 0;
};

// Loads an HF tokenizer.json; tokenizer_config.json (optional, may be "") supplies add_bos_token /
// add_eos_token and special-token names. Throws LoadError naming the file on malformed input.
std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::string& tokenizer_json_path,
                                             const std::string& tokenizer_config_path);

}  // namespace pagoda
