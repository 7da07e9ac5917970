// Token pieces and their text offsets (token_piece.h).
#include "pagoda/tokenizer/token_piece.h"

#include <algorithm>
#include <vector>

namespace pagoda {

namespace {
// As IncrementalDetokenizer: a few earlier ids are enough context for every decoder (the SentencePiece
// leading-space strip and multi-token characters look back at most a few tokens).
constexpr size_t kContextTokens = 5;
}  // namespace

std::string token_piece(const Tokenizer& tokenizer, std::span<const TokenId> context, TokenId id) {
  const std::span<const TokenId> before = context.last(std::min(context.size(), kContextTokens));
  std::vector<TokenId> ids(before.begin(), before.end());
  const std::string prefix = tokenizer.decode(ids, /*skip_special_tokens=*/false);
  ids.push_back(id);
  const std::string full = tokenizer.decode(ids, /*skip_special_tokens=*/false);
  if (full.size() >= prefix.size() && full.compare(0, prefix.size(), prefix) == 0) return full.substr(prefix.size());
  const TokenId alone[] = {id};  // the context decodes differently once followed by id: the token alone
  return tokenizer.decode(alone, /*skip_special_tokens=*/false);
}

size_t text_advance(std::string_view text, size_t offset, std::string_view piece, bool special) {
  const std::string_view rest = offset < text.size() ? text.substr(offset) : std::string_view();
  if (rest.substr(0, piece.size()) == piece) return piece.size();
  if (!piece.empty() && piece.front() == ' ' && rest.substr(0, piece.size() - 1) == piece.substr(1))
    return piece.size() - 1;
  return special ? 0 : piece.size();
}

}  // namespace pagoda
