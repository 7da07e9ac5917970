// The compact forms of compact_weights.h: each candidate form is built from the loaded fp32 values and kept only
// when it gives every value back bit for bit, computed as the kernels compute it (F16C's conversion; a product
// in fp32).
#include "pagoda/backend/cpu/compact_weights.h"

#include <immintrin.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>

#include "pagoda/backend/cpu/linear_w4_int8.h"
#include "pagoda/backend/cpu/linear_w8_int8.h"

namespace pagoda::cpu {
namespace {

constexpr int64_t kBase = GroupValues::kBaseColumns;

bool same_bits(float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); }

// Groups of this size share a base: a power of two from 16 (Q6_K's) that divides the base's 256 columns.
bool scaled_groups(int64_t group_size, int64_t k) {
  return group_size >= 16 && kBase % group_size == 0 && k % kBase == 0;
}

bool values_readable(const Tensor& values, const Tensor& base, const Weight& w) {  // one array
  if (values.empty()) return base.empty();
  switch (values.dtype) {
    case DType::kF32:
    case DType::kF16: return base.empty();
    case DType::kI8:
      return scaled_groups(w.group_size, w.in_features) && base.dtype == DType::kF32 && base.ndim == 2 &&
             base.dim(0) == values.dim(0) && base.dim(1) == w.in_features / kBase;
    default: return false;
  }
}

GroupValues values_of(const Tensor& values, const Tensor& base, int64_t group_size) {
  if (values.empty()) return GroupValues{};
  switch (values.dtype) {
    case DType::kF16: return GroupValues{GroupValues::Form::kF16, values.data};
    case DType::kI8:
      return GroupValues{GroupValues::Form::kScaledI8, values.data, base.ptr<const float>(), base.dim(1),
                         std::countr_zero(static_cast<uint64_t>(kBase / group_size))};
    default: return GroupValues::f32(values.ptr<const float>());
  }
}

// One base's values as base * c (c in int8), or nothing: the first base that does is the value of largest
// magnitude over c = +-128 .. +-1 (the k-quants' own d, or d / 2, is among them).
bool factor_base(const float* v, int64_t count, float& base, int8_t* codes) {
  float vm = 0.0f;
  for (int64_t i = 0; i < count; ++i)
    if (!(std::fabs(v[i]) <= std::fabs(vm))) vm = v[i];  // a NaN is taken, and then fails below
  if (!std::isfinite(vm)) return false;
  if (vm == 0.0f) {  // all zero: base 0, codes 0 (each must be +0, what 0 * 0 gives)
    for (int64_t i = 0; i < count; ++i)
      if (!same_bits(v[i], 0.0f)) return false;
    base = 0.0f;
    std::memset(codes, 0, static_cast<size_t>(count));
    return true;
  }
  for (int magnitude = 128; magnitude >= 1; --magnitude) {
    for (int sign : {1, -1}) {
      const float b = vm / static_cast<float>(sign * magnitude);
      bool ok = b != 0.0f && std::isfinite(b);
      for (int64_t i = 0; ok && i < count; ++i) {
        const float q = std::nearbyint(v[i] / b);
        ok = q >= -128.0f && q <= 127.0f && same_bits(b * q, v[i]);
        if (ok) codes[i] = static_cast<int8_t>(q);
      }
      if (ok) {
        base = b;
        return true;
      }
    }
  }
  return false;
}

struct Compacted {
  HostTensor values, base;  // base empty for fp16
};

std::optional<Compacted> scaled_i8(const Tensor& v, int64_t group_size, int64_t k) {
  if (!scaled_groups(group_size, k)) return std::nullopt;
  const int64_t n = v.dim(0), groups = v.dim(1), per_base = kBase / group_size, bases = k / kBase;
  if (groups != bases * per_base) return std::nullopt;
  const int64_t values_dims[2] = {n, groups}, base_dims[2] = {n, bases};
  Compacted c{HostTensor(DType::kI8, values_dims, Buffer::Init::kUninitialized),
              HostTensor(DType::kF32, base_dims, Buffer::Init::kUninitialized)};
  const float* src = v.ptr<const float>();
  for (int64_t r = 0; r < n; ++r)
    for (int64_t b = 0; b < bases; ++b)
      if (!factor_base(src + r * groups + b * per_base, per_base, c.base.ptr<float>()[r * bases + b],
                       c.values.ptr<int8_t>() + r * groups + b * per_base))
        return std::nullopt;  // all or nothing: an array has one form
  return c;
}

std::optional<Compacted> f16(const Tensor& v) {
  const int64_t count = v.numel();
  Compacted c{HostTensor(DType::kF16, std::span<const int64_t>(v.shape.data(), v.ndim), Buffer::Init::kUninitialized), {}};
  const float* src = v.ptr<const float>();
  auto* dst = c.values.ptr<uint16_t>();
  for (int64_t i = 0; i < count; ++i) {
    dst[i] = _cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT);
    if (!same_bits(_cvtsh_ss(dst[i]), src[i])) return std::nullopt;
  }
  return c;
}

