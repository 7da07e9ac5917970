// The bundled stories260K model against llama2.c (run.c) and llama.cpp: greedy token ids exactly, and
// the full fp32 logits of one 200-token run within 1e-4.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "golden_helpers.h"
#include "pagoda/engine/llm.h"

namespace pagoda {
namespace {

using testing::bundled_model_path;
using testing::data_path;

const LoadedModel& stories() {
  static const LoadedModel model = load_model(LoadOptions{.model_path = bundled_model_path(), .show_progress = false});
  return model;
}

// All reference prompts run together through the engine (continuous batching), greedy, to their
// reference lengths.
void expect_greedy_matches(const std::string& refs_file) {
  LLM llm(LlmOptions{.load = {.model_path = bundled_model_path(), .show_progress = false}});
  const auto refs = testing::read_jsonl(data_path("refs/" + refs_file));
  ASSERT_FALSE(refs.empty());
  std::vector<GenerateRequest> requests;
  for (const auto& ref : refs) {
    GenerateRequest r;
    r.prompt_ids = ref["prompt_ids"].get<std::vector<TokenId>>();
    r.params.temperature = 0.0;
    r.params.ignore_eos = true;
    r.params.max_tokens = static_cast<int>(ref["output_ids"].size());
    requests.push_back(r);
  }
  const auto outputs = llm.generate(requests);
  for (size_t i = 0; i < refs.size(); ++i) {
    EXPECT_EQ(outputs[i].output_ids, refs[i]["output_ids"].get<std::vector<TokenId>>()) << "prompt: " << refs[i]["prompt"];
    EXPECT_EQ(outputs[i].finish_reason, FinishReason::kLength);
  }
}

TEST(Stories260kGolden, GreedyMatchesLlama2c) { expect_greedy_matches("stories260K_greedy.jsonl"); }
TEST(Stories260kGolden, GreedyMatchesLlamaCpp) { expect_greedy_matches("stories260K_llamacpp_greedy.jsonl"); }

TEST(Stories260kGolden, PromptTextTokenizesToReferenceIds) {
  const LoadedModel& m = stories();
  ASSERT_NE(m.tokenizer, nullptr);
  for (const auto& ref : testing::read_jsonl(data_path("refs/stories260K_greedy.jsonl")))
    EXPECT_EQ(m.tokenizer->encode(ref["prompt"].get<std::string>(), EncodeOptions{}),
              ref["prompt_ids"].get<std::vector<TokenId>>())
        << ref["prompt"];
}

TEST(Stories260kGolden, FullLogitsMatchRunC) {
  const auto meta = testing::read_json(data_path("refs/stories260K_runc_logits.json"))[0];
  const auto ids = meta["input_ids"].get<std::vector<TokenId>>();
  const int rows = meta["shape"][0].get<int>();
  const int vocab = meta["shape"][1].get<int>();
  std::ifstream in(data_path("refs/" + meta["file"].get<std::string>()), std::ios::binary);
  std::vector<float> expected(static_cast<size_t>(rows) * vocab);
  in.read(reinterpret_cast<char*>(expected.data()), static_cast<std::streamsize>(expected.size() * 4));
  ASSERT_TRUE(in.good());
  ASSERT_EQ(static_cast<int>(ids.size()), rows);
  ASSERT_EQ(stories().config.vocab_size, vocab);

  for (int chunk : {rows, 1, 37}) {  // one prefill, pure decode, and uneven chunks
    const std::vector<float> got = testing::all_position_logits(stories(), ids, chunk);
    float max_diff = 0;
    for (size_t i = 0; i < got.size(); ++i) max_diff = std::max(max_diff, std::fabs(got[i] - expected[i]));
    EXPECT_LE(max_diff, 1e-4f) << "chunk " << chunk;
  }
}

}  // namespace
}  // namespace pagoda
