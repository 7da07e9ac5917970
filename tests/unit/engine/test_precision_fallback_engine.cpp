// The precision fallback in the engine, on the CPU with the trained TinyStories-656K: a step on the fallback
// weights computes what the quantized checkpoint the independent packer wrote computes (each form, and a
// checkpoint given as --fallback-model), a step on the primary weights what the served model does; under the
// rule the engine switches, records which weights each step ran on, and its outputs are those of that
// sequence of weight sets (a run pinned to the same sequence gives the same tokens).
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>

#include "../model/golden_helpers.h"
#include "pagoda/core/error.h"
#include "pagoda/engine/llm.h"

namespace pagoda {
namespace {

std::string quant_model(const std::string& name) { return testing::data_path("models/quant/" + name); }

LlmOptions options(const std::string& model, const std::string& fallback = "", double tpot_s = 1.0) {
  LlmOptions o;
  o.load = LoadOptions{.model_path = quant_model(model), .show_progress = false};
  o.max_num_seqs = 8;
  o.fallback_quantization = fallback;
  o.fallback.tpot_target_s = tpot_s;
  return o;
}

std::vector<GenerateRequest> requests(int max_tokens, int logprobs) {
  std::vector<GenerateRequest> out(3);
  for (int i = 0; i < 3; ++i) {
    out[i].prompt_ids = {1, static_cast<TokenId>(300 + 17 * i), 412, static_cast<TokenId>(90 + i), 1000};
    out[i].params.temperature = 0;
    out[i].params.ignore_eos = true;
    out[i].params.max_tokens = max_tokens;
    out[i].params.logprobs = logprobs;
  }
  return out;
}

void expect_same_outputs(const std::vector<CompletionOutput>& a, const std::vector<CompletionOutput>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].output_ids, b[i].output_ids) << "request " << i;
    ASSERT_EQ(a[i].logprobs.size(), b[i].logprobs.size());
    for (size_t t = 0; t < a[i].logprobs.size(); ++t)
      for (size_t j = 0; j < a[i].logprobs[t].size(); ++j) {
        EXPECT_EQ(a[i].logprobs[t][j].id, b[i].logprobs[t][j].id);
        EXPECT_EQ(a[i].logprobs[t][j].logprob, b[i].logprobs[t][j].logprob) << "request " << i << " token " << t;
      }
  }
}

struct Form {
  const char* fallback;    // --fallback-quantization
  const char* checkpoint;  // what `pagoda quantize` / the independent packer writes for it
};

class FallbackWeights : public ::testing::TestWithParam<Form> {};

TEST_P(FallbackWeights, PinnedStepsComputeTheQuantizedCheckpoint) {
  LLM served(options("tinystories-656k", GetParam().fallback));
  ASSERT_FALSE(served.fallback_description().empty());
  served.engine().pin_weights(WeightSet::kFallback);
  const std::vector<CompletionOutput> on_fallback = served.generate(requests(10, 4));
  LLM quantized(options(GetParam().checkpoint));
  expect_same_outputs(on_fallback, quantized.generate(requests(10, 4)));
  EXPECT_GT(served.engine().stats().fallback_steps, 0u);

  served.engine().pin_weights(WeightSet::kPrimary);
  LLM plain(options("tinystories-656k"));
  expect_same_outputs(served.generate(requests(10, 4)), plain.generate(requests(10, 4)));
}

INSTANTIATE_TEST_SUITE_P(Forms, FallbackWeights,
                         ::testing::Values(Form{"fp8", "ct-fp8-dynamic"}, Form{"int8", "ct-w8a16-channel"},
                                           Form{"w4", "awq-w4-g128-gemm"}),
                         [](const auto& info) { return std::string(info.param.fallback); });

TEST(FallbackWeights, ACheckpointAsTheFallback) {
  LlmOptions o = options("tinystories-656k");
  o.fallback_model = quant_model("gptq-w4-g128-sym");
  LLM served(o);
  EXPECT_NE(served.fallback_description().find("gptq-w4-g128-sym"), std::string::npos) << served.fallback_description();
  served.engine().pin_weights(WeightSet::kFallback);
  LLM gptq(options("gptq-w4-g128-sym"));
  expect_same_outputs(served.generate(requests(8, 3)), gptq.generate(requests(8, 3)));
}

