// quantize_decoder_linears (quantize_weights.h): each linear a slab of rows at a time, the slabs on every core.
#include "pagoda/quantize/quantize_weights.h"

#include <algorithm>
#include <atomic>
#include <thread>

#include "pagoda/core/dtype.h"
#include "pagoda/core/error.h"
#include "pagoda/loader/quant/quant_tensors.h"
#include "pagoda/quantize/rtn.h"

namespace pagoda::quantizer {
namespace {

constexpr int64_t kW4GroupSize = 128;
constexpr int64_t kSlabRows = 64;

// Rows [begin, end) of `w` as fp32 (each source dtype converted exactly, a row at a time).
Matrix rows_of(const Weight& w, int64_t begin, int64_t end) {
  const int64_t k = w.cols();
  Matrix m(end - begin, k);
  for (int64_t r = begin; r < end; ++r) {
    float* dst = m.row(r - begin);
    switch (w.data.dtype) {
      case DType::kF32: std::copy_n(w.data.ptr<const float>() + r * k, k, dst); break;
      case DType::kF16:
        for (int64_t c = 0; c < k; ++c) dst[c] = f16_to_f32(w.data.ptr<const uint16_t>()[r * k + c]);
        break;
      default:
        for (int64_t c = 0; c < k; ++c) dst[c] = bf16_to_f32(w.data.ptr<const uint16_t>()[r * k + c]);
        break;
    }
  }
  return m;
}

// Runs fn(begin, end) over slabs of `n` rows on every core.
template <typename Fn>
void for_each_slab(int64_t n, Fn fn) {
  const int64_t slabs = (n + kSlabRows - 1) / kSlabRows;
  std::atomic<int64_t> next{0};
  auto worker = [&] {
    for (int64_t s = next++; s < slabs; s = next++) fn(s * kSlabRows, std::min(n, (s + 1) * kSlabRows));
  };
  const int64_t threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, slabs);
  std::vector<std::jthread> pool;
  for (int64_t i = 1; i < threads; ++i) pool.emplace_back(worker);
  worker();
}

// `option`: the command-line option asking for it, for the errors.
Weight quantize_linear(const Weight& src, WeightQuantization q, std::vector<HostTensor>& owned, const std::string& name,
                       std::string_view option) {
  const DType dtype = src.data.dtype;
  if (src.quantized() || src.data.ndim != 2 || (dtype != DType::kF32 && dtype != DType::kF16 && dtype != DType::kBF16))
    throw InvalidRequest(fmt::format("{}: {} quantizes F32, F16 or BF16 weights; this one is {}", name, option,
                                     src.quantized() ? std::string(quant_scheme_name(src.scheme)) : dtype_name(dtype)));
  const int64_t n = src.data.dim(0), k = src.data.dim(1);
  switch (q) {
    case WeightQuantization::kFp8: {
      Weight w;
      w.scheme = QuantScheme::kFp8Channel;
      w.in_features = k;
      w.group_size = k;
      w.activations = ActivationQuant::kFp8PerToken;
      w.source_format = "fp8 (quantized at start-up)";
      w.data = owned.emplace_back(DType::kF8E4M3, std::initializer_list<int64_t>{n, k}).view();  // [N, K]
      w.scales = owned.emplace_back(DType::kF32, std::initializer_list<int64_t>{n, 1}).view();   // [N, 1]
      for_each_slab(n, [&](int64_t begin, int64_t end) {
        const Fp8Codes c = quantize_fp8_channel(rows_of(src, begin, end), dtype);
        std::copy(c.codes.begin(), c.codes.end(), w.data.ptr<uint8_t>() + begin * k);
        std::copy(c.scales.begin(), c.scales.end(), w.scales.ptr<float>() + begin);
      });
      return w;
    }
    case WeightQuantization::kInt8: {
      quant::QuantWeightBuilder out(QuantScheme::kInt8Channel, DType::kI8, n, k, k, false, DType::kI32, owned);
      out.set_source_format("int8 (quantized at start-up)");
      for_each_slab(n, [&](int64_t begin, int64_t end) {
        const SymCodes c = quantize_sym_int(rows_of(src, begin, end), 8, 0, dtype);
        for (int64_t r = begin; r < end; ++r) {
          for (int64_t j = 0; j < k; ++j) out.set_int8(r, j, c.codes[static_cast<size_t>((r - begin) * k + j)]);
          out.set_scale(r, 0, c.scales[static_cast<size_t>(r - begin)]);
        }
      });
      return out.finish();
    }
    case WeightQuantization::kW4: {
      if (k % kW4GroupSize != 0)
        throw InvalidRequest(fmt::format("{}: {} w4 needs in_features a multiple of {}; it is {}", name, option,
                                         kW4GroupSize, k));
      quant::QuantWeightBuilder out(QuantScheme::kInt4Group, DType::kU8, n, k, kW4GroupSize, true, DType::kU8, owned);
      out.set_source_format("w4 (quantized at start-up)");
      const int64_t groups = k / kW4GroupSize;
      for_each_slab(n, [&](int64_t begin, int64_t end) {
        const AsymGroupCodes c = quantize_asym_groups(rows_of(src, begin, end), kW4GroupSize);
        for (int64_t r = begin; r < end; ++r) {
          for (int64_t j = 0; j < k; ++j) out.set_int4(r, j, c.codes[static_cast<size_t>((r - begin) * k + j)]);
          for (int64_t g = 0; g < groups; ++g) {
            const size_t i = static_cast<size_t>((r - begin) * groups + g);
            out.set_scale(r, g, round_to_dtype(c.scales[i], DType::kF16));  // as the AWQ checkpoint stores it
            out.set_zero(r, g, c.zeros[i]);
          }
        }
      });
      return out.finish();
    }
  }
  return src;
}

// One part of a model quantized at start-up by `option`, named for `pagoda inspect` as "FORM (OPTION)".
Weight quantize_part(const Weight& src, WeightQuantization q, std::vector<HostTensor>& owned, const std::string& name,
                     std::string_view option) {
  Weight w = quantize_linear(src, q, owned, name, option);
  w.source_format = quant::intern_source_format(fmt::format("{} ({})", weight_quantization_name(q), option));
  return w;
}

}  // namespace

