// token_piece and text_advance (tokenizer/token_piece.h): a token's text in its context, and how far it
// moves an offset into a response text.
#include "pagoda/tokenizer/token_piece.h"

#include <gtest/gtest.h>

#include "tokenizer_test_util.h"

namespace pagoda::test {
namespace {

TEST(TokenPiece, SentencePieceTokenKeepsItsLeadingSpaceAfterContext) {
  const Tokenizer& tok = mistral_tokenizer();
  const std::vector<TokenId> ids = tok.encode("Hello there", {});  // BOS, ▁Hello, ▁there
  ASSERT_EQ(ids.size(), 3u);
  const TokenId there = ids.back();
  ASSERT_EQ(tok.token_string(there), "\u2581there");
  const TokenId alone[] = {there};
  EXPECT_EQ(tok.decode(alone, false), "there") << "decoding it alone drops the space";
  EXPECT_EQ(token_piece(tok, std::span(ids).first(2), there), " there");
  EXPECT_EQ(token_piece(tok, {}, ids[0]), tok.decode(std::span(ids).first(1), false)) << "BOS shown as itself";
  // The pieces after BOS spell the text (the first word with the space SentencePiece adds in front).
  std::string joined;
  for (size_t i = 1; i < ids.size(); ++i) joined += token_piece(tok, std::span(ids).first(i), ids[i]);
  EXPECT_TRUE(joined == "Hello there" || joined == " Hello there") << joined;
}

TEST(TokenPiece, ByteLevelPiecesSpellTheText) {
  const Tokenizer& tok = llama3_tokenizer();
  const std::string text = "Hello, world: 12 cats";
  const std::vector<TokenId> ids = tok.encode(text, {.add_special_tokens = false, .parse_special = true});
  std::string joined;
  for (size_t i = 0; i < ids.size(); ++i) joined += token_piece(tok, std::span(ids).first(i), ids[i]);
  EXPECT_EQ(joined, text);
}

TEST(TokenPiece, ByteFallbackTokensGiveTheirBytes) {
  const Tokenizer& tok = mistral_tokenizer();
  const std::string text = "a \U0001D11E b";  // a character outside the vocabulary: four byte tokens
  const std::vector<TokenId> ids = tok.encode(text, {});
  std::string bytes;
  int byte_tokens = 0;
  for (size_t i = 1; i < ids.size(); ++i) {
    const TokenPieces pieces(tok, std::span(ids).first(i));
    const std::string b = pieces.bytes(ids[i]);
    if (b.size() == 1 && static_cast<uint8_t>(b[0]) >= 0x80) {
      ++byte_tokens;
      EXPECT_EQ(pieces.piece(ids[i]).find("\xEF\xBF\xBD"), 0u) << "shown as U+FFFD";
    }
    bytes += b;
  }
  EXPECT_EQ(byte_tokens, 4);
  EXPECT_TRUE(bytes == text || bytes == " " + text) << bytes;
}

TEST(TextAdvance, MatchesTheTextAndSkipsWhatItDoesNotHold) {
  EXPECT_EQ(text_advance("Once upon", 0, "Once", false), 4u);
  EXPECT_EQ(text_advance("Once upon", 4, " upon", false), 5u);
  EXPECT_EQ(text_advance("Once upon", 0, " Once", false), 4u) << "a prompt's first word without its space";
  EXPECT_EQ(text_advance("Once upon", 0, "<s>", true), 0u) << "a BOS the text does not hold";
  EXPECT_EQ(text_advance("a<|eot_id|>b", 1, "<|eot_id|>", true), 10u) << "a special token the text spells";
  EXPECT_EQ(text_advance("Once", 4, " upon", false), 5u) << "text not shown yet: the piece's length";
  EXPECT_EQ(text_advance("Once", 4, "</s>", true), 0u);
  EXPECT_EQ(text_advance("", 0, "", false), 0u);
}

}  // namespace
}  // namespace pagoda::test
