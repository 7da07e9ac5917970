// Tensor lookup with dtype/shape checks and the builder of a quantized Weight's owned tensors.
#include "pagoda/loader/quant/quant_tensors.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <set>
#include <utility>

#include "pagoda/core/error.h"

namespace pagoda::quant {

std::string tensor_name(const QuantLinearSource& src, const std::string& suffix) { return src.module + "." + suffix; }

void fail(const QuantLinearSource& src, const std::string& suffix, const std::string& problem) {
  throw LoadError(src.file, fmt::format("tensor {} {}", tensor_name(src, suffix), problem));
}

const SafetensorsTensor* find(const QuantLinearSource& src, const std::string& suffix) {
  return src.ckpt.find(tensor_name(src, suffix));
}

const SafetensorsTensor& require(const QuantLinearSource& src, const std::string& suffix,
                                 std::initializer_list<DType> dtypes, std::initializer_list<int64_t> shape) {
  const SafetensorsTensor* t = find(src, suffix);
  if (t == nullptr) throw LoadError(src.file, fmt::format("missing tensor {}", tensor_name(src, suffix)));
  if (std::find(dtypes.begin(), dtypes.end(), t->dtype) == dtypes.end()) {
    std::vector<std::string_view> names;
    for (DType d : dtypes) names.push_back(dtype_name(d));
    fail(src, suffix, fmt::format("has dtype {}, expected {}", dtype_name(t->dtype), fmt::join(names, " or ")));
  }
  if (!std::equal(t->shape.begin(), t->shape.end(), shape.begin(), shape.end()))
    fail(src, suffix, fmt::format("has shape [{}], expected [{}] for in_features {}, out_features {}",
                                  fmt::join(t->shape, ", "), fmt::join(shape, ", "), src.k, src.n));
  return *t;
}

float float_at(const SafetensorsTensor& t, int64_t i) {
  switch (t.dtype) {
    case DType::kF32: {
      float v;
      std::memcpy(&v, t.data + i * 4, 4);
      return v;
    }
    case DType::kF16:
    case DType::kBF16: {
      uint16_t v;
      std::memcpy(&v, t.data + i * 2, 2);
      return t.dtype == DType::kF16 ? f16_to_f32(v) : bf16_to_f32(v);
    }
    default:
      PAGODA_CHECK(false, "float_at: {} is not a float dtype", dtype_name(t.dtype));
  }
  return 0;
}

std::string_view intern_source_format(std::string_view text) {
  static std::mutex mutex;
  static std::set<std::string, std::less<>> texts;  // nodes never move: the views stay valid
  const std::lock_guard lock(mutex);
  auto it = texts.find(text);
  if (it == texts.end()) it = texts.emplace(text).first;
  return *it;
}

std::string group_text(int64_t group_size) {
  return group_size == 0 ? std::string("per-channel") : fmt::format("g{}", group_size);
}

int64_t num_groups(const QuantLinearSource& src, int64_t group_size, const std::string& field) {
  if (group_size == 0) return 1;
  if (src.k % group_size != 0)
    throw LoadError(src.file, fmt::format("{}: {} {} does not divide in_features {}", src.module, field, group_size,
                                          src.k));
  return src.k / group_size;
}

QuantWeightBuilder::QuantWeightBuilder(QuantScheme scheme, DType data_dtype, int64_t n, int64_t k,
                                       int64_t group_size, bool has_zeros, DType zeros_dtype,
                                       std::vector<HostTensor>& owned)
    : owned_(owned) {
  const bool int4 = scheme == QuantScheme::kInt4Group;
  PAGODA_CHECK(!int4 || k % 2 == 0, "int4 rows hold pairs of codes: K {} is odd", k);
  w_.scheme = scheme;
  w_.in_features = k;
  w_.group_size = group_size == 0 ? k : group_size;
  groups_ = k / w_.group_size;
  data_cols_ = int4 ? k / 2 : k;
  const int64_t data_dims[2] = {n, data_cols_};  // the codes, which decode streams: huge pages (core/buffer.h)
  w_.data = owned_.emplace_back(data_dtype, std::span<const int64_t>(data_dims), Buffer::Init::kZeroHugePages).view();  // [N, K/2] | [N, K]
  data_ = w_.data.ptr<uint8_t>();
  w_.scales = owned_.emplace_back(DType::kF32, std::initializer_list<int64_t>{n, groups_}).view();  // [N, groups]
  scales_ = w_.scales.ptr<float>();
  if (has_zeros) {
    w_.zeros = owned_.emplace_back(zeros_dtype, std::initializer_list<int64_t>{n, groups_}).view();  // [N, groups]
    zeros_ = w_.zeros.data;
  }
}

void QuantWeightBuilder::set_zero(int64_t row, int64_t group, int32_t z) {
  const int64_t i = row * groups_ + group;
  if (w_.zeros.dtype == DType::kU8)
    static_cast<uint8_t*>(zeros_)[i] = static_cast<uint8_t>(z);
  else
    static_cast<int32_t*>(zeros_)[i] = z;
}

void QuantWeightBuilder::use_offsets() {
  PAGODA_CHECK(w_.zeros.empty(), "a quantized weight has zeros or offsets, not both");
  const int64_t n = w_.data.dim(0);
  w_.offsets = owned_.emplace_back(DType::kF32, std::initializer_list<int64_t>{n, groups_}).view();  // [N, groups]
  offsets_ = w_.offsets.ptr<float>();
}

void QuantWeightBuilder::set_g_idx(const SafetensorsTensor& g_idx, const std::string& name) {
  const int64_t k = w_.in_features;
  bool natural = true;
  for (int64_t i = 0; i < k; ++i) {
    const auto g = static_cast<int32_t>(word(g_idx, i));
    if (g < 0 || g >= groups_)
      throw LoadError(g_idx.file, fmt::format("tensor {}: g_idx[{}] = {} is outside the {} groups", name, i, g, groups_));
    natural = natural && g == i / w_.group_size;
  }
  if (natural) return;  // the common case (desc_act false): no index to carry
  // Act-order groups are arbitrary subsets of K; reordering K would need the activations permuted too, so
  // the per-k group index is kept (as vLLM and exllama's reference path do).
  w_.g_idx = owned_.emplace_back(DType::kI32, std::initializer_list<int64_t>{k}).view();  // [K]
  for (int64_t i = 0; i < k; ++i) w_.g_idx.ptr<int32_t>()[i] = static_cast<int32_t>(word(g_idx, i));
}

std::optional<std::string> non_finite_value(const Weight& w) {
  for (const auto& [what, t] : {std::pair{"scale", &w.scales}, std::pair{"offset", &w.offsets}}) {
    if (t->empty() || t->dtype != DType::kF32) continue;
    const float* v = t->ptr<float>();
    const int64_t cols = t->ndim > 0 ? t->shape[t->ndim - 1] : 1;
    for (int64_t i = 0; i < t->numel(); ++i)
      if (!std::isfinite(v[i]))
        return fmt::format("{} [{}, {}] is {}", what, i / cols, i % cols, v[i]);
  }
  if (w.data.dtype == DType::kF8E4M3) {  // e4m3fn has no infinity; its NaN is S.1111.111
    const auto* codes = w.data.ptr<uint8_t>();
    const int64_t cols = w.data.ndim > 0 ? w.data.shape[w.data.ndim - 1] : 1;
    for (int64_t i = 0; i < w.data.numel(); ++i)
      if ((codes[i] & 0x7f) == 0x7f) return fmt::format("the FP8 code at [{}, {}] is NaN", i / cols, i % cols);
  }
  return std::nullopt;
}

Weight QuantWeightBuilder::finish() {
  // Symmetric int8 keeps no zeros: every zero point is 0 in the signed form.
  if (w_.scheme == QuantScheme::kInt8Channel && !w_.zeros.empty()) {
    const auto* z = w_.zeros.ptr<int32_t>();
    if (std::all_of(z, z + w_.zeros.numel(), [](int32_t v) { return v == 0; })) w_.zeros = Tensor();
  }
  return w_;
}

}  // namespace pagoda::quant
