// The hook for llama.cpp's own reference outputs on real k-quant files: when
// tests/data/refs/gguf_kquant_llamacpp.json exists, every model in it (a GGUF written by llama-quantize,
// under tests/data/) is loaded and compared on the CPU with llama.cpp's top-8 logits, logsumexp and
// greedy tokens; without the file the test is skipped. The JSON follows refs/quant_refs_part1.json:
//   {"made_by": "...", "models": {"<name>": {"file": "models/gguf-kquant/x-Q4_K_M.gguf",
//     "logit_tolerance": 0.05,            // optional: llama.cpp's CPU dot products quantize activations
//                                         // (Q8_K), so its logits are not fp32-exact; default 0.05
//     "generations": [{"prompt_ids": [...], "top8_ids": [[...] per position], "top8_logits": [[...]],
//                      "logsumexp": [...], "greedy_ids": [...]}]}}}
// top8_* and logsumexp are optional (greedy only).
#include <gtest/gtest.h>

#include <filesystem>

#include "../model/golden_helpers.h"
#include "pagoda/engine/llm.h"

namespace pagoda {
namespace {

using testing::data_path;

TEST(GgufKQuantGolden, MatchesLlamaCppWhenReferencesArePresent) {
  const std::string refs_path = data_path("refs/gguf_kquant_llamacpp.json");
  if (!std::filesystem::exists(refs_path)) GTEST_SKIP() << "no " << refs_path << " (llama.cpp references not added yet)";
  const nlohmann::json refs = testing::read_json(refs_path);
  for (const auto& [name, ref] : refs["models"].items()) {
    SCOPED_TRACE(name);
    const LoadOptions load{.model_path = data_path(ref["file"].get<std::string>()), .show_progress = false};
    const LoadedModel m = load_model(load);
    const double tolerance = ref.value("logit_tolerance", 0.05);
    const int64_t vocab = m.config.vocab_size;
    double max_diff = 0;
    for (const auto& gen : ref["generations"]) {
      if (!gen.contains("top8_ids")) continue;
      const auto ids = gen["prompt_ids"].get<std::vector<TokenId>>();
      const std::vector<float> logits = testing::all_position_logits(m, ids, 64);
      for (size_t p = 0; p < ids.size(); ++p)
        max_diff = std::max(max_diff, testing::expect_matches_reference_top8(logits.data() + p * vocab, vocab, gen,
                                                                            p, tolerance));
    }
    std::printf("[ measured ] %s: max |logit - llama.cpp| over top-8 = %.3g\n", name.c_str(), max_diff);

    LLM llm(LlmOptions{.load = load, .max_num_seqs = 8, .max_model_len = m.config.max_position_embeddings});
    std::vector<GenerateRequest> requests;
    for (const auto& gen : ref["generations"])
      requests.push_back(testing::greedy_request(gen["prompt_ids"].get<std::vector<TokenId>>(),
                                                 static_cast<int>(gen["greedy_ids"].size())));
    const auto outputs = llm.generate(requests);
    ASSERT_EQ(outputs.size(), requests.size());
    for (size_t i = 0; i < outputs.size(); ++i)
      EXPECT_EQ(outputs[i].output_ids, ref["generations"][i]["greedy_ids"].get<std::vector<TokenId>>()) << i;
  }
}

}  // namespace
}  // namespace pagoda
