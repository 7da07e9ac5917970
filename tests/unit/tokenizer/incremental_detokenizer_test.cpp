// IncrementalDetokenizer: streamed text equals one-shot decode, never splits a UTF-8 character, and
// keeps the leading space of a SentencePiece continuation after a prompt.
#include "pagoda/tokenizer/incremental_detokenizer.h"

#include <gtest/gtest.h>

#include "pagoda/tokenizer/utf8.h"
#include "tokenizer_test_util.h"

namespace pagoda::test {
namespace {

constexpr EncodeOptions kNoSpecial{.add_special_tokens = false, .parse_special = true};
const std::string kFffd = "\xEF\xBF\xBD";

std::vector<std::string> vector_texts() {
  std::vector<std::string> texts;
  nlohmann::json refs = read_json(data_path("refs/hf_tiny-llama3-hf.json"));
  for (const auto& v : refs["tokenizer_vectors"]) texts.push_back(v["text"]);
  for (const auto& v : read_jsonl(data_path("refs/llama3_tokenizer_vectors.jsonl"))) texts.push_back(v["text"]);
  return texts;
}

// Streams `ids` after `prompt`; checks every delta is complete UTF-8 and returns the streamed text.
std::string stream(const Tokenizer& tok, std::span<const TokenId> prompt, std::span<const TokenId> ids, bool skip) {
  IncrementalDetokenizer detok(tok, prompt, skip);
  std::string streamed;
  for (TokenId id : ids) {
    std::string delta = detok.push(id);
    EXPECT_TRUE(utf8::is_valid(delta));
    EXPECT_FALSE(delta.ends_with(kFffd)) << "held-back bytes emitted early";
    streamed += delta;
  }
  streamed += detok.finish();
  EXPECT_EQ(streamed, detok.text());
  return streamed;
}

class StreamingEqualsOneShot : public ::testing::TestWithParam<std::string> {};

TEST_P(StreamingEqualsOneShot, AllVectorStrings) {
  const Tokenizer& tok = hf_tokenizer(GetParam());
  auto texts = vector_texts();
  ASSERT_GT(texts.size(), 50u);
  for (const std::string& text : texts) {
    SCOPED_TRACE(text);
    std::vector<TokenId> ids = tok.encode(text, kNoSpecial);
    for (bool skip : {false, true}) {
      EXPECT_EQ(stream(tok, {}, ids, skip), tok.decode(ids, skip));
    }
    // With part of the text as the prompt (cut between characters), the stream is exactly what the
    // prompt's decode lacks.
    std::span<const TokenId> all(ids);
    size_t split = ids.size() / 2;
    while (split > 0 && tok.decode(all.first(split), false).ends_with(kFffd)) --split;
    EXPECT_EQ(tok.decode(all.first(split), false) + stream(tok, all.first(split), all.subspan(split), false),
              tok.decode(ids, false));
  }
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, StreamingEqualsOneShot,
                         ::testing::Values("tiny-llama3-hf", "tiny-mistral-spm-hf"),
                         [](const auto& info) { return info.param == "tiny-llama3-hf" ? std::string("Llama3") : std::string("Mistral"); });

TEST(IncrementalDetokenizer, SpmContinuationKeepsLeadingSpace) {
  const Tokenizer& tok = mistral_tokenizer();
  std::vector<TokenId> prompt = tok.encode("Hello", {});
  std::vector<TokenId> more = tok.encode("Hello there", kNoSpecial);
  ASSERT_EQ(tok.token_string(more.back()), "\u2581there");
  IncrementalDetokenizer detok(tok, prompt, true);
  EXPECT_EQ(detok.push(more.back()), " there");
}

TEST(IncrementalDetokenizer, ByteFallbackCharacterIsNeverEmittedHalf) {
  const Tokenizer& tok = mistral_tokenizer();
  const std::string text = "ok 🦙 done";  // the llama emoji is four <0xXX> byte tokens in this vocabulary
  std::vector<TokenId> ids = tok.encode(text, kNoSpecial);
  size_t byte_tokens = 0;
  for (TokenId id : ids) byte_tokens += tok.token_string(id).starts_with("<0x");
  ASSERT_EQ(byte_tokens, 4u);
  IncrementalDetokenizer detok(tok, {}, false);
  std::vector<std::string> deltas;
  for (TokenId id : ids) deltas.push_back(detok.push(id));
  deltas.push_back(detok.finish());
  EXPECT_EQ(detok.text(), text);
  bool emoji_whole = false;
  for (const std::string& d : deltas) {
    EXPECT_TRUE(utf8::is_valid(d));
    EXPECT_EQ(d.find(kFffd), std::string::npos);
    emoji_whole = emoji_whole || d.find("🦙") != std::string::npos;
  }
  EXPECT_TRUE(emoji_whole);
}

TEST(IncrementalDetokenizer, EmojiAndCjkByteLevel) {
  const Tokenizer& tok = llama3_tokenizer();
  for (std::string text : {"👨‍👩‍👧‍👦 family", "大模型推理优化", "emoji: 😀🎉👍🏽 ❤️ 🇺🇸"}) {
    std::vector<TokenId> ids = tok.encode(text, kNoSpecial);
    EXPECT_EQ(stream(tok, {}, ids, false), text);
  }
}

TEST(IncrementalDetokenizer, FinishFlushesIncompleteBytes) {
  const Tokenizer& tok = mistral_tokenizer();
  std::vector<TokenId> ids = tok.encode("a🦙", kNoSpecial);
  ids.pop_back();  // drop the last byte of the emoji
  IncrementalDetokenizer detok(tok, {}, false);
  std::string streamed;
  for (TokenId id : ids) streamed += detok.push(id);
  EXPECT_EQ(streamed, "a");
  std::string rest = detok.finish();
  EXPECT_EQ(streamed + rest, tok.decode(ids, false));
  EXPECT_TRUE(rest.starts_with(kFffd));
  EXPECT_EQ(detok.finish(), "");
}

TEST(IncrementalDetokenizer, PromptEndingMidCharacter) {
  const Tokenizer& tok = llama3_tokenizer();
  std::vector<TokenId> ids = tok.encode("ok 🦙", kNoSpecial);
  std::span<const TokenId> all(ids);
  size_t split = ids.size() - 1;  // the emoji spans several byte-level tokens; cut before its last one
  ASSERT_TRUE(tok.decode(all.first(split), false).ends_with(kFffd));
  std::string streamed = stream(tok, all.first(split), all.subspan(split), false);
  EXPECT_EQ(streamed, "🦙");
}

TEST(IncrementalDetokenizer, SkipsSpecialTokens) {
  const Tokenizer& tok = llama3_tokenizer();
  std::vector<TokenId> ids = tok.encode("Hi<|eot_id|>", kNoSpecial);
  EXPECT_EQ(stream(tok, {}, ids, true), "Hi");
  EXPECT_EQ(stream(tok, {}, ids, false), "Hi<|eot_id|>");
}

}  // namespace
}  // namespace pagoda::test
