// open_gguf_source: a llama GGUF file whose weights are F32, F16 or BF16, as the HF checkpoint llama.cpp's
// convert_hf_to_gguf.py made it from: HF tensor names, Q/K rows put back from llama.cpp's interleaved-RoPE
// order into HF's rotate-half order (the loader's gguf_rope_row), and a config.json derived from the
// llama.* and tokenizer.ggml.* metadata (the loader's gguf_model_config, hf_config_json.h). The loader reads
// the same file into the same weights, so a quantized output holds what Pagoda computes with from the GGUF.
#pragma once

#include <string>

#include "pagoda/quantize/source_checkpoint.h"

namespace pagoda::quantizer {

// A LoadError naming the file: what gguf_model_config refuses, a missing or misshapen tensor, a tensor that
// is block-quantized (named with its type: quantizing again compounds the errors), or a tensor with no place
// in a Llama checkpoint. rope_freqs.weight becomes config.json's llama3 rope_scaling; with no output.weight
// the embeddings are tied (tie_word_embeddings, no lm_head.weight).
SourceCheckpoint open_gguf_source(const std::string& path);

}  // namespace pagoda::quantizer
