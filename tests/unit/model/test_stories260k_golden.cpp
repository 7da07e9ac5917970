// The bundled stories260K model against llama2.c (run.c) and llama.cpp: greedy token ids exactly, and
// the full fp32 logits of one 200-token run within 1e-4.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "golden_helpers.h"
#include "pagoda/runner/generator.h"

namespace pagoda {
namespace {

using testing::bundled_model_path;
using testing::data_path;

const LoadedModel& stories() {
  static const LoadedModel model = load_model(LoadOptions{.model_path = bundled_model_path(), .show_progress = false});
  return model;
}

void expect_greedy_matches(const std::string& refs_file) {
  const LoadedModel& m = stories();
  CpuOps ops;
  LlamaModel model(m.config, m.weights);
  Generator generator(model, ops, GeneratorOptions{});
  const auto refs = testing::read_jsonl(data_path("refs/" + refs_file));
  ASSERT_FALSE(refs.empty());
  for (const auto& ref : refs) {
    const auto prompt_ids = ref["prompt_ids"].get<std::vector<TokenId>>();
    const auto expected = ref["output_ids"].get<std::vector<TokenId>>();
    SamplingParams params;
    params.temperature = 0.0;
    params.ignore_eos = true;
    params.max_tokens = static_cast<int>(expected.size());
    const GenerationOutput out = generator.generate(prompt_ids, params, m.config.eos_token_ids);
    EXPECT_EQ(out.output_ids, expected) << "prompt: " << ref["prompt"];
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
