// GGUF file -> LoadedModel. Weights are views into the mmap except Q/K (rows un-permuted into owned copies)
// and the block-quantized tensors (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K: converted to the internal
// quantized kinds, gguf_quant.h); F32, F16 and BF16 stay as stored.
#include "pagoda/loader/gguf_loader.h"

#include <fmt/format.h>

#include <cstring>
#include <filesystem>

#include "pagoda/core/error.h"
#include "pagoda/core/logging.h"
#include "pagoda/loader/gguf_quant.h"
#include "pagoda/loader/gguf_tokenizer.h"
#include "pagoda/loader/progress_bar.h"
#include "pagoda/loader/quant/quant_tensors.h"
#include "pagoda/loader/weight_mapping.h"
#include "pagoda/loader/weight_transforms.h"

namespace pagoda {
namespace {

// Rows of `t` (a dtype used as stored) into a new host tensor: dst row r = src row src_row(r).
template <typename RowMap>
HostTensor copy_rows(const GgufTensorInfo& t, RowMap src_row) {
  HostTensor out(t.dtype, std::span<const int64_t>(t.shape), Buffer::Init::kHugePages);  // every byte copied below
  const int64_t num_rows = t.shape.size() == 1 ? 1 : t.shape[0];
  const int64_t row_elems = t.shape.size() == 1 ? t.shape[0] : out.view().numel() / num_rows;
  const int64_t row_bytes = dtype_storage_bytes(t.dtype, row_elems);
  auto* dst = static_cast<std::byte*>(out.view().data);
  for (int64_t r = 0; r < num_rows; ++r)
    std::memcpy(dst + r * row_bytes, t.data + src_row(r) * row_bytes, static_cast<size_t>(row_bytes));
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
  {
    std::vector<std::string_view> names;
    for (const GgufTensorInfo& t : file.tensors()) names.push_back(t.name);
    check_no_layers_beyond(model.config, names, "blk.", path);
  }
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
    const bool rope_rows = slot.role == WeightRole::kWq || slot.role == WeightRole::kWk;
    const int hd = c.head_dim;
    if (gguf_block_conversion(t.type)) {
      // Block-quantized (Q4_0, Q4_K, ...): converted to the internal kinds, Q/K rows un-permuted on the way.
      if (t.shape.size() != 2)
        throw LoadError(path, fmt::format("tensor {} is {}: only 2-D weights may be block-quantized", t.name,
                                          ggml_type_info(static_cast<uint32_t>(t.type))->name));
      *slot.target = convert_gguf_blocks(
          t, [&](int64_t r) { return rope_rows ? gguf_rope_row(r, hd) : r; }, model.owned);
      if (const auto bad = quant::non_finite_value(*slot.target))
        throw LoadError(path, fmt::format("tensor {}: {} (a block's scale is not finite)", t.name, *bad));
    } else if (rope_rows) {
      model.owned.push_back(copy_rows(t, [hd](int64_t r) { return gguf_rope_row(r, hd); }));
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
