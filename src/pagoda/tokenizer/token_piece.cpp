// Token pieces and their text offsets (token_piece.h).
#include "pagoda/tokenizer/token_piece.h"

#include <algorithm>
#include <vector>

namespace pagoda {

TokenPieces::TokenPieces(const Tokenizer& tokenizer, std::span<const TokenId> context) : tokenizer_(tokenizer) {
  const std::span<const TokenId> before = context.last(std::min(context.size(), kDecodeContextTokens));
  ids_.assign(before.begin(), before.end());
  prefix_ = tokenizer_.decode(ids_, /*skip_special_tokens=*/false);
  ids_.push_back(0);
}

std::string TokenPieces::piece(TokenId id) const {
  std::vector<TokenId> ids = ids_;
  ids.back() = id;
  const std::string full = tokenizer_.decode(ids, /*skip_special_tokens=*/false);
  if (full.size() >= prefix_.size() && full.compare(0, prefix_.size(), prefix_) == 0) return full.substr(prefix_.size());
  const TokenId alone[] = {id};  // the context decodes differently once followed by id: the token alone
  return tokenizer_.decode(alone, /*skip_special_tokens=*/false);
}

std::string TokenPieces::bytes(TokenId id) const {
  std::vector<TokenId> ids = ids_;
  ids.pop_back();
  if (!prefix_bytes_) prefix_bytes_ = tokenizer_.decode_bytes(ids);
  ids.push_back(id);
  const std::string full = tokenizer_.decode_bytes(ids);
  if (full.size() >= prefix_bytes_->size() && full.compare(0, prefix_bytes_->size(), *prefix_bytes_) == 0)
    return full.substr(prefix_bytes_->size());
  const TokenId alone[] = {id};
  return tokenizer_.decode_bytes(alone);
}

std::string token_piece(const Tokenizer& tokenizer, std::span<const TokenId> context, TokenId id) {
  return TokenPieces(tokenizer, context).piece(id);
}

size_t text_advance(std::string_view text, size_t offset, std::string_view piece, bool special) {
  const std::string_view rest = offset < text.size() ? text.substr(offset) : std::string_view();
  if (rest.substr(0, piece.size()) == piece) return piece.size();
  if (!piece.empty() && piece.front() == ' ' && rest.substr(0, piece.size() - 1) == piece.substr(1))
    return piece.size() - 1;
  return special ? 0 : piece.size();
}

}  // namespace pagoda
