// HF directory -> LoadedModel: weights are zero-copy views into the mmap'd safetensors, in their stored
// dtype, each checked by name and shape against config.json. Quantized linears (quantization_config) are
// converted once into their internal form (loader/quant/), owned by the LoadedModel.
#include "pagoda/loader/hf_loader.h"

#include <fmt/format.h>

#include <cstring>
#include <filesystem>

#include "pagoda/core/error.h"
#include "pagoda/core/logging.h"
#include "pagoda/loader/hf_config.h"
#include "pagoda/loader/progress_bar.h"
#include "pagoda/loader/quant/quant_config.h"
#include "pagoda/loader/quant/quant_linear.h"
#include "pagoda/loader/quant/quant_tensors.h"
#include "pagoda/loader/safetensors.h"
#include "pagoda/loader/weight_mapping.h"
#include "pagoda/loader/weight_transforms.h"

namespace pagoda {
namespace {

namespace fs = std::filesystem;

// The file to name when a tensor is missing: the index of a sharded checkpoint, else model.safetensors.
std::string checkpoint_name(const fs::path& dir) {
  std::error_code ec;
  const fs::path index = dir / "model.safetensors.index.json";
  return (fs::exists(index, ec) ? index : dir / "model.safetensors").string();
}

// The stored tensor of `name`. Tied embeddings are often stored once, as lm_head.weight, with torch's
// alias in __metadata__ ("model.embed_tokens.weight": "lm_head.weight"); embed_tokens then reads that.
const SafetensorsTensor* find_weight(const SafetensorsCheckpoint& ckpt, const std::string& name, WeightRole role,
                                     const ModelConfig& config) {
  if (const SafetensorsTensor* t = ckpt.find(name)) return t;
  if (role != WeightRole::kEmbedTokens) return nullptr;
  const std::string* alias = ckpt.metadata(name);
  if (alias != nullptr) return ckpt.find(*alias);
  return config.tie_word_embeddings ? ckpt.find("lm_head.weight") : nullptr;
}

bool is_float_dtype(DType d) { return d == DType::kF32 || d == DType::kF16 || d == DType::kBF16; }

// lm_head is a Linear too, so a compressed-tensors group targeting "Linear" stores it quantized unless the
// ignore list names it; its float weight is then missing, and the message says why.
std::string missing_hint(const QuantConfig& quant, const WeightSlot& slot) {
  if (slot.role != WeightRole::kLmHead || quant.method != QuantMethod::kCompressedTensors) return "";
  const QuantConfig* scheme = quant.scheme_for("lm_head");
  if (scheme == nullptr) return "";
  return fmt::format(" (quantization_config.config_groups.{} targets lm_head, and quantized lm_head weights are not "
                     "supported)", scheme->group);
}

}  // namespace

std::unique_ptr<Tokenizer> load_hf_tokenizer_if_present(const std::string& dir) {
  std::error_code ec;
  const fs::path tokenizer_json = fs::path(dir) / "tokenizer.json";
  if (!fs::exists(tokenizer_json, ec)) return nullptr;
  const fs::path tokenizer_config = fs::path(dir) / "tokenizer_config.json";
  return load_hf_tokenizer(tokenizer_json.string(),
                           fs::exists(tokenizer_config, ec) ? tokenizer_config.string() : std::string());
}

LoadedModel load_hf_model(const std::string& dir, const LoadOptions& options) {
  const fs::path root(dir);
  std::error_code ec;
  if (!fs::exists(root / "config.json", ec)) throw LoadError(dir, "no config.json in the model directory");

  LoadedModel model;
  model.source = dir;
  model.format = "safetensors";
  model.config = parse_hf_config((root / "config.json").string());
  model.generation = parse_generation_config((root / "generation_config.json").string());
  const QuantConfig quant = parse_quant_config((root / "config.json").string(), options.quantization);

  const SafetensorsCheckpoint ckpt = SafetensorsCheckpoint::open(dir);
  const std::string ckpt_name = checkpoint_name(root);
  check_layer_count(model.config, ckpt.tensors().size(), dir);
  {
    std::vector<std::string_view> names;
    for (const auto& [name, t] : ckpt.tensors()) names.push_back(name);
    check_no_layers_beyond(model.config, names, "model.layers.", dir);
  }
  const std::vector<WeightSlot> slots = weight_slots(model.config, model.weights);
  int64_t total_bytes = 0;
  for (const WeightSlot& slot : slots) {
    const std::string name = hf_weight_name(slot);
    const std::string module = name.substr(0, name.size() - std::string_view(".weight").size());
    const QuantConfig* scheme = is_linear(slot.role) ? quant.scheme_for(module) : nullptr;
    if (scheme != nullptr) {
      const QuantLinearSource src{ckpt, ckpt_name, module, slot.shape[0], slot.shape[1]};
      *slot.target = convert_quantized_linear(src, *scheme, model.owned);
      if (const auto bad = quant::non_finite_value(*slot.target)) throw LoadError(ckpt_name, module + ": " + *bad);
      total_bytes += slot.target->nbytes();
      continue;
    }
    const SafetensorsTensor* t = find_weight(ckpt, name, slot.role, model.config);
    if (t == nullptr) throw LoadError(ckpt_name, fmt::format("missing tensor {}{}", name, missing_hint(quant, slot)));
    check_weight_shape(t->file, name, t->shape, slot);
    if (!is_float_dtype(t->dtype))
      throw LoadError(t->file, fmt::format("tensor {} has dtype {}, expected F32, F16 or BF16{}", name,
                                           dtype_name(t->dtype), quant.method == QuantMethod::kNone
                                               ? " (config.json has no quantization_config)" : ""));
    total_bytes += static_cast<int64_t>(t->nbytes);
    if (reinterpret_cast<uintptr_t>(t->data) % static_cast<uintptr_t>(dtype_block_bytes(t->dtype)) != 0) {
      // Safetensors does not promise aligned tensors; kernels assume them, so a misaligned one is copied.
      model.owned.emplace_back(t->dtype, std::span<const int64_t>(t->shape));
      std::memcpy(model.owned.back().view().data, t->data, t->nbytes);
      slot.target->data = model.owned.back().view();
      continue;
    }
    // The mapping is read-only; Weight views are never written through.
    slot.target->data = Tensor::from_span(const_cast<std::byte*>(t->data), t->dtype, t->shape);
  }
  tie_lm_head(model.config, model.weights);
  model.mappings = ckpt.mappings();

  // Fault the weights in now, so load time is paid here and not inside the first request.
  ProgressBar bar("loading " + fs::path(dir).filename().string(), total_bytes, options.show_progress);
  uint64_t sink = 0;
  for (const WeightSlot& slot : slots) {
    const Tensor& t = slot.target->data;
    sink += touch_pages(t.data, static_cast<size_t>(t.nbytes()));
    bar.advance(t.nbytes());
  }
  bar.finish();
  spdlog::debug("{}: pre-faulted {} bytes (checksum {})", dir, total_bytes, sink);

  model.tokenizer = load_hf_tokenizer_if_present(dir);
  if (model.tokenizer) {
    if (!model.config.bos_token_id) model.config.bos_token_id = model.tokenizer->bos_token_id();
    if (model.config.eos_token_ids.empty()) model.config.eos_token_ids = model.tokenizer->eos_token_ids();
  }
  return model;
}

}  // namespace pagoda
