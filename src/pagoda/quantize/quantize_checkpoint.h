// quantize_checkpoint: an unquantized HF safetensors checkpoint or llama GGUF file (F32/F16/BF16) -> a
// quantized HF checkpoint that Pagoda, vLLM and transformers load: AutoAWQ GEMM (W4, RTN or AWQ),
// compressed-tensors pack-quantized (W8A16 channel, W4A16 group) or compressed-tensors FP8_DYNAMIC. Every
// decoder linear is quantized; embeddings, norms (AWQ: with its scales folded in) and lm_head keep their dtype.
#pragma once

#include <string>
#include <vector>

#include "pagoda/quantize/awq_layer.h"
#include "pagoda/quantize/awq_search.h"
#include "pagoda/quantize/calibration.h"

namespace pagoda::quantizer {

enum class QuantizeMethod { kRtn, kAwq };
enum class QuantizeFormat {
  kAwq,                // W4 asymmetric groups, AutoAWQ GEMM (the default for --bits 4)
  kCompressedTensors,  // symmetric int, pack-quantized (the default for --bits 8: channel)
  kFp8,                // FP8 e4m3 channel weights, dynamic per-token activations
};

struct QuantizeOptions {
  std::string model_path;  // an HF safetensors directory or a .gguf file
  std::string out_dir;
  // An HF directory whose tokenizer files (tokenizer.json, tokenizer_config.json, special_tokens_map.json,
  // generation_config.json, tokenizer.model) are copied into out_dir, over the source's own; AWQ tokenizes its
  // calibration text with it. Empty: the source's files (a GGUF has none to copy: a warning says so).
  std::string tokenizer_dir{};
  QuantizeMethod method = QuantizeMethod::kRtn;
  int bits = 4;
  int64_t group_size = 128;  // W4 only; W8 and FP8 are per channel
  QuantizeFormat format = QuantizeFormat::kAwq;
  bool force = false;        // write into an existing non-empty out_dir
  bool show_progress = true;
  CalibrationOptions calibration{};  // AWQ
  AwqSearchOptions awq{};            // its group_size is set from group_size
};

struct LinearSummary {
  std::string name;          // "model.layers.0.self_attn.q_proj"
  int64_t rows = 0, cols = 0;
  double weight_rel_rms = 0; // ||W - deq(Q(W))|| / ||W|| of the weight quantized (AWQ: the scaled, clipped one)
};

struct QuantizeSummary {
  std::vector<LinearSummary> linears;
  std::vector<std::vector<GroupReport>> awq_groups;  // per layer (AWQ only)
  int64_t calibration_tokens = 0;
  int64_t bytes_written = 0;
  double seconds = 0;
};

// Checks the options alone (bits, method and format, group size); an InvalidRequest naming the option.
void validate_options(const QuantizeOptions& options);
// Writes out_dir/{model.safetensors, config.json} and copies an HF source's other files (tokenizer,
// generation config), then --tokenizer's. Bad input (missing model, already quantized, a block-quantized
// GGUF, group size not dividing K, a --tokenizer without tokenizer.json, unwritable or non-empty out_dir) is
// an Error with a one-line message.
QuantizeSummary quantize_checkpoint(const QuantizeOptions& options);

}  // namespace pagoda::quantizer
