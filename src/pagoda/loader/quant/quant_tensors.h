// Shared pieces of the converters: fetching a checkpoint tensor with its expected dtype and shape, reading
// packed words and scales whatever their alignment, and building the internal tensors of a Weight.
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pagoda/loader/quant/quant_linear.h"

namespace pagoda::quant {

// The tensor `module.suffix`: a LoadError naming it when it is missing, or its dtype is not one of `dtypes`,
// or its shape is not `shape`.
const SafetensorsTensor& require(const QuantLinearSource& src, const std::string& suffix,
                                 std::initializer_list<DType> dtypes, std::initializer_list<int64_t> shape);
const SafetensorsTensor* find(const QuantLinearSource& src, const std::string& suffix);
std::string tensor_name(const QuantLinearSource& src, const std::string& suffix);
[[noreturn]] void fail(const QuantLinearSource& src, const std::string& suffix, const std::string& problem);

// Element i of an I32 tensor as the uint32 bit pattern the tools pack (the mapping may be unaligned).
inline uint32_t word(const SafetensorsTensor& t, int64_t i) {
  uint32_t v;
  std::memcpy(&v, t.data + i * 4, 4);
  return v;
}
// Element i of an F32, F16 or BF16 tensor as fp32 (exact).
float float_at(const SafetensorsTensor& t, int64_t i);

// The number of groups along K: K / group_size, a LoadError when it does not divide (0 = one group).
int64_t num_groups(const QuantLinearSource& src, int64_t group_size, const std::string& field);

// The checkpoint's own name for a converted linear's format ("awq gemm g128", "gptq v1 4-bit asym act-order g64"),
// for Weight::source_format, which `pagoda inspect` shows beside the internal form. Weight holds a view, so the
// text is kept once for the life of the program (a few distinct texts per checkpoint).
std::string_view intern_source_format(std::string_view text);
// A checkpoint's group size as the format names say it: "g128", or "per-channel" (0: one group per row).
std::string group_text(int64_t group_size);

// The first value of a converted weight that no arithmetic can use, described ("scale [3, 7] is nan"): a scale or
// offset that is not finite, or an FP8 code that is NaN. One such value turns the model's outputs into NaN (greedy
// decoding then picks token 0 forever), so loaders refuse it, naming the tensor.
std::optional<std::string> non_finite_value(const Weight& w);

// The internal tensors of one quantized linear under construction ([N, ...] row-major).
class QuantWeightBuilder {
 public:
  // data_cols: bytes per row of data (K/2 for int4, K otherwise).
  QuantWeightBuilder(QuantScheme scheme, DType data_dtype, int64_t n, int64_t k, int64_t group_size, bool has_zeros,
                     DType zeros_dtype, std::vector<HostTensor>& owned);

  uint8_t* data_row(int64_t row) { return data_ + row * data_cols_; }
  void set_int4(int64_t row, int64_t col, uint32_t q) {  // q in [0, 15]; k even -> low nibble
    uint8_t& b = data_[row * data_cols_ + col / 2];
    b = static_cast<uint8_t>((col % 2 == 0) ? ((b & 0xf0u) | q) : ((b & 0x0fu) | (q << 4)));
  }
  void set_int8(int64_t row, int64_t col, int8_t q) { reinterpret_cast<int8_t*>(data_)[row * data_cols_ + col] = q; }
  void set_scale(int64_t row, int64_t group, float s) { scales_[row * groups_ + group] = s; }
  void set_zero(int64_t row, int64_t group, int32_t z);
  // The offsets form (core/quant_scheme.h: value = q * s - offset), for a builder made without zeros.
  void use_offsets();
  void set_offset(int64_t row, int64_t group, float offset) { offsets_[row * groups_ + group] = offset; }
  float* scales_row(int64_t row) { return scales_ + row * groups_; }
  float* offsets_row(int64_t row) { return offsets_ + row * groups_; }
  void set_source_format(std::string_view name) { w_.source_format = name; }
  // g_idx from the checkpoint; kept only when it differs from k / group_size. Out-of-range entries are a
  // LoadError naming `name`.
  void set_g_idx(const SafetensorsTensor& g_idx, const std::string& name);
  int64_t groups() const { return groups_; }

  Weight finish();

 private:
  Weight w_;
  std::vector<HostTensor>& owned_;
  uint8_t* data_ = nullptr;
  int64_t data_cols_ = 0;
  float* scales_ = nullptr;
  void* zeros_ = nullptr;
  float* offsets_ = nullptr;
  int64_t groups_ = 0;
};

}  // namespace pagoda::quant
