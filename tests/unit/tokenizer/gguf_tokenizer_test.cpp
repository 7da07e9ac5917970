// GGUF-embedded vocabularies against llama.cpp's own test vectors (test-tokenizer-0 .inp/.out), the
// Llama-2 SentencePiece vectors, and the bundled stories260K model's prompts and generations.
#include <gtest/gtest.h>

#include <sstream>

#include "pagoda/core/error.h"
#include "pagoda/loader/gguf_tokenizer.h"
#include "tokenizer_test_util.h"

namespace pagoda::test {
namespace {

constexpr EncodeOptions kLlamaCppTest{.add_special_tokens = false, .parse_special = false};

std::unique_ptr<Tokenizer> load_gguf(const std::string& path) { return load_gguf_tokenizer(GgufFile(path)); }

const Tokenizer& spm_vocab() {
  static auto tok = load_gguf(data_path("tokenizers/ggml-vocab-llama-spm.gguf"));
  return *tok;
}

// llama.cpp's test-tokenizer-0 format: inputs separated by "\n__ggml_vocab_test__\n", one line of ids each.
void check_llamacpp_vectors(const Tokenizer& tok, const std::string& stem) {
  std::string inp = read_text(data_path("tokenizers/" + stem + ".inp"));
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  for (size_t pos = 0; pos < inp.size();) {
    size_t end = inp.find(sep, pos);
    if (end == std::string::npos) end = inp.size();
    inputs.push_back(inp.substr(pos, end - pos));
    pos = end + sep.size();
  }
  std::vector<std::vector<TokenId>> expected;
  std::istringstream out(read_text(data_path("tokenizers/" + stem + ".out")));
  for (std::string line; std::getline(out, line);) {
    std::istringstream ids(line);
    expected.emplace_back();
    for (TokenId id; ids >> id;) expected.back().push_back(id);
  }
  ASSERT_EQ(inputs.size(), expected.size());
  ASSERT_GE(inputs.size(), 20u);
  for (size_t i = 0; i < inputs.size(); ++i) {
    SCOPED_TRACE(inputs[i]);
    EXPECT_EQ(tok.encode(inputs[i], kLlamaCppTest), expected[i]);
  }
}

TEST(GgufTokenizer, LlamaSpmMatchesLlamaCpp) { check_llamacpp_vectors(spm_vocab(), "ggml-vocab-llama-spm.gguf"); }

TEST(GgufTokenizer, Llama3BpeMatchesLlamaCpp) {
  auto tok = load_gguf(data_path("tokenizers/ggml-vocab-llama3-rebuilt.gguf"));
  check_llamacpp_vectors(*tok, "ggml-vocab-llama-bpe.gguf");
}

TEST(GgufTokenizer, LlamaSpmVectors) {
  const Tokenizer& tok = spm_vocab();
  auto rows = read_jsonl(data_path("refs/llama2_spm_llamacpp_tokenizer_vectors.jsonl"));
  ASSERT_GE(rows.size(), 10u);
  for (const auto& v : rows) {
    std::string text = v["text"];
    SCOPED_TRACE(text);
    EXPECT_EQ(tok.encode(text, {.add_special_tokens = false, .parse_special = true}), ids_of(v["ids"]));
    EXPECT_EQ(tok.encode(text, {.add_special_tokens = true, .parse_special = true}), ids_of(v["ids_with_bos"]));
    if (v.contains("ids_no_parse_special")) {
      EXPECT_EQ(tok.encode(text, kLlamaCppTest), ids_of(v["ids_no_parse_special"]));
    }
  }
}

TEST(GgufTokenizer, Stories260KPromptsAndGenerations) {
  GgufFile file(PAGODA_TEST_DATA_DIR "/../../models/stories260K.gguf");
  auto tok = load_gguf_tokenizer(file);
  ASSERT_TRUE(tok->bos_token_id().has_value());
  auto rows = read_jsonl(data_path("refs/stories260K_greedy.jsonl"));
  ASSERT_FALSE(rows.empty());
  for (const auto& v : rows) {
    std::string prompt = v["prompt"];
    SCOPED_TRACE(prompt);
    EXPECT_EQ(tok->encode(prompt, {}), ids_of(v["prompt_ids"]));
    // The reference text is the prompt followed by the decoded generation (BOS and stop tokens dropped).
    std::vector<TokenId> all = ids_of(v["prompt_ids"]);
    for (TokenId id : ids_of(v["output_ids"])) all.push_back(id);
    EXPECT_EQ(tok->decode(all, true), v["output_text"].get<std::string>());
  }
}

void expect_refused(const GgufVocab& vocab, const std::string& needle) {
  try {
    make_gguf_tokenizer(vocab, "x.gguf");
    ADD_FAILURE() << "no LoadError; expected " << needle;
  } catch (const LoadError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(GgufTokenizer, VocabularyErrorsNameTheSource) {
  GgufVocab vocab;
  vocab.model = "bert";
  vocab.tokens = {"a", "b"};
  try {
    make_gguf_tokenizer(vocab, "some/model.gguf");
    FAIL() << "no LoadError";
  } catch (const LoadError& e) {
    EXPECT_NE(std::string(e.what()).find("some/model.gguf"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("bert"), std::string::npos);
  }
  vocab.model = "llama";
  vocab.scores = {0.0f};
  EXPECT_THROW(make_gguf_tokenizer(vocab, "x.gguf"), LoadError);
  // Found by a corrupted-file sweep, each tokenized into garbage: a NaN score (SentencePiece merges in score order),
  // and a gpt2 vocabulary with no merges (a llama vocabulary relabelled gpt2; llama.cpp refuses it too).
  vocab.scores = {0.0f, NAN};
  expect_refused(vocab, "score of token 1 is nan");
  vocab.scores = {0.0f, -1.0f};
  EXPECT_NO_THROW(make_gguf_tokenizer(vocab, "x.gguf"));
  vocab.model = "gpt2";
  expect_refused(vocab, "tokenizer.ggml.merges is missing");
  vocab.merges = {"a b"};
  vocab.tokens = {"a", "b", "ab"};
  vocab.scores.clear();
  EXPECT_NO_THROW(make_gguf_tokenizer(vocab, "x.gguf"));
}

}  // namespace
}  // namespace pagoda::test
