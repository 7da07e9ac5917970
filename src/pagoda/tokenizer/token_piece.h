// The text of one token as a response shows it (completions' `tokens` and `top_logprobs`, chat's `token`),
// and where it sits in the response text (completions' `text_offset`).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pagoda/tokenizer/tokenizer.h"

namespace pagoda {

// The text a token adds after `context` (the ids before it; the last kDecodeContextTokens are used):
// decode(context + id) minus decode(context), special tokens shown, as vLLM's decoded tokens. A SentencePiece
// token keeps its leading space ("▁Hello" after another token is " Hello", where decoding it alone gives
// "Hello"). The context is decoded once, for the chosen token and its alternatives alike.
class TokenPieces {
 public:
  TokenPieces(const Tokenizer& tokenizer, std::span<const TokenId> context);
  std::string piece(TokenId id) const;
  // The bytes the token adds to the text, broken UTF-8 kept (Tokenizer::decode_bytes): a byte-fallback token's
  // one byte of a character where piece() shows U+FFFD. What the response text holds of it, and what chat's
  // `bytes` list (OpenAI's: the bytes to combine when a character spans tokens).
  std::string bytes(TokenId id) const;

 private:
  const Tokenizer& tokenizer_;
  std::vector<TokenId> ids_;  // the context's tail, then one slot for the token
  std::string prefix_;        // decode of the context's tail
  mutable std::optional<std::string> prefix_bytes_;  // decode_bytes of the context's tail, once asked for
};

// TokenPieces(tokenizer, context).piece(id), for one token.
std::string token_piece(const Tokenizer& tokenizer, std::span<const TokenId> context, TokenId id);

// How far a token whose piece is `piece` advances an offset into the response `text` at `offset`: the
// piece's length where the text holds it there; one less where the text holds it without its leading space
// (a SentencePiece prompt's first word); 0 for a special token the text does not hold (a BOS the prompt
// never spelt, special tokens skipped in the output); otherwise its length (text not shown yet, such as
// what a stream holds back while it might be a stop string).
size_t text_advance(std::string_view text, size_t offset, std::string_view piece, bool special);

}  // namespace pagoda
