// hf_llama_config_json: the config.json transformers' LlamaConfig (and vLLM) reads for a ModelConfig, for
// checkpoints that come without one (a GGUF file's metadata, gguf_source.h). parse_hf_config reads it back
// into the same ModelConfig.
#pragma once

#include <nlohmann/json.hpp>

#include "pagoda/loader/model_config.h"

namespace pagoda::quantizer {

// LlamaForCausalLM with c's sizes, rope (llama3 scaling as rope_scaling), norm epsilon, tying and special
// token ids; torch_dtype names `dtype` (F32, F16 or BF16). Floats that are exactly a float32 (GGUF stores
// its floats as float32) are written as the shortest decimal of that float: 1e-05, not 9.999999747378752e-06.
nlohmann::ordered_json hf_llama_config_json(const ModelConfig& c, DType dtype);

// "float32", "float16" or "bfloat16".
const char* torch_dtype_name(DType dtype);

}  // namespace pagoda::quantizer
