// vLLM's bad_words encoding (SamplingParams.update_from_tokenizer) on the Llama-3 tokenizer. The ids are HF
// tokenizers' (this tokenizer matches them: tests/unit/tokenizer); which sequences are kept is vLLM's rule.
#include "pagoda/server/bad_words.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pagoda/tokenizer/tokenizer.h"

namespace pagoda::server {
namespace {

TEST(BadWords, EachWordAloneAndAfterASpaceAsVllmEncodesThem) {
  const auto tok = load_hf_tokenizer(std::string(PAGODA_TEST_DATA_DIR) + "/models/tiny-llama3-hf/tokenizer.json", "");
  // "world" 14957 and " world" 1917: both kept. "  Lily" loses its leading spaces: "Lily" [43, 1570]; " Lily" is
  // one token, not as many, so it is not kept (as vLLM). "purple dragon" and " purple dragon": two tokens each.
  EXPECT_EQ(encode_bad_words(*tok, {"world", "  Lily", "purple dragon"}),
            (std::vector<std::vector<TokenId>>{{14957}, {1917}, {43, 1570}, {57607, 26161}, {25977, 26161}}));
  EXPECT_TRUE(encode_bad_words(*tok, {}).empty());
}

}  // namespace
}  // namespace pagoda::server
