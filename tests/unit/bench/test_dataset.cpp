// Synthetic prompts (lengths, prefix groups, seeds), JSONL datasets and exact-length text.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "pagoda/bench/dataset.h"
#include "pagoda/bench/prompt_text.h"
#include "pagoda/core/error.h"

namespace pagoda::bench {
namespace {

const std::vector<TokenId> kPool = {11, 12, 13, 14, 15, 16, 17, 18, 19, 20};

TEST(Dataset, RandomPromptsHaveExactLengthsFromThePool) {
  SyntheticOptions o;
  o.num_prompts = 50;
  o.input_len = 37;
  o.output_len = 9;
  const auto prompts = synthetic_prompts(o, kPool);
  ASSERT_EQ(prompts.size(), 50u);
  for (const BenchPrompt& p : prompts) {
    EXPECT_FALSE(p.is_text);
    EXPECT_EQ(p.ids.size(), 37u);
    EXPECT_EQ(p.prompt_len, 37);
    EXPECT_EQ(p.output_len, 9);
    for (TokenId t : p.ids) EXPECT_TRUE(std::count(kPool.begin(), kPool.end(), t));
  }
  EXPECT_NE(prompts[0].ids, prompts[1].ids);
}

TEST(Dataset, RangeRatioSpreadsLengthsWithinBounds) {
  SyntheticOptions o;
  o.num_prompts = 400;
  o.input_len = 100;
  o.output_len = 20;
  o.range_ratio = 0.5;
  std::set<int> inputs, outputs;
  for (const BenchPrompt& p : synthetic_prompts(o, kPool)) {
    EXPECT_GE(p.prompt_len, 50);
    EXPECT_LE(p.prompt_len, 150);
    EXPECT_GE(p.output_len, 10);
    EXPECT_LE(p.output_len, 30);
    inputs.insert(p.prompt_len);
    outputs.insert(p.output_len);
  }
  EXPECT_GT(inputs.size(), 50u);  // spread out, not one length
  EXPECT_GT(outputs.size(), 10u);
}

TEST(Dataset, PrefixGroupsShareTheirPrefix) {
  SyntheticOptions o;
  o.num_prompts = 40;
  o.input_len = 8;
  o.prefix_len = 32;
  o.num_prefix_groups = 4;
  std::map<int, std::vector<TokenId>> prefix_of;
  std::map<int, int> count;
  for (const BenchPrompt& p : synthetic_prompts(o, kPool)) {
    ASSERT_EQ(p.prompt_len, 40);
    ASSERT_GE(p.group, 0);
    const std::vector<TokenId> prefix(p.ids.begin(), p.ids.begin() + 32);
    auto [it, fresh] = prefix_of.emplace(p.group, prefix);
    EXPECT_EQ(it->second, prefix) << "group " << p.group;
    ++count[p.group];
  }
  ASSERT_EQ(prefix_of.size(), 4u);
  EXPECT_NE(prefix_of[0], prefix_of[1]);
  for (const auto& [g, n] : count) EXPECT_EQ(n, 10);
}

TEST(Dataset, SeededAndValidated) {
  SyntheticOptions o;
  o.num_prompts = 5;
  o.input_len = 6;
  o.seed = 9;
  EXPECT_EQ(synthetic_prompts(o, kPool)[3].ids, synthetic_prompts(o, kPool)[3].ids);
  SyntheticOptions other = o;
  other.seed = 10;
  EXPECT_NE(synthetic_prompts(o, kPool)[3].ids, synthetic_prompts(other, kPool)[3].ids);
  SyntheticOptions bad = o;
  bad.range_ratio = 1;
  EXPECT_THROW(synthetic_prompts(bad, kPool), InvalidRequest);
  bad = o;
  bad.input_len = 0;
  EXPECT_THROW(synthetic_prompts(bad, kPool), InvalidRequest);
  EXPECT_THROW(synthetic_prompts(o, {}), InvalidRequest);
}

std::string write_temp(const std::string& name, const std::string& content) {
  const auto path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path) << content;
  return path.string();
}

TEST(Dataset, JsonlPromptsCycleAndKeepOutputLengths) {
  const std::string path = write_temp("pagoda_bench_ok.jsonl",
                                      "{\"prompt\": \"Hello\", \"output_len\": 4}\n\n{\"prompt\": [1, 2, 3]}\n"
                                      "{\"prompt\": \"x\", \"output_tokens\": 2}\n");
  const auto prompts = jsonl_prompts(path, 5, 16);
  ASSERT_EQ(prompts.size(), 5u);
  EXPECT_TRUE(prompts[0].is_text);
  EXPECT_EQ(prompts[0].text, "Hello");
  EXPECT_EQ(prompts[0].output_len, 4);
  EXPECT_EQ(prompts[0].prompt_len, -1);
  EXPECT_EQ(prompts[1].ids, (std::vector<TokenId>{1, 2, 3}));
  EXPECT_EQ(prompts[1].prompt_len, 3);
  EXPECT_EQ(prompts[1].output_len, 16);
  EXPECT_EQ(prompts[2].output_len, 2);
  EXPECT_EQ(prompts[3].text, "Hello");  // cycled
}

TEST(Dataset, JsonlErrorsNameTheLine) {
  const std::string path = write_temp("pagoda_bench_bad.jsonl", "{\"prompt\": \"ok\"}\n{\"prompt\": 5}\n");
  try {
    jsonl_prompts(path, 1, 16);
    FAIL() << "no error";
  } catch (const InvalidRequest& e) {
    EXPECT_NE(std::string(e.what()).find(":2:"), std::string::npos) << e.what();
  }
  EXPECT_THROW(jsonl_prompts(write_temp("pagoda_bench_len.jsonl", "{\"prompt\": \"a\", \"output_len\": 0}\n"), 1, 16),
               InvalidRequest);
  EXPECT_THROW(jsonl_prompts(write_temp("pagoda_bench_empty.jsonl", "\n"), 1, 16), InvalidRequest);
  EXPECT_THROW(jsonl_prompts("/nonexistent/file.jsonl", 1, 16), InvalidRequest);
}

// Words are tokens, except id 0, which decodes to two words ("x y") that encode back as two tokens. Other
// words are 4 (even length) or 5 (odd length).
class WordTokenizer : public PromptTokenizer {
 public:
  std::vector<TokenId> encode(const std::string& text) override {
    std::vector<TokenId> ids;
    std::istringstream in(text);
    for (std::string w; in >> w;) ids.push_back(w == "x" ? 1 : w == "y" ? 2 : w == "z" ? 3 : 4 + w.size() % 2);
    return ids;
  }
  std::string decode(const std::vector<TokenId>& ids) override {
    static const char* words[] = {"x y", "x", "y", "z", "ww", "v"};
    std::string out;
    for (TokenId id : ids) {
      if (!out.empty()) out += ' ';
      out += words[id];
    }
    return out;
  }
};

TEST(PromptText, ExactTextHasTheWantedTokenCount) {
  WordTokenizer tok;
  std::mt19937_64 rng(1);
  int count = 0;
  const std::string text = exact_text(tok, {0, 0, 3}, {1, 2, 3, 4}, rng, &count);
  EXPECT_EQ(count, 3);
  EXPECT_EQ(tok.encode(text).size(), 3u);
  EXPECT_EQ(text, "x y x");
  const std::vector<TokenId> pool = token_pool(tok);
  EXPECT_TRUE(std::is_sorted(pool.begin(), pool.end()));
  EXPECT_EQ(pool, (std::vector<TokenId>{4, 5}));  // the built-in text has words of both parities
}

}  // namespace
}  // namespace pagoda::bench
