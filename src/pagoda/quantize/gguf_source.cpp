// GGUF file -> SourceCheckpoint: each tensor the loader maps to a weight slot, under that slot's HF name;
// Q/K rows un-permuted into owned copies, the rest views into the mapping.
#include "pagoda/quantize/gguf_source.h"

#include <fmt/format.h>

#include <cstring>
#include <set>

#include "pagoda/core/error.h"
#include "pagoda/loader/gguf_file.h"
#include "pagoda/loader/gguf_loader.h"
#include "pagoda/loader/weight_mapping.h"
#include "pagoda/loader/weight_transforms.h"
#include "pagoda/quantize/hf_config_json.h"

namespace pagoda::quantizer {
namespace {

// Read by gguf_model_config (llama3 rope scaling), which config.json's rope_scaling then carries.
constexpr const char* kConfigTensors[] = {"rope_freqs.weight"};

// HF row r of a Q or K weight is GGUF row gguf_rope_row(r): llama.cpp's converter interleaved each head's
// two rotary halves; copying the rows back undoes it exactly.
std::shared_ptr<std::vector<std::byte>> unpermuted_rows(const GgufTensorInfo& t, int head_dim) {
  const int64_t rows = t.shape[0];
  const size_t row_bytes = t.nbytes / static_cast<size_t>(rows);
  auto out = std::make_shared<std::vector<std::byte>>(t.nbytes);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(out->data() + static_cast<size_t>(r) * row_bytes,
                t.data + static_cast<size_t>(gguf_rope_row(r, head_dim)) * row_bytes, row_bytes);
  return out;
}

}  // namespace

SourceCheckpoint open_gguf_source(const std::string& path) {
  const GgufFile file(path);
  SourceCheckpoint src;
  src.path = path;
  src.format = SourceFormat::kGguf;
  src.config = gguf_model_config(file);
  const ModelConfig& c = src.config;
  check_layer_count(c, file.tensors().size(), path);
  src.storage.push_back(file.mapping());

  ModelWeights unused;  // weight_slots wants targets; only the names and shapes are used here
  std::set<std::string> used(std::begin(kConfigTensors), std::end(kConfigTensors));
  for (const WeightSlot& slot : weight_slots(c, unused)) {
    const std::string name = gguf_weight_name(slot);
    const GgufTensorInfo* t = file.find_tensor(name);
    if (t == nullptr) throw LoadError(path, fmt::format("missing tensor {}", name));
    if (!ggml_type_is_float(t->type))
      throw LoadError(path, fmt::format("tensor {} is {}: only F32, F16 or BF16 GGUF files can be quantized (quantizing "
                                        "quantized weights again compounds their error)", name,
                                        ggml_type_info(static_cast<uint32_t>(t->type))->name));
    check_weight_shape(path, name, t->shape, slot);
    used.insert(name);
    SafetensorsTensor st{hf_weight_name(slot), t->dtype, t->shape, t->data, t->nbytes, path};
    if (slot.role == WeightRole::kWq || slot.role == WeightRole::kWk) {
      auto rows = unpermuted_rows(*t, c.head_dim);
      st.data = rows->data();
      src.storage.push_back(std::move(rows));
    }
    src.tensors.emplace(st.name, std::move(st));
  }
  for (const GgufTensorInfo& t : file.tensors())
    if (used.count(t.name) == 0)
      throw LoadError(path, fmt::format("tensor {} has no counterpart in an HF Llama checkpoint (biases and extra "
                                        "tensors are not supported)", t.name));

  // The linears' dtype is the checkpoint's torch_dtype (norms that llama.cpp keeps in F32 stay F32).
  const SafetensorsTensor& q = src.tensors.at("model.layers.0.self_attn.q_proj.weight");
  src.config.dtype = q.dtype;
  src.config_json = hf_llama_config_json(src.config, q.dtype);
  return src;
}

}  // namespace pagoda::quantizer