std::optional<WeightQuantization> parse_weight_quantization(std::string_view name) {
  if (name == "fp8") return WeightQuantization::kFp8;
  if (name == "int8") return WeightQuantization::kInt8;
  if (name == "w4") return WeightQuantization::kW4;
  return std::nullopt;
}

std::string_view weight_quantization_name(WeightQuantization q) {
  switch (q) {
    case WeightQuantization::kFp8: return "fp8";
    case WeightQuantization::kInt8: return "int8";
    case WeightQuantization::kW4: return "w4";
  }
  return "?";
}

ModelWeights quantize_decoder_linears(const ModelWeights& src, WeightQuantization q, std::vector<HostTensor>& owned) {
  ModelWeights out = src;
  for (size_t l = 0; l < out.layers.size(); ++l) {
    LayerWeights& layer = out.layers[l];
    const std::pair<Weight*, const char*> linears[] = {{&layer.wq, "q_proj"},    {&layer.wk, "k_proj"},
                                                       {&layer.wv, "v_proj"},    {&layer.wo, "o_proj"},
                                                       {&layer.w_gate, "gate_proj"}, {&layer.w_up, "up_proj"},
                                                       {&layer.w_down, "down_proj"}};
    for (const auto& [w, name] : linears)
      *w = quantize_linear(*w, q, owned, fmt::format("layer {} {}", l, name), "--fallback-quantization");
  }
  return out;
}

bool quantize_lm_head(ModelWeights& weights, WeightQuantization q, std::vector<HostTensor>& owned) {
  if (weights.lm_head.quantized()) return false;
  weights.lm_head = quantize_part(weights.lm_head, q, owned, "lm_head", "--quantize-lm-head");
  return true;
}

bool quantize_embeddings(ModelWeights& weights, WeightQuantization q, std::vector<HostTensor>& owned) {
  if (weights.embed_tokens.quantized()) return false;
  weights.embed_tokens = quantize_part(weights.embed_tokens, q, owned, "embed_tokens", "--quantize-embeddings");
  weights.embed_tokens.activations = ActivationQuant::kNone;  // looked up a row per token, never multiplied
  weights.embed_tokens.input_scale = 0.0f;
  return true;
}

}  // namespace pagoda::quantizer
