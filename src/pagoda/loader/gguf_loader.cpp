// GGUF file -> LoadedModel. Weights are views into the mmap except Q/K (rows un-permuted into owned copies)
// and Q4_0 tensors (dequantised to owned F16); Q8_0 stays Q8_0.
#include "pagoda/loader/gguf_loader.h"

#include <fmt/format.h>

#include <cstring>
#include <filesystem>

#include "pagoda/core/error.h"
#include "pagoda/core/logging.h"
#include "pagoda/loader/gguf_tokenizer.h"
#include "pagoda/loader/progress_bar.h"
#include "pagoda/loader/weight_mapping.h"
#include "pagoda/loader/weight_transforms.h"

namespace pagoda {
namespace {

// Rows of `t` into a new host tensor: dst row r = src row src_row(r); Q4_0 rows become F16.
template <typename RowMap>
HostTensor copy_rows(const GgufTensorInfo& t, RowMap src_row) {
  const DType out_dtype = t.dtype == DType::kQ4_0 ? DType::kF16 : t.dtype;
  HostTensor out(out_dtype, std::span<const int64_t>(t.shape));
  const int64_t num_rows = t.shape.size() == 1 ? 1 : t.shape[0];
  const int64_t row_elems = t.shape.size() == 1 ? t.shape[0] : out.view().numel() / num_rows;
  const int64_t src_row_bytes = dtype_storage_bytes(t.dtype, row_elems);
  const int64_t dst_row_bytes = dtype_storage_bytes(out_dtype, row_elems);
  auto* dst = static_cast<std::byte*>(out.view().data);
  for (int64_t r = 0; r < num_rows; ++r) {
    const std::byte* src = t.data + src_row(r) * src_row_bytes;
    if (t.dtype == DType::kQ4_0) {
      dequantize_q4_0_to_f16(src, reinterpret_cast<uint16_t*>(dst + r * dst_row_bytes), row_elems);
    } else {
      std::memcpy(dst + r * dst_row_bytes, src, static_cast<size_t>(src_row_bytes));
    }
  }
  return out;
}

}  // namespace

std::unique_ptr<Tokenizer> load_gguf_tokenizer_if_present(const GgufFile& file) {
  if (!file.has("tokenizer.ggml.model")) return nullptr;
  return load_gguf_tokenizer(file);
}

LoadedModel load_gguf_model(const std::string& path, const LoadOptions& options) {
  const GgufFile file(path);
  LoadedModel model;
  model.source = path;
  model.format = "gguf";
  model.config = gguf_model_config(file);
  const ModelConfig& c = model.config;

  check_layer_count(model.config, file.tensors().size(), path);
  const std::vector<WeightSlot> slots = weight_slots(model.config, model.weights);
  int64_t total_bytes = 0;
  for (const WeightSlot& slot : slots) {
    const std::string name = gguf_weight_name(slot);
    const GgufTensorInfo* t = file.find_tensor(name);
    if (t == nullptr) throw LoadError(path, fmt::format("missing tensor {}", name));
    check_weight_shape(path, name, t->shape, slot);
    total_bytes += static_cast<int64_t>(t->nbytes);
  }

  ProgressBar bar("loading " + std::filesystem::path(path).filename().string(), total_bytes, options.show_progress);
  uint64_t sink = 0;
  for (const WeightSlot& slot : slots) {
    const GgufTensorInfo& t = *file.find_tensor(gguf_weight_name(slot));
    const bool is_q = slot.role == WeightRole::kWq;
    if (is_q || slot.role == WeightRole::kWk) {
      const int hd = c.head_dim;
      model.owned.push_back(copy_rows(t, [hd](int64_t r) { return gguf_rope_row(r, hd); }));
      slot.target->data = model.owned.back().view();
    } else if (t.dtype == DType::kQ4_0) {
      model.owned.push_back(copy_rows(t, [](int64_t r) { return r; }));
      slot.target->data = model.owned.back().view();
    } else {
      // Read-only mapping; Weight views are never written through.
      slot.target->data = Tensor::from_span(const_cast<std::byte*>(t.data), t.dtype, t.shape);
      sink += touch_pages(t.data, t.nbytes);
    }
    bar.advance(static_cast<int64_t>(t.nbytes));
  }
  bar.finish();
  spdlog::debug("{}: pre-faulted weights (checksum {})", path, sink);
  tie_lm_head(model.config, model.weights);
  model.mappings.push_back(file.mapping());

  model.tokenizer = load_gguf_tokenizer_if_present(file);
  if (model.tokenizer) {
    if (!model.config.bos_token_id) model.config.bos_token_id = model.tokenizer->bos_token_id();
    if (model.config.eos_token_ids.empty()) model.config.eos_token_ids = model.tokenizer->eos_token_ids();
  }
  // GGUF has no generation_config: sampling defaults stay Pagoda's, stop tokens come from the tokenizer keys.
  model.generation.eos_token_ids = model.config.eos_token_ids;
  return model;
}

}  // namespace pagoda
