// The token mask on real vocabularies (Llama-3's byte-level BPE, 128,256 tokens; Mistral's SentencePiece,
// 32,000): along random walks of constrained generation, the mask the trie walk computes equals the one
// found by trying every token alone (ConstraintMatcher::allows), for JSON schemas, JSON mode, a regex with
// non-ASCII classes and a choice. Also what a token's bytes are (SentencePiece spaces, partial characters).
// PAGODA_PROFILE=1 prints the mask's cost per token (docs/PERFORMANCE.md, "Constrained decoding").
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <random>

#include "pagoda/structured/choice_grammar.h"
#include "pagoda/structured/constraint.h"
#include "pagoda/structured/json_schema_grammar.h"
#include "pagoda/structured/regex_grammar.h"
#include "pagoda/core/error.h"
#include "pagoda/tokenizer/tokenizer.h"

namespace pagoda::structured {
namespace {

std::string data_path(const std::string& rel) { return std::string(PAGODA_TEST_DATA_DIR) + "/" + rel; }

struct Vocab {
  std::unique_ptr<Tokenizer> tokenizer;
  std::shared_ptr<const VocabIndex> index;
};

const Vocab& llama3() {
  static const Vocab v = [] {
    Vocab out;
    out.tokenizer = load_hf_tokenizer(data_path("models/tiny-llama3-hf/tokenizer.json"), "");
    // <|end_of_text|> and <|eot_id|>, as the model's generation_config.json names them.
    out.index = VocabIndex::from_tokenizer(*out.tokenizer, out.tokenizer->vocab_size(), {128001, 128009});
    return out;
  }();
  return v;
}

const Vocab& mistral() {
  static const Vocab v = [] {
    Vocab out;
    out.tokenizer = load_hf_tokenizer(data_path("models/tiny-mistral-spm-hf/tokenizer.json"),
                                      data_path("models/tiny-mistral-spm-hf/tokenizer_config.json"));
    out.index = VocabIndex::from_tokenizer(*out.tokenizer, out.tokenizer->vocab_size(), out.tokenizer->eos_token_ids());
    return out;
  }();
  return v;
}

std::vector<std::pair<std::string, Grammar>> grammars() {
  std::vector<std::pair<std::string, Grammar>> out;
  out.emplace_back("schema", json_schema_grammar(nlohmann::ordered_json::parse(
                                 R"({"type": "object", "properties": {"name": {"type": "string"}, "count": {"type": "integer", "minimum": 1},
                                     "tags": {"type": "array", "items": {"enum": ["a", "b"]}}, "ok": {"type": "boolean"}},
                                     "required": ["name", "count"]})")));
  out.emplace_back("json_object", json_object_grammar());
  out.emplace_back("regex", regex_grammar("[A-Z][a-zéà]{1,8}( [0-9]+)?: [α-ω]+\\.?"));
  out.emplace_back("choice", choice_grammar({"positive", "negative", "neutral ☺"}));
  return out;
}

std::vector<TokenId> mask_ids(const std::vector<uint64_t>& bits, int n) {
  std::vector<TokenId> ids;
  for (TokenId id = 0; id < n; ++id)
    if ((bits[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1) ids.push_back(id);
  return ids;
}

void check_walks(const Vocab& vocab, int states_per_grammar) {
  const int n = vocab.index->num_logits();
  std::mt19937 rng(11);
  for (auto& [name, grammar] : grammars()) {
    SCOPED_TRACE(name);
    const auto c = compile_constraint(grammar, vocab.index, name);
    ConstraintMatcher m(c);
    std::string text;
    for (int step = 0; step < states_per_grammar; ++step) {
      const std::vector<TokenId> fast = mask_ids(m.allowed_tokens(), n);
      std::vector<TokenId> brute;
      for (TokenId id = 0; id < n; ++id)
        if (m.allows(id)) brute.push_back(id);
      if (brute.empty()) brute = vocab.index->end_ids();  // the mask's fallback
      ASSERT_EQ(fast, brute) << "step " << step;
      // mask_logits forbids exactly the others (it takes one of two routes, by how many are allowed).
      std::vector<float> logits(static_cast<size_t>(n) + 3, 1.0f);  // a padded row, as some models have
      m.mask_logits(logits);
      std::vector<TokenId> finite;
      for (size_t i = 0; i < logits.size(); ++i)
        if (std::isfinite(logits[i])) finite.push_back(static_cast<TokenId>(i));
      ASSERT_EQ(finite, fast) << "step " << step;
      ASSERT_FALSE(fast.empty()) << "after '" << text << "'";
      const TokenId pick = fast[rng() % fast.size()];
      ASSERT_TRUE(m.accept(pick));
      text += vocab.index->bytes(pick);
      if (std::find(vocab.index->end_ids().begin(), vocab.index->end_ids().end(), pick) != vocab.index->end_ids().end()) break;
    }
  }
}

TEST(TokenMask, EqualsTryingEachTokenOnLlama3Vocabulary) { check_walks(llama3(), 5); }

TEST(TokenMask, EqualsTryingEachTokenOnSentencePieceVocabulary) { check_walks(mistral(), 12); }

TEST(TokenMask, TokenBytesAreWhatTheTokenAddsToAnOutput) {
  const Vocab& spm = mistral();
  const std::vector<TokenId> hello = spm.tokenizer->encode("Hello", EncodeOptions{.add_special_tokens = false});
  ASSERT_FALSE(hello.empty());
  EXPECT_EQ(spm.index->bytes(hello[0]).front(), ' ') << "a SentencePiece word keeps its leading space";
  const Vocab& bpe = llama3();
  // "☺" is three bytes; some Llama-3 tokens hold only part of a character, kept as raw bytes.
  bool partial = false;
  for (TokenId id = 0; id < bpe.index->num_logits() && !partial; ++id) {
    const std::string& b = bpe.index->bytes(id);
    partial = b.size() == 1 && static_cast<unsigned char>(b[0]) >= 0x80;
  }
  EXPECT_TRUE(partial);
  for (TokenId id : bpe.tokenizer->eos_token_ids()) EXPECT_TRUE(bpe.index->bytes(id).empty()) << "special tokens are never text";
}

TEST(TokenMask, PartialCharactersAcrossTokens) {
  // A choice of one three-byte character: its bytes as three single-byte tokens are allowed one by one.
  std::vector<std::string> tokens = {"\xE2", "\x98", "\xBA", "\xE2\x98", "x"};
  const auto index = std::make_shared<const VocabIndex>(tokens, 6, std::vector<TokenId>{5});
  ConstraintMatcher m(compile_constraint(choice_grammar({"☺"}), index, "choice"));
  EXPECT_EQ(mask_ids(m.allowed_tokens(), 6), (std::vector<TokenId>{0, 3}));
  ASSERT_TRUE(m.accept(3));
  EXPECT_EQ(mask_ids(m.allowed_tokens(), 6), (std::vector<TokenId>{2}));
  ConstraintMatcher digits(compile_constraint(regex_grammar("[0-9]"), index, "regex"));
  EXPECT_FALSE(digits.allows(0)) << "0xE2 starts only characters from U+2000 on";
  ASSERT_TRUE(m.accept(2));
  EXPECT_EQ(mask_ids(m.allowed_tokens(), 6), (std::vector<TokenId>{5}));
  EXPECT_TRUE(m.complete());
}

TEST(TokenMask, AGrammarTooAmbiguousIsRefusedOrEndsTheOutput) {
  // ((a|a?){1000}){5}: every one of the 5,000 optional letters can be next, each under its own return frames.
  // (((a?){1000}){5} is now a{0,5000}: counts of a ? fold into one repetition.)
  std::vector<std::string> tokens = {"a", "b", "c"};
  const auto index = std::make_shared<const VocabIndex>(tokens, 4, std::vector<TokenId>{3});
  EXPECT_THROW(compile_constraint(regex_grammar("((a|a?){1000}){5}b"), index, "regex"), InvalidRequest);
  // The same behind a "c": it starts fine and overflows once "c" is taken; the output then ends.
  ConstraintMatcher m(compile_constraint(regex_grammar("c((a|a?){1000}){5}b"), index, "regex"));
  EXPECT_EQ(mask_ids(m.allowed_tokens(), 4), (std::vector<TokenId>{3})) << "the only token overflows: end";
  EXPECT_NE(m.error().find("ambiguous"), std::string::npos) << m.error();
  EXPECT_TRUE(m.accept(3));
}

TEST(TokenMask, NestedCountsOfOptionalItemsAreRefusedOrEndTheOutput) {
  // Counts of counts of something that may be empty (a fuzzer's timeouts: x?{929}{86}{929}{86}{5}). Before, one
  // mask of them ran out of 2 GB. Now each is refused when parsed (past 100,000 nested copies), refused when
  // compiled, or ends the output at its first masks (over kMaxStacks parses, or past ExpansionBudget's limits).
  std::vector<std::string> tokens = {"x", "y", "xy"};
  const auto index = std::make_shared<const VocabIndex>(tokens, 4, std::vector<TokenId>{3});
  for (const char* pattern : {"x?{929}{86}{929}{86}{5}", "y(x?{173}{86}{58}){3}y", "(x?y?){929}{86}{929}",
                              "(x?y?){300}{300}", "y(x?y?){99}{1000}"}) {
    SCOPED_TRACE(pattern);
    std::shared_ptr<const CompiledConstraint> c;
    try {
      c = compile_constraint(regex_grammar(pattern), index, "regex");
    } catch (const InvalidRequest& e) {  // refused at the start
      const std::string why = e.what();
      EXPECT_TRUE(why.find("output constraint is too") != std::string::npos || why.find("nested") != std::string::npos) << why;
      continue;
    }
    ConstraintMatcher m(c);
    for (int step = 0; step < 4 && m.error().empty(); ++step) {
      const std::vector<TokenId> allowed = mask_ids(m.allowed_tokens(), 4);
      ASSERT_FALSE(allowed.empty());
      ASSERT_TRUE(m.accept(allowed.front()));
    }
    // Too costly (the budget) or too ambiguous (over kMaxStacks parses): either way the output ends.
    EXPECT_NE(m.error().find("output constraint is too"), std::string::npos) << "error: '" << m.error() << "'";
  }
}

TEST(TokenMask, AnEnumOfThousandsOfWordsFitsTheBudget) {
  // The budget is for hostile grammars, not large honest ones: a schema enum of 4,000 words on Llama-3's
  // vocabulary (4,000 parses alive after the opening quote, each examined at every trie node the walk visits).
  const Vocab& vocab = llama3();
  std::mt19937 rng(5);
  nlohmann::ordered_json words = nlohmann::ordered_json::array();
  for (int i = 0; i < 4000; ++i) {
    std::string w;
    for (int n = 3 + static_cast<int>(rng() % 8); n > 0; --n) w += static_cast<char>('a' + rng() % 26);
    words.push_back(w + std::to_string(i));
  }
  ConstraintMatcher m(compile_constraint(json_schema_grammar({{"enum", words}}), vocab.index, "enum"));
  const int n = vocab.index->num_logits();
  for (int step = 0; step < 8 && !m.complete(); ++step) {
    const std::vector<TokenId> allowed = mask_ids(m.allowed_tokens(), n);
    ASSERT_TRUE(m.error().empty()) << m.error();
    ASSERT_FALSE(allowed.empty());
    ASSERT_TRUE(m.accept(allowed[rng() % allowed.size()]));
  }
  EXPECT_TRUE(m.error().empty()) << m.error();
}

TEST(TokenMask, ABoundedStringFitsTheBudget) {
  // A JSON string of at most 12 characters after whitespace, on Llama-3's vocabulary: nearly every token may come
  // next, and no loop set takes a subtree whole, so the walk visits most of the trie (uncached: 1.6M frames
  // expanded, 0.71M parses examined, about 50 ms). The budget's first limit on frames, 1M, ended this output in an
  // e2e test.
  const Vocab& vocab = llama3();
  const auto schema = nlohmann::ordered_json::parse(R"({"type": "object", "properties": {"name": {"type": "string",
      "maxLength": 12}, "age": {"type": "integer", "minimum": 0, "maximum": 130}}, "required": ["name", "age"]})");
  ConstraintMatcher m(compile_constraint(json_schema_grammar(schema), vocab.index, "schema"));
  ASSERT_TRUE(m.accept_bytes(" {\n\t\t\t\t\t\t\t\t     \t     \t  \t\"name\":\""));
  const std::vector<TokenId> allowed = mask_ids(m.allowed_tokens(), vocab.index->num_logits());
  EXPECT_TRUE(m.error().empty()) << m.error();
  EXPECT_GT(allowed.size(), 100000u);
}

// Not a check: the cost of one mask on the Llama-3 vocabulary at the states of a walk, for the docs.
TEST(TokenMask, Profile) {
  if (std::getenv("PAGODA_PROFILE") == nullptr) GTEST_SKIP() << "set PAGODA_PROFILE=1 to time the token mask";
  const Vocab& vocab = llama3();
  std::mt19937 rng(3);
  for (auto& [name, grammar] : grammars()) {
    const auto c = compile_constraint(grammar, vocab.index, name);
    ConstraintMatcher m(c);
    std::vector<float> logits(static_cast<size_t>(vocab.index->num_logits()), 0.0f);
    std::vector<TokenId> taken;
    double total_us = 0, worst_us = 0, uncached_us = 0;
    int steps = 0;
    for (; steps < 64; ++steps) {
      // What a sampling step pays: the mask, then forbidden logits set to -inf.
      const auto t0 = std::chrono::steady_clock::now();
      m.mask_logits(logits);
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      total_us += us;
      worst_us = std::max(worst_us, us);
      // The same state in a fresh copy of the constraint: the mask computed, not found in the cache.
      ConstraintMatcher fresh(compile_constraint(grammar, vocab.index, name));
      for (TokenId id : taken) fresh.accept(id);
      const auto t1 = std::chrono::steady_clock::now();
      fresh.mask_logits(logits);
      uncached_us += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t1).count();
      const std::vector<TokenId> allowed = mask_ids(m.allowed_tokens(), vocab.index->num_logits());
      const TokenId pick = allowed[rng() % allowed.size()];
      m.accept(pick);
      taken.push_back(pick);
      if (std::find(vocab.index->end_ids().begin(), vocab.index->end_ids().end(), pick) != vocab.index->end_ids().end()) {
        ++steps;
        break;
      }
    }
    std::printf("token mask %-12s %3d steps: mean %.0f us (uncached %.0f us), worst %.0f us\n", name.c_str(), steps,
                total_us / std::max(steps, 1), uncached_us / std::max(steps, 1), worst_us);
  }
}

}  // namespace
}  // namespace pagoda::structured
