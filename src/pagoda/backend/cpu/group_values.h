// GroupValues: a quantized weight's per-group fp32 values (its scales, or its offsets) as the integer kernels
// (linear_w4_int8.h, linear_w8_int8.h) read them: as the loader stores them (fp32), or in one of the CPU's
// compact forms (compact_weights.h), which hold the same fp32 values in fewer bytes. A weight's scales and
// offsets have the same form, which the kernels take as a template argument (with_form).
#pragma once

#include <cstdint>
#include <type_traits>

namespace pagoda::cpu {

struct GroupValues {
  enum class Form : uint8_t {
    kF32,       // values: float [N, groups]
    kF16,       // values: fp16 [N, groups], each exactly its fp32 value
    kScaledI8,  // values: int8 codes c [N, groups], base: float [N, K / kBaseColumns]; value = base * float(c),
                // exact in fp32 (GGUF's k-quants: a super-block's d times a sub-block's 6- or 8-bit scale)
  };
  static constexpr int64_t kBaseColumns = 256;  // the columns one base covers (a k-quant super-block)

  Form form = Form::kF32;
  const void* values = nullptr;  // null: the weight has no such values
  const float* base = nullptr;   // kScaledI8
  int64_t bases_per_row = 0;     // kScaledI8: K / kBaseColumns
  int base_shift = 0;            // kScaledI8: group g's base is g >> base_shift (kBaseColumns / group_size groups)

  explicit operator bool() const { return values != nullptr; }
  // kScaledI8: the base of row `row`'s group g.
  float base_of(int64_t row, int64_t g) const { return base[row * bases_per_row + (g >> base_shift)]; }
  static GroupValues f32(const float* v) { return GroupValues{Form::kF32, v}; }
};

// fn(std::integral_constant<GroupValues::Form, form>{}): the kernels instantiated for each form.
template <class Fn>
decltype(auto) with_form(GroupValues::Form form, Fn&& fn) {
  using F = GroupValues::Form;
  switch (form) {
    case F::kF16: return fn(std::integral_constant<F, F::kF16>{});
    case F::kScaledI8: return fn(std::integral_constant<F, F::kScaledI8>{});
    case F::kF32: break;
  }
  return fn(std::integral_constant<F, F::kF32>{});
}

}  // namespace pagoda::cpu
