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

namespace {

// decode(context + id) less decode(context) = `prefix`; the token decoded alone where the context decodes
// differently once followed by it. `decode` is the tokenizer's decode or decode_bytes.
template <class Decode>
std::string added_by(std::vector<TokenId> ids, TokenId id, const std::string& prefix, Decode decode) {
  ids.back() = id;
  const std::string full = decode(std::span<const TokenId>(ids));
  if (full.size() >= prefix.size() && full.compare(0, prefix.size(), prefix) == 0) return full.substr(prefix.size());
  const TokenId alone[] = {id};
  return decode(std::span<const TokenId>(alone));
}

}  // namespace

std::string TokenPieces::piece(TokenId id) const {
  return added_by(ids_, id, prefix_, [&](std::span<const TokenId> ids) { return tokenizer_.decode(ids, false); });
}

std::string TokenPieces::bytes(TokenId id) const {
  const auto decode = [&](std::span<const TokenId> ids) { return tokenizer_.decode_bytes(ids); };
  if (!prefix_bytes_) prefix_bytes_ = decode(std::span<const TokenId>(ids_).first(ids_.size() - 1));
  return added_by(ids_, id, *prefix_bytes_, decode);
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
