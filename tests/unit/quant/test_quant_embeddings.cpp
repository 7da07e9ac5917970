// `--quantize-embeddings fp8|int8|w4` (quantizer::quantize_embeddings) on the CPU reference: the table's rows
// round to nearest in each form, the model looks them up exactly as the dequantized table would give them, a tied
// lm_head keeps the stored values, and the engine serves it. (The CUDA lookup: test_quant_embedding_gpu.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <tuple>

#include "../loader/test_files.h"
#include "../model/golden_helpers.h"
#include "pagoda/backend/cpu/linear_quant.h"
#include "pagoda/core/error.h"
#include "pagoda/engine/llm.h"
#include "pagoda/loader/model_loader.h"
#include "pagoda/quantize/quantize_weights.h"

namespace pagoda {
namespace {

std::string tinystories() { return test::data_dir() + "/models/quant/tinystories-656k"; }

LoadedModel load(const std::string& dir) { return load_model(LoadOptions{.model_path = dir, .show_progress = false}); }

const std::vector<TokenId> kPrompt = {1, 403, 1139, 289, 13, 600, 21, 77};

// Each form: the scheme, its group along the hidden size, and how far a value may be from the stored one in steps
// of its scale (half a step; w4 also the rounding of its fp16 scale, 2^-11 s for each of up to 16 steps; fp8 is a
// float format: half an e4m3 ulp of the value, bounded through the scale below).
TEST(QuantEmbeddings, RowsAreRoundToNearestOfTheTableAndTheTiedLmHeadKeepsIt) {
  const LoadedModel plain = load(tinystories());
  const Weight& src = plain.weights.embed_tokens;
  ASSERT_EQ(src.data.dtype, DType::kF32);
  ASSERT_EQ(plain.weights.lm_head.data.data, src.data.data) << "the checkpoint ties them";
  const int64_t n = src.data.dim(0), k = src.data.dim(1);
  for (const auto& [q, scheme, group] : {std::tuple{quantizer::WeightQuantization::kInt8, QuantScheme::kInt8Channel, k},
                                         std::tuple{quantizer::WeightQuantization::kW4, QuantScheme::kInt4Group, int64_t{128}},
                                         std::tuple{quantizer::WeightQuantization::kFp8, QuantScheme::kFp8Channel, k}}) {
    SCOPED_TRACE(std::string(quantizer::weight_quantization_name(q)));
    LoadedModel m = load(tinystories());
    const void* table = m.weights.embed_tokens.data.data;
    ASSERT_TRUE(quantizer::quantize_embeddings(m.weights, q, m.owned));
    const Weight& w = m.weights.embed_tokens;
    ASSERT_EQ(w.scheme, scheme);
    EXPECT_EQ(w.group_size, group);
    EXPECT_EQ(w.activations, ActivationQuant::kNone) << "a lookup quantizes no inputs";
    EXPECT_EQ(w.source_format, std::string(quantizer::weight_quantization_name(q)) + " (--quantize-embeddings)");
    EXPECT_FALSE(m.weights.lm_head.quantized());
    EXPECT_EQ(m.weights.lm_head.data.data, table) << "the tied lm_head still reads the stored table";
    ASSERT_EQ(w.num_rows(), n);
    ASSERT_EQ(w.cols(), k);
    std::vector<float> row(static_cast<size_t>(k));
    for (int64_t r = 0; r < n; r += 17) {
      cpu::dequantize_rows(w, r, 1, row.data());
      for (int64_t c = 0; c < k; ++c) {
        const float stored = src.data.ptr<const float>()[r * k + c];
        const float s = w.scales.ptr<const float>()[r * w.scales.dim(1) + c / group];
        const float bound = scheme == QuantScheme::kInt4Group   ? (0.5f + 16.0f / 2048.0f) * s
                            : scheme == QuantScheme::kInt8Channel ? 0.5f * (1.0f + 1e-3f) * s
                                                                  : std::fabs(stored) / 16.0f + s * 0x1p-9f;
        ASSERT_LE(std::fabs(row[c] - stored), bound + 1e-7f) << "row " << r << " column " << c;
      }
    }
    EXPECT_FALSE(quantizer::quantize_embeddings(m.weights, q, m.owned)) << "a quantized table is kept";
  }
}

// The model computes from exactly the looked-up values: its logits equal those of the same model whose table
// holds the dequantized rows in fp32 (bit for bit), and differ from the stored table's.
TEST(QuantEmbeddings, TheModelReadsTheDequantizedRows) {
  const LoadedModel plain = load(tinystories());
  const std::vector<float> stored = testing::all_position_logits(plain, kPrompt, 3);
  for (const auto q : {quantizer::WeightQuantization::kInt8, quantizer::WeightQuantization::kW4,
                       quantizer::WeightQuantization::kFp8}) {
    SCOPED_TRACE(std::string(quantizer::weight_quantization_name(q)));
    LoadedModel m = load(tinystories());
    ASSERT_TRUE(quantizer::quantize_embeddings(m.weights, q, m.owned));
    const Weight& w = m.weights.embed_tokens;
    HostTensor table(DType::kF32, {w.num_rows(), w.cols()});
    cpu::dequantize_rows(w, 0, w.num_rows(), table.view().ptr<float>());
    ModelWeights dequantized = m.weights;
    dequantized.embed_tokens = Weight{table.view()};
    const std::vector<float> a = testing::all_position_logits(m.config, m.weights, kPrompt, 3);
    const std::vector<float> b = testing::all_position_logits(m.config, dequantized, kPrompt, 3);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
    double differs = 0;
    for (size_t i = 0; i < a.size(); ++i) differs = std::max(differs, static_cast<double>(std::fabs(a[i] - stored[i])));
    EXPECT_GT(differs, 0.0) << "the logits are the stored table's";
  }
}

// The engine takes the option (LlmOptions::embedding_quantization); a name it does not know is refused, and a
// table the form cannot hold (w4 on a 64-wide one) is refused naming the option.
TEST(QuantEmbeddings, LlmServesTheQuantizedTableAndRefusesWhatTheFormCannotHold) {
  LlmOptions o;
  o.load = LoadOptions{.model_path = tinystories(), .show_progress = false};
  o.max_num_seqs = 2;
  o.embedding_quantization = "int8";
  LLM served(o);
  EXPECT_EQ(served.model().weights.embed_tokens.scheme, QuantScheme::kInt8Channel);
  const CompletionOutput out = served.generate({testing::greedy_request({1, 403, 1139}, 6)})[0];
  EXPECT_EQ(out.output_ids.size(), 6u);
  o.embedding_quantization = "nf4";
  EXPECT_THROW(LLM{o}, Error);

  std::vector<HostTensor> owned;
  ModelWeights w;
  w.embed_tokens.data = owned.emplace_back(DType::kF32, std::initializer_list<int64_t>{32, 64}).view();
  try {
    quantizer::quantize_embeddings(w, quantizer::WeightQuantization::kW4, owned);
    ADD_FAILURE() << "a 64-column table took the w4 form";
  } catch (const InvalidRequest& e) {
    EXPECT_NE(std::string(e.what()).find("--quantize-embeddings w4"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pagoda
