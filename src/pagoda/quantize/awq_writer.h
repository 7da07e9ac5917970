// AutoAWQ GEMM tensors and quantization_config (WQLinear_GEMM.from_linear, awq/models/_config.py): the
// inverse of loader/quant/awq.cpp.
//   <module>.qweight I32 [K, N/8]   nibble i of word c in row k: column 8c + [0,2,4,6,1,3,5,7][i]
//   <module>.qzeros  I32 [K/G, N/8] the same packing, zero points as they are
//   <module>.scales  F16 [K/G, N]
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "pagoda/loader/safetensors_writer.h"
#include "pagoda/quantize/rtn.h"

namespace pagoda::quantizer {

std::vector<SafetensorsEntry> awq_gemm_tensors(const std::string& module, const AsymGroupCodes& q);
nlohmann::ordered_json awq_quantization_config(int64_t group_size);

}  // namespace pagoda::quantizer
