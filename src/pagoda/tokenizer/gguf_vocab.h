// GgufVocab: the tokenizer fields of a GGUF file (tokenizer.ggml.*), as plain data, and the factory that
// turns them into a Tokenizer. Reading them from a GgufFile lives in loader/gguf_tokenizer.cpp.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pagoda/core/types.h"
#include "pagoda/tokenizer/tokenizer.h"

namespace pagoda {

// llama.cpp token types (tokenizer.ggml.token_type).
enum class GgufTokenType : int32_t {
  kUndefined = 0, kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6,
};

struct GgufVocab {
  std::string model;                   // tokenizer.ggml.model: "llama" (SentencePiece) or "gpt2" (BPE)
  std::string pre;                     // tokenizer.ggml.pre, e.g. "llama-bpe"; may be empty
  std::vector<std::string> tokens;     // tokenizer.ggml.tokens
  std::vector<float> scores;           // tokenizer.ggml.scores (llama); may be empty
  std::vector<GgufTokenType> token_types;  // tokenizer.ggml.token_type; may be empty
  std::vector<std::string> merges;     // tokenizer.ggml.merges (gpt2): "a b"
  std::optional<TokenId> bos_token_id, eos_token_id, unk_token_id, pad_token_id, eot_token_id;
  std::optional<bool> add_bos_token, add_eos_token, add_space_prefix;
};

// Throws LoadError(source_path, ...) for an unsupported model kind or inconsistent arrays.
std::unique_ptr<Tokenizer> make_gguf_tokenizer(const GgufVocab& vocab, const std::string& source_path);

}  // namespace pagoda
