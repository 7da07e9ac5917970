// The model's predictions for Llama-3-8B on the built-in H200 profile against what this repository measured
// on an H200. Issue 17's target is 15%. The measured figures are copied here with their source; the model's
// constants (plan/device_profile.cpp) come from kernel-level logs and from the prefill figures named there,
// not from this table, and nothing below is adjusted per cell.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "pagoda/plan/device_profile.h"
#include "pagoda/plan/model_source.h"
#include "pagoda/plan/throughput_model.h"

namespace pagoda::plan {
namespace {

constexpr double kTarget = 0.15;

ModelShape llama3_8b() { return ModelShape::from_config(read_model_config(PAGODA_TEST_DATA_DIR "/models/llama-3-8b")); }

// docs/PERFORMANCE.md "GPU: FP8 W8A8 and the quantized decode table (issue 14, second part)": decode tok/s, all
// sequences together, of `pagoda bench latency -m tests/data/models/llama-3-8b --load-format dummy --device cuda
// --max-model-len 4096 --quantization KIND --batch-size B --max-num-seqs B --input-len 128 --output-len 64
// --num-iters 1`; H200, 2026-12-01, the binaries of the commit after 6a0b611
// (bench/results/2026-12-01-h200-fp8-w8a8/quant_bench.txt and qbench_*.json); W4A16 and W8A16 at batch 1 and 4
// since from the few-token kernel (docs/PERFORMANCE.md "GPU: the few-token W4 GEMV", 2026-12-04, the same command:
// bench/results/2026-12-04-h200-w4-few-tokens/e-few-tokens-quant-bench.txt and f-int8-quant-bench.txt), and at batch 64
// since from the quantized GEMM (docs/PERFORMANCE.md "GPU: the quantized GEMM for 41 to 192 tokens", 2026-12-05, the
// same command: bench/results/2026-12-05-h200-quant-gemm/e-final-quant-bench.txt).
struct MeasuredRow {
  Precision precision;
  double tokens_per_s[5];
};
constexpr int64_t kBatches[5] = {1, 4, 16, 64, 256};
constexpr MeasuredRow kDecodeTable[] = {
    {Precision::kBf16, {246, 791, 3332, 11513, 27053}},
    {Precision::kAwq, {484, 1614, 3612, 10731, 16337}},
    {Precision::kInt8, {343, 1218, 3345, 10294, 15920}},
    {Precision::kFp8, {330, 1238, 4425, 14324, 31920}},
};
// Its decode steps run at 129 to 191 tokens of context (128 prompt tokens, 64 generated): 160 on average.
constexpr int64_t kTableContext = 160;

// Prints the comparison and checks the target. Every cell meets it today; one that stops meeting it after a
// change of the model is to be printed and documented (docs/PERFORMANCE.md "pagoda plan") rather than asserted:
// replace its check by the error it has, never loosen kTarget.
void check_cell(const std::string& what, double predicted, double measured) {
  const double error = predicted / measured - 1;
  std::printf("[ plan ] %-44s predicted %9.1f measured %9.1f  %+6.1f%%%s\n", what.c_str(), predicted, measured,
              100 * error, std::abs(error) > kTarget ? "  MISS" : "");
  EXPECT_LE(std::abs(error), kTarget) << what;
}

TEST(PlanH200, DecodeTableWithin15Percent) {
  const ModelShape m = llama3_8b();
  const DeviceProfile d = h200_profile();
  double worst = 0;
  for (const MeasuredRow& row : kDecodeTable) {
    for (int i = 0; i < 5; ++i) {
      const int64_t batch = kBatches[i];
      const StepCost c = predict_step(m, row.precision, decode_step(batch, kTableContext), d, {});
      const double predicted = static_cast<double>(batch) / c.seconds;
      worst = std::max(worst, std::abs(predicted / row.tokens_per_s[i] - 1));
      check_cell(std::string(precision_label(row.precision)) + " batch " + std::to_string(batch) + " (" + c.path + ")",
                 predicted, row.tokens_per_s[i]);
    }
  }
  std::printf("[ plan ] worst relative error over the decode table: %.1f%%\n", 100 * worst);
}

// Other measured figures the constants were not taken from.
TEST(PlanH200, OtherMeasuredFigures) {
  const ModelShape m = llama3_8b();
  const DeviceProfile d = h200_profile();
  // docs/PERFORMANCE.md "GPU: FP8 W8A8 and the quantized decode table": 1,024-token prompt, TTFT with FP8 W8A8
  // 21.3 ms (bench/results/2026-12-01-h200-fp8-w8a8/bench_ttft_1024.json). (bf16's 26.0 ms, "Current figures
  // (commit 3fe15b3)", is what bf16_gemm_efficiency was solved from: printed, not a test.)
  std::printf("[ plan ] bf16 1,024-token prefill (calibration): predicted %.2f ms, measured 26.0\n",
              1e3 * predict_prefill(m, Precision::kBf16, 1024, 2048, d, {}).seconds);
  check_cell("FP8 W8A8 1,024-token prefill, ms", 1e3 * predict_prefill(m, Precision::kFp8, 1024, 2048, d, {}).seconds,
             21.3);
  // docs/PERFORMANCE.md "GPU: FP8 KV decode from registers" (2026-12-02, commit 6b0ccaf; the Llama-3.1-8B
  // shape, whose dimensions are Llama-3-8B's), bf16 weights, bf16 or FP8 KV. 64 x 4k with the batch decoding
  // together: TPOT 13.31 and 10.24 ms (bench/results/2026-12-02-h200-fp8-kv-regs/kv-wide/kvw_*_b64_ctx4k.json;
  // 4,096 prompt tokens, 128 generated: 4,160 of context on average). Batch 1: 221.7 / 229.4 tok/s at 8,000
  // prompt tokens + 256 generated, 186.9 / 205.8 at 32,000 + 128 (f16-qk/kv_*_b1_ctx{8k,32k}.json).
  for (const bool fp8 : {false, true}) {
    const PlanOptions o{.kv_fp8 = fp8};
    const std::string kv = fp8 ? ", FP8 KV" : ", bf16 KV";
    check_cell("bf16 64 x 4k decode TPOT, ms" + kv,
               1e3 * predict_step(m, Precision::kBf16, decode_step(64, 4160), d, o).seconds, fp8 ? 10.24 : 13.31);
    check_cell("bf16 batch 1 at 8k, tok/s" + kv,
               1 / predict_step(m, Precision::kBf16, decode_step(1, 8128), d, o).seconds, fp8 ? 229.4 : 221.7);
    check_cell("bf16 batch 1 at 32k, tok/s" + kv,
               1 / predict_step(m, Precision::kBf16, decode_step(1, 32128), d, o).seconds, fp8 ? 205.8 : 186.9);
  }
  // docs/PERFORMANCE.md "GPU: FP8 W8A8 ...": --quantize-lm-head fp8 at batch 1, fp8 338 tok/s
  // (bench/results/2026-12-01-h200-fp8-w8a8/lm-head-fp8/; its awq figure, 386, was the general kernel's).
  const PlanOptions head{.lm_head = Precision::kFp8};
  check_cell("FP8 W8A8 batch 1, FP8 lm_head, tok/s",
             1 / predict_step(m, Precision::kFp8, decode_step(1, 160), d, head).seconds, 338);
  // docs/PERFORMANCE.md "GPU: a quantized lm_head, ..." (2026-12-05): W4A16 g128 at batch 1 (128 prompt tokens, 64
  // generated) with --quantize-lm-head int8 and w4, 498.6 and 512.8 tok/s
  // (bench/results/2026-12-05-h200-session29/lm-head-batch1.txt).
  for (const auto& [lm_head, measured] : {std::pair{Precision::kInt8, 498.6}, std::pair{Precision::kAwq, 512.8}}) {
    const PlanOptions o{.lm_head = lm_head};
    check_cell(std::string("W4A16 batch 1, ") + std::string(precision_label(lm_head)) + " lm_head, tok/s",
               1 / predict_step(m, Precision::kAwq, decode_step(1, 160), d, o).seconds, measured);
  }
}

}  // namespace
}  // namespace pagoda::plan