// The weight's scales and offsets (when it has them) in one form that holds every value exactly: fp16 where it
// does (the values' own format in the files that have it; kScaledI8 would save a sixteenth of a byte a group
// more, for a multiply per chunk), else int8 codes times a base; false: keep them as they are.
bool compact_values(Weight& w, std::vector<HostTensor>& storage) {
  for (const Tensor* t : {&w.scales, &w.offsets})
    if (!t->empty() && (t->dtype != DType::kF32 || t->ndim != 2)) return false;
  std::optional<Compacted> scales, offsets;
  const auto all = [&](auto&& form) {
    scales = form(w.scales);
    if (scales && !w.offsets.empty()) offsets = form(w.offsets);
    return scales && (w.offsets.empty() || offsets);
  };
  if (!all(f16) && !all([&](const Tensor& v) { return scaled_i8(v, w.group_size, w.in_features); })) return false;
  const auto keep = [&](Compacted& c, Tensor& values, Tensor& base) {
    values = c.values.view();
    storage.push_back(std::move(c.values));
    if (!c.base.view().empty()) {
      base = c.base.view();
      storage.push_back(std::move(c.base));
    }
  };
  keep(*scales, w.scales, w.scales_base);
  if (offsets) keep(*offsets, w.offsets, w.offsets_base);
  return true;
}

// An 8-bit weight's codes in the 6-bit form of linear_w8_int8.h, when every code is in [-32, 31] and K a multiple
// of 64 (GGUF's Q6_K, Q5_K, Q5_0 and Q5_1); nothing otherwise (Q8_0's codes, or a row tail the kernels pad).
std::optional<HostTensor> six_bit_codes(const Weight& w) {
  const int64_t n = w.num_rows(), k = w.in_features, chunks = k / kW8Chunk;
  if (w.data.dtype != DType::kI8 || w.data.ndim != 2 || k % kW8Chunk != 0) return std::nullopt;
  const int8_t* codes = w.data.ptr<const int8_t>();
  for (int64_t i = 0; i < n * k; ++i)
    if (codes[i] < -32 || codes[i] > 31) return std::nullopt;
  const int64_t dims[2] = {n, chunks * kW6ChunkBytes};
  HostTensor packed(DType::kU8, dims, Buffer::Init::kZeroHugePages);  // streamed every token: huge pages
  uint8_t* out = packed.ptr<uint8_t>();
  for (int64_t chunk = 0; chunk < n * chunks; ++chunk, codes += kW8Chunk, out += kW6ChunkBytes) {
    const auto u = [&](int64_t j) { return static_cast<uint8_t>(codes[j] + 32); };
    for (int64_t j = 0; j < 32; ++j) out[j] = static_cast<uint8_t>((u(j) & 15) | (u(j + 32) & 15) << 4);
    for (int64_t j = 0; j < 16; ++j)
      out[32 + j] = static_cast<uint8_t>(u(j) >> 4 | (u(j + 16) >> 4) << 2 | (u(j + 32) >> 4) << 4 | (u(j + 48) >> 4) << 6);
  }
  return packed;
}

bool all_zero_points_symmetric(const Tensor& zeros) {
  const auto* z = zeros.ptr<const uint8_t>();
  for (int64_t i = 0; i < zeros.numel(); ++i)
    if (z[i] != kW4SymmetricZero) return false;
  return true;
}

}  // namespace

bool group_values_readable(const Weight& w) {
  return values_readable(w.scales, w.scales_base, w) && values_readable(w.offsets, w.offsets_base, w) &&
         (w.offsets.empty() || w.offsets.dtype == w.scales.dtype);  // one form for both
}

GroupValues scale_values(const Weight& w) { return values_of(w.scales, w.scales_base, w.group_size); }
GroupValues offset_values(const Weight& w) { return values_of(w.offsets, w.offsets_base, w.group_size); }

Weight compact_weight(const Weight& w, std::vector<HostTensor>& storage) {
  if (!is_int8_activations(w.activations) || !(linear_w4_int8_supported(w) || linear_w8_int8_supported(w)))
    return w;
  Weight out = w;
  compact_values(out, storage);
  if (w.scheme == QuantScheme::kInt4Group && !w.zeros.empty() && all_zero_points_symmetric(w.zeros)) out.zeros = Tensor{};
  if (w.scheme == QuantScheme::kInt8Channel)
    if (std::optional<HostTensor> packed = six_bit_codes(w)) {
      out.data = packed->view();
      storage.push_back(std::move(*packed));
    }
  return out;
}

ModelWeights compact_linears(const ModelWeights& weights, std::vector<HostTensor>& storage) {
  ModelWeights out = weights;
  for (LayerWeights& l : out.layers)
    for (Weight* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down, &l.wqkv, &l.w_gate_up})
      *w = compact_weight(*w, storage);
  if (out.lm_head.data.data != out.embed_tokens.data.data) out.lm_head = compact_weight(out.lm_head, storage);
  return out;
}

}  // namespace pagoda::cpu
