// A whole model in llama.cpp's block types: a tiny GGUF whose every linear, the embedding and the output
// are Q4_0 ... Q6_K blocks (as llama-quantize mixes them: Q4_K embedding, Q6_K output, Q5_0 / Q8_0
// fallbacks), loaded and run on the CPU, against its twin holding the same weights dequantized (by the
// test's own decoder, gguf_block_encoder.h) in F32. Quantized weights must give the logits and greedy
// tokens of their dequantized values.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "../loader/tiny_models.h"
#include "../model/golden_helpers.h"
#include "gguf_block_encoder.h"

namespace pagoda {
namespace {

using test::TempDir;
using test::TinyGguf;

// Random blocks of type `c` for an [n, k] tensor: the file's bytes and the expected F32 values (file row order).
std::pair<std::vector<uint8_t>, std::vector<float>> random_tensor(const test::TypeCase& c, int64_t n, int64_t k,
                                                                 std::mt19937& rng) {
  std::vector<uint8_t> bytes;
  std::vector<float> values;
  auto uniform = [&](float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng); };
  auto integer = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int64_t r = 0; r < n; ++r)
    for (int64_t b = 0; b < k / c.block_elems; ++b) {
      test::BlockParams p;
      const bool k_quant = c.block_elems == 256;
      p.d = f32_to_f16(k_quant ? uniform(0.0005f, 0.002f) : uniform(0.005f, 0.03f));
      const bool scale_min = c.type == GgmlType::kQ4_1 || c.type == GgmlType::kQ5_1;
      p.m = f32_to_f16(scale_min ? -uniform(0.0f, 0.2f) : uniform(0.0f, 0.002f));
      for (int& s : p.sc) s = c.type == GgmlType::kQ6_K ? integer(-128, 127) : integer(0, 63);
      for (int& m : p.mins) m = integer(0, 63);
      for (int i = 0; i < c.block_elems; ++i) p.codes.push_back(static_cast<uint32_t>(integer(0, (1 << c.bits) - 1)));
      const auto block = test::encode(c, p);
      bytes.insert(bytes.end(), block.begin(), block.end());
      for (int i = 0; i < c.block_elems; ++i) values.push_back(test::expected_value(c, p, i));
    }
  return {bytes, values};
}

ModelConfig kquant_config() {
  ModelConfig c = test::tiny_gguf_config();
  c.vocab_size = 40;
  c.hidden_size = 256;  // k-quant rows are whole 256-value super-blocks
  c.intermediate_size = 512;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  c.tie_word_embeddings = false;
  return c;
}

// With fp32 inputs (--activation-quantization none): by default the CPU multiplies GGUF 4-bit weights with int8
// activation blocks, as llama.cpp does, and the twin's F32 weights with fp32 inputs.
LoadedModel load(const std::string& path) {
  return load_model(LoadOptions{.model_path = path, .show_progress = false, .quantize_activations = false});
}

TEST(GgufKQuantModel, LogitsAndGreedyTokensEqualTheDequantizedTwin) {
  TempDir dir;
  TinyGguf quantized, twin;
  quantized.config = twin.config = kquant_config();
  // The mix of a llama-quantize Q4_K_M file, and every other converted type somewhere (Q/K through the
  // RoPE row un-permutation).
  const std::map<std::string, GgmlType> types = {
      {"token_embd.weight", GgmlType::kQ4_K},       {"output.weight", GgmlType::kQ6_K},
      {"blk.0.attn_q.weight", GgmlType::kQ4_K},     {"blk.0.attn_k.weight", GgmlType::kQ5_K},
      {"blk.0.attn_v.weight", GgmlType::kQ6_K},     {"blk.0.attn_output.weight", GgmlType::kQ4_1},
      {"blk.0.ffn_gate.weight", GgmlType::kQ5_0},   {"blk.0.ffn_up.weight", GgmlType::kQ5_1},
      {"blk.0.ffn_down.weight", GgmlType::kQ4_0},   {"blk.1.attn_q.weight", GgmlType::kQ6_K},
      {"blk.1.attn_k.weight", GgmlType::kQ4_0},     {"blk.1.attn_v.weight", GgmlType::kQ5_1},
      {"blk.1.attn_output.weight", GgmlType::kQ5_K}, {"blk.1.ffn_gate.weight", GgmlType::kQ4_1},
      {"blk.1.ffn_up.weight", GgmlType::kQ4_K},     {"blk.1.ffn_down.weight", GgmlType::kQ6_K},
  };
  ModelWeights mw;
  std::mt19937 rng(1234);
  for (const WeightSlot& slot : weight_slots(quantized.config, mw)) {
    const std::string name = gguf_weight_name(slot);
    const auto it = types.find(name);
    if (it == types.end()) continue;  // norms: F32
    const auto& c = test::type_case(it->second);
    auto [bytes, values] = random_tensor(c, slot.shape[0], slot.shape[1], rng);
    quantized.types[name] = static_cast<uint32_t>(c.type);
    quantized.raw[name] = std::move(bytes);
    twin.types[name] = 0;  // F32
    twin.raw[name] = test::to_bytes(values);
  }
  quantized.write(dir.file("kquant.gguf"));
  twin.write(dir.file("twin.gguf"));
  const LoadedModel q = load(dir.file("kquant.gguf"));
  const LoadedModel f = load(dir.file("twin.gguf"));
  EXPECT_EQ(q.weights.embed_tokens.source_format, "Q4_K");
  EXPECT_EQ(q.weights.lm_head.source_format, "Q6_K");
  EXPECT_EQ(q.weights.layers[1].wq.scheme, QuantScheme::kInt8Channel);
  EXPECT_FALSE(q.weights.layers[0].wk.offsets.empty());  // Q5_K

  const std::vector<TokenId> ids = {1, 7, 39, 3, 3, 12, 25, 0, 18, 30, 5, 22};
  const int64_t vocab = q.config.vocab_size;
  const std::vector<float> lq = testing::all_position_logits(q, ids, 5);
  const std::vector<float> lf = testing::all_position_logits(f, ids, 5);
  double max_diff = 0, max_logit = 0;
  for (size_t i = 0; i < lq.size(); ++i) {
    max_diff = std::max(max_diff, static_cast<double>(std::abs(lq[i] - lf[i])));
    max_logit = std::max(max_logit, static_cast<double>(std::abs(lf[i])));
  }
  EXPECT_LT(max_diff, 1e-4 * (1 + max_logit)) << "max |logit| " << max_logit;
  for (size_t p = 0; p < ids.size(); ++p) {
    const float* a = lq.data() + p * vocab;
    const float* b = lf.data() + p * vocab;
    EXPECT_EQ(std::max_element(a, a + vocab) - a, std::max_element(b, b + vocab) - b) << "position " << p;
  }
}

}  // namespace
}  // namespace pagoda
