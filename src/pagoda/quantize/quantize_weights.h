// Quantizing a loaded model's weights in memory, at start-up (`--fallback-quantization`): the decoder linears
// of an unquantized model (F32, F16 or BF16) become one of the internal forms of core/quant_scheme.h, with the
// round-to-nearest quantizers of `pagoda quantize` (rtn.h). The weights come out exactly as loading the
// checkpoint `pagoda quantize` writes for the same model and format would give them:
//   fp8   FP8 e4m3 per output channel, inputs per token (W8A8; compressed-tensors FP8_DYNAMIC, as vLLM's
//         `--quantization fp8`)
//   int8  int8 per output channel, symmetric, bf16/fp32 inputs (W8A16; compressed-tensors pack-quantized)
//   w4    4-bit groups of 128 with zero points and fp16 scales (W4A16; AutoAWQ GEMM's RTN)
// The embedding, the norms and lm_head are not quantized: the copy holds the source's own views of them.
// `--quantize-lm-head` quantizes the output projection alone, with the same quantizers (quantize_lm_head), and
// `--quantize-embeddings` the embedding table (quantize_embeddings).
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "pagoda/core/buffer.h"
#include "pagoda/loader/model_weights.h"

namespace pagoda::quantizer {

enum class WeightQuantization { kFp8, kInt8, kW4 };

// "fp8", "int8", "w4"; nullopt for anything else.
std::optional<WeightQuantization> parse_weight_quantization(std::string_view name);
std::string_view weight_quantization_name(WeightQuantization q);

// A copy of `src` with its decoder linears quantized; the new storage is appended to `owned`. Throws
// InvalidRequest (naming the weight) when a linear is already quantized or its shape does not allow the form
// (w4: in_features a multiple of 128).
ModelWeights quantize_decoder_linears(const ModelWeights& src, WeightQuantization q, std::vector<HostTensor>& owned);

// `--quantize-lm-head fp8|int8|w4`: the output projection, which most quantized checkpoints keep in 16 bits (22%
// of what a W4 Llama-3-8B streams a token), replaced by its form q (the tied embedding table keeps its own view);
// the new storage is appended to `owned`. Returns false, leaving it, when the lm_head is already quantized (a GGUF
// file's); throws InvalidRequest when its shape does not allow the form.
bool quantize_lm_head(ModelWeights& weights, WeightQuantization q, std::vector<HostTensor>& owned);

// `--quantize-embeddings fp8|int8|w4`: the embedding table, with the same quantizers (each vocabulary row a row of
// the form; fp8 rows keep no input quantization: a lookup multiplies nothing). A tied lm_head keeps its own view of
// the table. Returns false, leaving it, when the table is already quantized (a GGUF file's); throws InvalidRequest
// when its shape does not allow the form. As llama.cpp's `--token-embedding-type`; vLLM keeps embeddings in 16 bits.
bool quantize_embeddings(ModelWeights& weights, WeightQuantization q, std::vector<HostTensor>& owned);

}  // namespace pagoda::quantizer
