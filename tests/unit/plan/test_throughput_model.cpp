// The throughput-precision model's accounting on a tiny shape, worked out by hand: weight bytes of each
// precision as Pagoda stores them, KV bytes, FLOPs, the path each token count takes, one step's time term by
// term, and the Pareto marking.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "pagoda/core/error.h"
#include "pagoda/plan/device_profile.h"
#include "pagoda/plan/model_source.h"
#include "pagoda/plan/throughput_model.h"

namespace pagoda::plan {
namespace {

// hidden 128, ffn 256, 2 layers, 4 heads of 32, 2 KV heads, vocab 512. Linears [n, k]: qkv (4 + 2 x 2) x 32 =
// 256 x 128, o 128 x 128, gate_up 512 x 128, down 128 x 256: 32,768 + 16,384 + 65,536 + 32,768 = 147,456 weights.
ModelShape tiny() {
  return {.layers = 2, .hidden = 128, .intermediate = 256, .heads = 4, .kv_heads = 2, .head_dim = 32, .vocab = 512};
}

int64_t layer_bytes(Precision p) {
  int64_t sum = 0;
  for (const Linear& l : layer_linears(tiny())) sum += linear_weight_bytes(p, l.n, l.k);
  return sum;
}

TEST(PlanAccounting, LinearsOfALayerInTheBackendsFusedForm) {
  const std::vector<Linear> l = layer_linears(tiny());
  ASSERT_EQ(l.size(), 4u);
  EXPECT_EQ(l[0].n, 256);
  EXPECT_EQ(l[0].k, 128);
  EXPECT_EQ(l[1].n, 128);
  EXPECT_EQ(l[1].k, 128);
  EXPECT_EQ(l[2].n, 512);
  EXPECT_EQ(l[2].k, 128);
  EXPECT_EQ(l[3].n, 128);
  EXPECT_EQ(l[3].k, 256);
}

TEST(PlanAccounting, WeightBytesOfEachPrecision) {
  // bf16: 2 B a weight.
  EXPECT_EQ(layer_bytes(Precision::kBf16), 2 * 147456);
  // W4 g128 tiles: 0.5 B a weight + an fp32 {scale, zero} (8 B) per row and group of 128:
  // qkv 16,384 + 256 x 1 x 8; o 8,192 + 128 x 8; gate_up 32,768 + 512 x 8; down 16,384 + 128 x 2 x 8.
  EXPECT_EQ(linear_weight_bytes(Precision::kAwq, 256, 128), 16384 + 2048);
  EXPECT_EQ(linear_weight_bytes(Precision::kAwq, 128, 256), 16384 + 2048);
  EXPECT_EQ(layer_bytes(Precision::kAwq), 18432 + 9216 + 36864 + 18432);
  // int8 tiles: 1 B a weight + {scale, zero} per row.
  EXPECT_EQ(layer_bytes(Precision::kInt8), 147456 + (256 + 128 + 512 + 128) * 8);
  // FP8 rows: 1 B a weight + an fp32 scale per row.
  EXPECT_EQ(layer_bytes(Precision::kFp8), 147456 + (256 + 128 + 512 + 128) * 4);
  // Rows are padded to tiles of 16: 20 rows take 32, 100 take 112.
  EXPECT_EQ(linear_weight_bytes(Precision::kAwq, 20, 128), 32 * 64 + 32 * 8);
  EXPECT_EQ(linear_weight_bytes(Precision::kInt8, 20, 128), 32 * 128 + 32 * 8);
  EXPECT_EQ(linear_weight_bytes(Precision::kFp8, 100, 64), 112 * 64 + 112 * 4);
}

TEST(PlanAccounting, KvBytesPerTokenAndLayer) {
  EXPECT_EQ(kv_bytes_per_token_layer(tiny(), false), 2 * 2 * 32 * 2);   // K and V, 2 heads, 32 bf16 values
  EXPECT_EQ(kv_bytes_per_token_layer(tiny(), true), 2 * 2 * (32 + 1));  // codes and an exponent byte per head
}

TEST(PlanAccounting, DecodeStepBytesAndFlops) {
  const StepCost c = predict_step(tiny(), Precision::kBf16, decode_step(4, 10), h200_profile(), {});
  // Weights: 2 layers x 294,912 + the bf16 lm_head 512 x 128 x 2 + 5 norms x 128 x 2.
  EXPECT_DOUBLE_EQ(c.weight_bytes, 2 * 294912 + 131072 + 1280);
  // KV: 4 sequences x 10 tokens x 256 B x 2 layers.
  EXPECT_DOUBLE_EQ(c.kv_bytes, 4 * 10 * 256 * 2);
  // FLOPs: 2 x 147,456 x 4 rows x 2 layers + 2 x 512 x 128 x 4 logits rows + 4 x 4 heads x 32 x 40 pairs x 2.
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * 147456 * 4 * 2 + 2.0 * 512 * 128 * 4 + 4.0 * 4 * 32 * 40 * 2);
  EXPECT_DOUBLE_EQ(c.scratch_bytes, 0);
  // The lm_head stays bf16 under quantized layers, unless asked for in FP8.
  const StepCost awq = predict_step(tiny(), Precision::kAwq, decode_step(4, 10), h200_profile(), {});
  EXPECT_DOUBLE_EQ(awq.weight_bytes, 2 * 82944 + 131072 + 1280);
  const StepCost fp8_head =
      predict_step(tiny(), Precision::kAwq, decode_step(4, 10), h200_profile(), {.lm_head = Precision::kFp8});
  EXPECT_DOUBLE_EQ(fp8_head.weight_bytes, 2 * 82944 + 512 * 128 + 512 * 4 + 1280);
}

TEST(PlanAccounting, DecodeBatchesArePaddedToTheirGraphSize) {
  EXPECT_EQ(decode_graph_rows(1), 1);
  EXPECT_EQ(decode_graph_rows(3), 4);
  EXPECT_EQ(decode_graph_rows(5), 8);
  EXPECT_EQ(decode_graph_rows(17), 24);
  EXPECT_EQ(decode_graph_rows(256), 256);
  const StepShape s = decode_step(5, 100);
  EXPECT_EQ(s.rows, 8);
  EXPECT_DOUBLE_EQ(s.kv_tokens_read, 500);  // the padding rows attend nothing
}

TEST(PlanAccounting, PrefillChunkReadsKeysOncePerQueryTile) {
  // 100 tokens after 50 cached: tiles of 64 queries read keys up to 50 + 64 and 50 + 100.
  const StepShape s = prefill_chunk(100, 50);
  EXPECT_EQ(s.rows, 100);
  EXPECT_DOUBLE_EQ(s.kv_tokens_read, 114 + 150);
  EXPECT_DOUBLE_EQ(s.attention_pairs, 100.0 * 50 + 100.0 * 101 / 2);
}

TEST(PlanAccounting, PathsByTokenCount) {
  const DeviceProfile d = h200_profile();
  auto path = [&](Precision p, int64_t rows) {
    StepShape s = decode_step(rows, 1);
    s.rows = rows;  // exactly, without graph padding
    return predict_step(tiny(), p, s, d, {}).path;
  };
  EXPECT_EQ(path(Precision::kBf16, 8), "skinny");
  EXPECT_EQ(path(Precision::kBf16, 9), "cublas");
  EXPECT_EQ(path(Precision::kAwq, 8), "few-token gemv");
  EXPECT_EQ(path(Precision::kInt8, 1), "few-token gemv");
  EXPECT_EQ(path(Precision::kAwq, 9), "gemv");
  EXPECT_EQ(path(Precision::kAwq, 16), "gemv");
  EXPECT_EQ(path(Precision::kAwq, 17), "gemv x2");
  EXPECT_EQ(path(Precision::kInt8, 40), "gemv x3");
  EXPECT_EQ(path(Precision::kInt8, 41), "quant gemm");
  EXPECT_EQ(path(Precision::kAwq, 64), "quant gemm");
  EXPECT_EQ(path(Precision::kAwq, 65), "quant gemm (wgmma)");
  EXPECT_EQ(path(Precision::kInt8, 128), "quant gemm (wgmma)");
  EXPECT_EQ(path(Precision::kAwq, 129), "quant gemm");
  EXPECT_EQ(path(Precision::kAwq, 192), "quant gemm");
  EXPECT_EQ(path(Precision::kAwq, 193), "dequant+cublas");
  EXPECT_EQ(path(Precision::kFp8, 16), "fp8 gemv");
  EXPECT_EQ(path(Precision::kFp8, 17), "cublaslt fp8");
  // The dequantizing path writes a bf16 copy of every linear weight and reads it back.
  StepShape s = decode_step(256, 1);
  EXPECT_DOUBLE_EQ(predict_step(tiny(), Precision::kAwq, s, d, {}).scratch_bytes, 2.0 * 2 * 2 * 147456);
}

// A profile of round numbers, to follow one step's time term by term.
DeviceProfile round_profile() {
  DeviceProfile d = h200_profile();
  d.bandwidth_gbs = 1000;  // 1e12 B/s
  d.bf16_tflops = 1;
  d.bf16_gemm_efficiency = 1;
  d.step_overhead_us = 10;
  d.small_kernel_us = 1;
  d.attention_fixed_us = 2;
  d.skinny_bf16 = {0.5, 1};
  d.attention_bf16_fraction = 1;
  return d;
}

TEST(PlanAccounting, OneStepTermByTerm) {
  const StepCost c = predict_step(tiny(), Precision::kBf16, decode_step(1, 10), round_profile(), {});
  EXPECT_EQ(c.path, "skinny");
  // Linears: 2 layers x 294,912 B at half of 1e12 B/s; no further tokens.
  EXPECT_NEAR(c.linear_s, 2 * 294912 / 0.5e12, 1e-15);
  // lm_head: 131,072 B at 0.5e12 B/s.
  EXPECT_NEAR(c.lm_head_s, 131072 / 0.5e12, 1e-15);
  // Attention per layer: 2 us + max(10 tokens x 256 B / 1e12, 4 x 4 x 32 x 10 FLOP / 1e12) = 2 us + 5.12 ns.
  EXPECT_NEAR(c.attention_s, 2 * (2e-6 + 5120 / 1e12), 1e-15);
  // Other: 10 us + 5 small kernels (2 norms a layer, the final norm) + the norms' 2 x 2 x 4 x 128 x 2 B.
  EXPECT_NEAR(c.other_s, 10e-6 + 5e-6 + 4096 / 1e12, 1e-15);
  EXPECT_NEAR(c.seconds, 20.456128e-6, 1e-15);
}

TEST(PlanAccounting, ExtraTokensAddTheirFlopsToTheStreamingKernels) {
  const DeviceProfile d = round_profile();
  const StepCost one = predict_step(tiny(), Precision::kBf16, decode_step(1, 10), d, {});
  const StepCost four = predict_step(tiny(), Precision::kBf16, decode_step(4, 10), d, {});
  // Three more tokens: 2 x 147,456 x 3 FLOP a layer at 1 TFLOP/s, and the lm_head's 2 x 65,536 x 3.
  EXPECT_NEAR(four.linear_s - one.linear_s, 2 * 2.0 * 147456 * 3 / 1e12, 1e-15);
  EXPECT_NEAR(four.lm_head_s - one.lm_head_s, 2.0 * 65536 * 3 / 1e12, 1e-15);
}

TEST(PlanPareto, MarksThePointsNoOtherBeats) {
  auto point = [](double step_ms, double tokens_per_s) {
    PlanPoint p;
    p.decode.seconds = step_ms / 1e3;
    p.tokens_per_s = tokens_per_s;
    return p;
  };
  std::vector<PlanPoint> points = {point(4, 250), point(3, 330),   point(5, 1000),
                                   point(5, 900), point(10, 1000), point(3, 330)};
  mark_pareto(points);
  EXPECT_FALSE(points[0].pareto);  // slower and less than (3, 330)
  EXPECT_TRUE(points[1].pareto);
  EXPECT_TRUE(points[2].pareto);
  EXPECT_FALSE(points[3].pareto);  // as fast as (5, 1000), less throughput
  EXPECT_FALSE(points[4].pareto);  // as much as (5, 1000), slower
  EXPECT_TRUE(points[5].pareto);   // equal points do not beat each other
}

TEST(PlanConfig, ReadsAnHfConfigAndAGgufWithoutWeights) {
  const ModelShape hf = ModelShape::from_config(read_model_config(PAGODA_TEST_DATA_DIR "/models/llama-3-8b"));
  EXPECT_EQ(hf.layers, 32);
  EXPECT_EQ(hf.hidden, 4096);
  EXPECT_EQ(hf.intermediate, 14336);
  EXPECT_EQ(hf.heads, 32);
  EXPECT_EQ(hf.kv_heads, 8);
  EXPECT_EQ(hf.head_dim, 128);
  EXPECT_EQ(hf.vocab, 128256);
  const ModelShape gguf =
      ModelShape::from_config(read_model_config(PAGODA_TEST_DATA_DIR "/../../models/stories260K.gguf"));
  EXPECT_EQ(gguf.layers, 5);
  EXPECT_EQ(gguf.hidden, 64);
  EXPECT_THROW(read_model_config(PAGODA_TEST_DATA_DIR "/no-such-model"), LoadError);
  EXPECT_THROW(device_profile("a100"), Error);
}

}  // namespace
}  // namespace pagoda::plan
