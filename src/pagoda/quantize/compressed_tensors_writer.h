// compressed-tensors tensors and quantization_config as llm-compressor writes them: the inverse of
// loader/quant/compressed_tensors.cpp.
//   pack-quantized (W8A16 channel, W4A16 group):
//     <module>.weight_packed I32 [N, K*b/32]  code k at bit k*b of row n's bit stream, stored q + 2^(b-1)
//     <module>.weight_scale  [N, K/G] in the model dtype
//     <module>.weight_shape  I64 [2] = [N, K]
//   float-quantized (FP8_DYNAMIC): <module>.weight F8_E4M3 [N, K], <module>.weight_scale [N, 1]
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "pagoda/loader/safetensors_writer.h"
#include "pagoda/quantize/rtn.h"

namespace pagoda::quantizer {

std::vector<SafetensorsEntry> pack_quantized_tensors(const std::string& module, const SymCodes& q, DType scale_dtype);
std::vector<SafetensorsEntry> float_quantized_tensors(const std::string& module, const Fp8Codes& q, DType scale_dtype);

// group_size 0: strategy "channel".
nlohmann::ordered_json pack_quantized_config(int bits, int64_t group_size);
nlohmann::ordered_json fp8_dynamic_config();

// Scalars of `dtype` (F32, F16 or BF16) from fp32 values that it represents exactly.
SafetensorsEntry float_entry(std::string name, DType dtype, std::vector<int64_t> shape, const std::vector<float>& v);

}  // namespace pagoda::quantizer
