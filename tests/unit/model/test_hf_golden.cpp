// The tiny HF checkpoints (safetensors, bf16) against Hugging Face transformers: top-8 ids and logits at
// every prompt position (logits within 1e-3, logsumexp too) and 24 greedy tokens exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "golden_helpers.h"
#include "pagoda/engine/llm.h"

namespace pagoda {
namespace {

using testing::data_path;

// The references were made by a transformers model whose inv_freq buffer had been cast to bf16 with the
// weights, so they are compared with RoPE frequencies in the checkpoint dtype (tests/data/README.md).
LoadOptions reference_load(const std::string& path) {
  return LoadOptions{.model_path = path, .show_progress = false, .rope_freq_dtype = RopeFreqDtype::kCheckpoint};
}

class HfGolden : public ::testing::TestWithParam<std::string> {
 protected:
  static const LoadedModel& model_for(const std::string& name) {
    static std::map<std::string, LoadedModel> cache;
    auto it = cache.find(name);
    if (it == cache.end())
      it = cache.emplace(name, load_model(reference_load(data_path("models/" + name))))
               .first;
    return it->second;
  }
};

TEST_P(HfGolden, PromptLogitsMatchTransformers) {
  const LoadedModel& m = model_for(GetParam());
  const auto ref = testing::read_json(data_path("refs/hf_" + GetParam() + ".json"));
  const int64_t vocab = m.config.vocab_size;
  ASSERT_FALSE(ref["generations"].empty());
  for (const auto& gen : ref["generations"]) {
    const auto ids = gen["prompt_ids"].get<std::vector<TokenId>>();
    const std::vector<float> logits = testing::all_position_logits(m, ids, 5);
    for (size_t p = 0; p < ids.size(); ++p)
      testing::expect_matches_reference_top8(logits.data() + p * vocab, vocab, gen, p, 1e-3);
  }
}

TEST_P(HfGolden, GreedyMatchesTransformers) {
  LLM llm(LlmOptions{.load = reference_load(data_path("models/" + GetParam())),
                     .max_num_seqs = 8, .max_model_len = 256});
  const auto ref = testing::read_json(data_path("refs/hf_" + GetParam() + ".json"));
  std::vector<GenerateRequest> requests;
  for (const auto& gen : ref["generations"]) {
    GenerateRequest r;
    r.prompt_ids = gen["prompt_ids"].get<std::vector<TokenId>>();
    r.params.temperature = 0.0;
    r.params.ignore_eos = true;
    r.params.max_tokens = static_cast<int>(gen["greedy_ids"].size());
    requests.push_back(r);
  }
  const auto outputs = llm.generate(requests);
  for (size_t i = 0; i < outputs.size(); ++i)
    EXPECT_EQ(outputs[i].output_ids, ref["generations"][i]["greedy_ids"].get<std::vector<TokenId>>())
        << ref["generations"][i]["prompt"];
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, HfGolden, ::testing::Values("tiny-llama3-hf", "tiny-mistral-spm-hf"));

}  // namespace
}  // namespace pagoda
