// tinystories-656k and its seven quantized variants (tests/data/models/quant/) against transformers 5.17 run
// in fp32 on each variant's dequantized weights (refs/quant_refs_part1.json): top-8 logits at every prompt
// position, logsumexp, and 24 greedy tokens. The converters are exact (every dequantized weight is the
// fp32 value transformers used), so what differs is fp32 summation order alone: measured at most 1.43e-5
// (printed per model), and bounded here at 1e-4.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>

#include "../model/golden_helpers.h"
#include "pagoda/engine/llm.h"

namespace pagoda {
namespace {

using testing::data_path;

constexpr double kLogitTolerance = 1e-4;

std::string model_dir(const std::string& name) {
  return data_path("models/quant/" + (name == "fp32" ? std::string("tinystories-656k") : name));
}

// The references are transformers' forwards of the dequantized weights: FP8 inputs stay unquantized here
// (W8A8's own check is QuantW8A8 below).
LoadOptions quiet_load(const std::string& name) {
  return LoadOptions{.model_path = model_dir(name), .show_progress = false, .quantize_activations = false};
}

const nlohmann::json& refs() {
  static const nlohmann::json j = testing::read_json(data_path("refs/quant_refs_part1.json"));
  return j;
}

class QuantGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(QuantGolden, PromptLogitsMatchTransformers) {
  const LoadedModel m = load_model(quiet_load(GetParam()));
  const auto& ref = refs()["models"][GetParam()];
  const int64_t vocab = m.config.vocab_size;
  ASSERT_EQ(ref["generations"].size(), 8u);
  double max_diff = 0;
  for (const auto& gen : ref["generations"]) {
    const auto ids = gen["prompt_ids"].get<std::vector<TokenId>>();
    const std::vector<float> logits = testing::all_position_logits(m, ids, 7);
    for (size_t p = 0; p < ids.size(); ++p)
      max_diff = std::max(max_diff, testing::expect_matches_reference_top8(logits.data() + p * vocab, vocab, gen, p,
                                                                          kLogitTolerance));
  }
  std::printf("[ measured ] %s: max |logit - transformers| over top-8 = %.3g\n", GetParam().c_str(), max_diff);
}

TEST_P(QuantGolden, GreedyMatchesTransformers) {
  LLM llm(LlmOptions{.load = quiet_load(GetParam()), .max_num_seqs = 8, .max_model_len = 256});
  const auto& ref = refs()["models"][GetParam()];
  std::vector<GenerateRequest> requests;
  for (const auto& gen : ref["generations"]) {
    GenerateRequest r;
    r.prompt_ids = gen["prompt_ids"].get<std::vector<TokenId>>();
    r.params.temperature = 0.0;
    r.params.ignore_eos = true;
    // The references never end a story: transformers generated them with EOS masked (min_new_tokens 24; no
    // reference id is EOS), so EOS is masked here too rather than only ignored.
    r.params.logit_bias.push_back({TokenId{2}, -1e9f});  // config.json eos_token_id
    r.params.max_tokens = static_cast<int>(gen["greedy_ids"].size());
    requests.push_back(r);
  }
  const auto outputs = llm.generate(requests);
  ASSERT_EQ(outputs.size(), requests.size());
  for (size_t i = 0; i < outputs.size(); ++i)
    EXPECT_EQ(outputs[i].output_ids, ref["generations"][i]["greedy_ids"].get<std::vector<TokenId>>())
        << ref["generations"][i]["prompt"];
}

INSTANTIATE_TEST_SUITE_P(Variants, QuantGolden,
                         ::testing::Values("fp32", "awq-w4-g128-gemm", "awq-w4-g32-gemm", "gptq-w4-g128-sym",
                                           "gptq-w4-g64-asym-descact", "ct-w4a16-g128", "ct-w8a16-channel",
                                           "ct-fp8-dynamic"),
                         [](const auto& info) {
                           std::string s = info.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

}  // namespace
}  // namespace pagoda
