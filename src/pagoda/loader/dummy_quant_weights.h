// Random quantized linears for `--load-format dummy --quantization KIND`: codes, scales and zero points in the
// internal forms of core/quant_scheme.h at a config's shapes, so that quantized kernels can be timed at a
// real model's size without a checkpoint. Their dequantized values are ~N(0, 0.02), as the unquantized
// dummy's are, so a forward gives finite, non-degenerate logits. Never claim accuracy from them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pagoda/loader/model_weights.h"

namespace pagoda {

// What a dummy load makes of each decoder linear (wq, wk, wv, wo, w_gate, w_up, w_down); embeddings, norms
// and lm_head stay in the config dtype.
struct DummyQuant {
  QuantScheme scheme = QuantScheme::kNone;  // kNone: every weight in the config dtype, as without --quantization
  std::string_view source_format;  // Weight::source_format ("dummy awq"), static storage: what inspect shows
  int64_t group_size = 0;          // kInt4Group: along K, 0 = one group per row; the others are per row
  bool random_zeros = false;       // kInt4Group: a zero point of 6..9 per group (AWQ); else symmetric, z = 8
  bool act_order = false;          // kInt4Group: a g_idx (GPTQ's desc_act), the same for every linear of one K
};

// The dummy form of `quantization` (LoadOptions::quantization):
//   awq                             kInt4Group, zero points 6..9
//   gptq, compressed-tensors        kInt4Group, symmetric (z = 8)
//   int8                            kInt8Channel, per row, symmetric
//   fp8, modelopt                   kFp8Channel, per row
//   "", none                        kNone
// The int4 group size is 128, or config.json's quantization_config.group_size when `config_path` (empty for
// a GGUF's metadata) has one (-1: one group per row); gptq with quantization_config.desc_act true has act order:
// each linear's columns in groups of a random permutation, as GPTQ writes them (g_idx). An unknown kind or a bad group_size is a LoadError
// naming `source` or config.json.
DummyQuant dummy_quant_kind(const std::string& quantization, const std::string& source, const std::string& config_path);

// One tensor a dummy weight needs: where its view goes, and its dtype and shape.
struct DummyTensorSpec {
  Tensor* target;
  DType dtype;
  std::vector<int64_t> shape;
};

// Sets `w`'s scheme, in_features, group_size and source_format for the linear `name` [n, k] and returns the
// tensors to allocate for it (data, scales, and zeros for kInt4Group; g_idx with act order). A K that the group size does not
// divide is a LoadError naming `source` and `name`.
std::vector<DummyTensorSpec> dummy_quant_layout(const DummyQuant& quant, const std::string& source,
                                                const std::string& name, int64_t n, int64_t k, Weight& w);

// Fills rows [begin, end) of `w` (allocated as dummy_quant_layout says) from the random stream `state`:
// codes around the zero point, and per group (or row) scales that make the values ~N(0, 0.02); and g_idx, with
// the chunk of row 0.
void fill_dummy_quant_rows(const Weight& w, const DummyQuant& quant, int64_t begin, int64_t end, uint64_t state);

}  // namespace pagoda