TEST(FallbackWeights, TheRuleSwitchesAndTheOutputsFollowTheStepsWeights) {
  // A target no step can keep: the first judged window (4 latencies) moves the engine to the fallback.
  LlmOptions o = options("tinystories-656k", "fp8", 1e-9);
  o.fallback.min_samples = 4;
  LLM served(o);
  std::mutex mutex;
  std::vector<WeightSet> sets;
  served.engine().set_step_observer([&](const StepRecord& s) {
    std::lock_guard lock(mutex);
    sets.push_back(s.weights);
  });
  std::vector<GenerateRequest> one = requests(16, -1);
  one.resize(1);
  const std::vector<CompletionOutput> out = served.generate(one);
  const EngineStats stats = served.engine().stats();
  EXPECT_TRUE(stats.has_fallback);
  EXPECT_EQ(stats.fallback.switches_to_fallback, 1u);
  EXPECT_EQ(stats.fallback.switches_to_primary, 0u);  // the dwell (a quarter of 60 s) has not passed
  EXPECT_EQ(stats.fallback.current, WeightSet::kFallback);
  ASSERT_EQ(out[0].output_ids.size(), 16u);
  // The observer hears of a step after its events went out: wait for the last one.
  std::vector<WeightSet> seen;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (true) {
    {
      std::lock_guard lock(mutex);
      seen = sets;
    }
    if (seen.size() >= 16 || std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(seen.size(), 16u);  // one step per token: the prompt's, then a decode each
  const auto first_fallback = std::find(seen.begin(), seen.end(), WeightSet::kFallback);
  const size_t on_primary = static_cast<size_t>(first_fallback - seen.begin());
  // The 4th latency is the 5th token's: 5 steps on the primary weights, the rest on the fallback.
  EXPECT_EQ(on_primary, 5u);
  EXPECT_TRUE(std::all_of(first_fallback, seen.end(), [](WeightSet s) { return s == WeightSet::kFallback; }));
  EXPECT_EQ(stats.fallback_steps, seen.size() - on_primary);

  // The primary steps' tokens are the served model's.
  LLM plain(options("tinystories-656k"));
  const std::vector<CompletionOutput> reference = plain.generate(one);
  EXPECT_TRUE(std::equal(out[0].output_ids.begin(), out[0].output_ids.begin() + static_cast<long>(on_primary),
                         reference[0].output_ids.begin()));
  // The same sequence of weight sets, pinned by hand (the rule never fires with a target of 1,000 s), gives the
  // same tokens: the outputs are those of the weights each step used.
  LlmOptions r = options("tinystories-656k", "fp8", 1000);
  LLM replay(r);
  size_t steps = 0;
  replay.engine().set_step_observer([&](const StepRecord&) {
    if (++steps == on_primary) replay.engine().pin_weights(WeightSet::kFallback);
  });
  EXPECT_EQ(replay.generate(one)[0].output_ids, out[0].output_ids);
  EXPECT_EQ(replay.engine().stats().fallback_steps, seen.size() - on_primary);
}

TEST(FallbackWeights, RefusedCombinations) {
  const auto error_of = [](const LlmOptions& o) -> std::string {
    try {
      LLM llm(o);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of(options("tinystories-656k", "fp8", 0)).find("--slo-tpot-ms"), std::string::npos);
  EXPECT_NE(error_of(options("tinystories-656k", "awq")).find("pagoda quantize"), std::string::npos);
  EXPECT_NE(error_of(options("tinystories-656k", "int4")).find("unknown --fallback-quantization"), std::string::npos);
  LlmOptions both = options("tinystories-656k", "fp8");
  both.fallback_model = quant_model("ct-fp8-dynamic");
  EXPECT_NE(error_of(both).find("give one"), std::string::npos);
  LlmOptions other = options("tinystories-656k");
  other.fallback_model = testing::data_path("models/tiny-llama3-hf");
  EXPECT_NE(error_of(other).find("shape"), std::string::npos);
  // Options wrong whatever the model are refused before it is read: a path that does not exist is not reached.
  for (const char* bad : {"awq", "int4"}) {
    LlmOptions o = options("tinystories-656k", bad);
    o.load.model_path = "/nonexistent/model";
    EXPECT_NE(error_of(o).find("--fallback-quantization"), std::string::npos) << bad;
  }
  LlmOptions untimed = options("tinystories-656k", "fp8", 0);
  untimed.load.model_path = "/nonexistent/model";
  EXPECT_NE(error_of(untimed).find("--slo-tpot-ms"), std::string::npos);
  // A quantized model cannot be quantized again at start-up.
  EXPECT_NE(error_of(options("awq-w4-g128-gemm", "fp8")).find("q_proj"), std::string::npos);
  // Without a fallback there is nothing to pin.
  LLM plain(options("tinystories-656k"));
  EXPECT_THROW(plain.engine().pin_weights(WeightSet::kFallback), Error);
  EXPECT_FALSE(plain.engine().stats().has_fallback);
}

}  // namespace
}  // namespace pagoda
