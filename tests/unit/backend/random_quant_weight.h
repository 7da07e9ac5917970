// Random quantized weights in every form of the internal representation (core/quant_scheme.h), for tests
// of the layouts and kernels that consume it (the CPU packing test and the GPU kernel tests).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "pagoda/core/buffer.h"
#include "pagoda/loader/model_weights.h"

namespace pagoda::test {

enum class QuantForm {
  kInt4Zeros,      // AWQ / GPTQ: U8 zero points
  kInt4Offsets,    // GGUF Q4_1 / Q4_K: value = q * s - m
  kInt8Symmetric,  // compressed-tensors W8A16, GGUF Q5_0 / Q6_K / Q8_0
  kInt8Zeros,      // GPTQ 8-bit: I32 zero points
  kInt8Offsets,    // GGUF Q5_1 / Q5_K: codes 0..31
  kFp8,            // per row (group = K) or per block of columns
};

inline const char* quant_form_name(QuantForm f) {
  switch (f) {
    case QuantForm::kInt4Zeros: return "int4-zeros";
    case QuantForm::kInt4Offsets: return "int4-offsets";
    case QuantForm::kInt8Symmetric: return "int8-symmetric";
    case QuantForm::kInt8Zeros: return "int8-zeros";
    case QuantForm::kInt8Offsets: return "int8-offsets";
    case QuantForm::kFp8: return "fp8";
  }
  return "?";
}

// A weight [n, k] with its storage. Scales are near `scale` so that values are O(scale * 8).
class RandomQuantWeight {
 public:
  RandomQuantWeight(QuantForm form, int64_t n, int64_t k, int64_t group, uint64_t seed, float scale = 0.01f)
      : state_(seed * 0x9e3779b97f4a7c15ull + 7) {
    const int64_t groups = (k + group - 1) / group;
    const bool int4 = form == QuantForm::kInt4Zeros || form == QuantForm::kInt4Offsets;
    const bool fp8 = form == QuantForm::kFp8;
    weight.scheme = int4 ? QuantScheme::kInt4Group : fp8 ? QuantScheme::kFp8Channel : QuantScheme::kInt8Channel;
    weight.in_features = k;
    weight.group_size = group;
    if (int4) {
      storage_.emplace_back(DType::kU8, std::initializer_list<int64_t>{n, k / 2});
      for (int64_t i = 0; i < n * k / 2; ++i) storage_.back().ptr<uint8_t>()[i] = static_cast<uint8_t>(next());
    } else {
      storage_.emplace_back(fp8 ? DType::kF8E4M3 : DType::kI8, std::initializer_list<int64_t>{n, k});
      auto* c = storage_.back().ptr<uint8_t>();
      for (int64_t i = 0; i < n * k; ++i) {
        uint8_t v = static_cast<uint8_t>(next());
        if (fp8 && (v & 0x7f) == 0x7f) v = 0x7e;          // no NaN codes
        if (form == QuantForm::kInt8Offsets) v &= 0x1f;  // 5-bit codes 0..31
        c[i] = v;
      }
    }
    weight.data = storage_.back().view();
    storage_.emplace_back(DType::kF32, std::initializer_list<int64_t>{n, groups});
    for (int64_t i = 0; i < n * groups; ++i) storage_.back().ptr<float>()[i] = scale * (0.25f + uniform());
    weight.scales = storage_.back().view();
    if (form == QuantForm::kInt4Zeros) {
      storage_.emplace_back(DType::kU8, std::initializer_list<int64_t>{n, groups});
      for (int64_t i = 0; i < n * groups; ++i) storage_.back().ptr<uint8_t>()[i] = static_cast<uint8_t>(next() % 17);
      weight.zeros = storage_.back().view();
    } else if (form == QuantForm::kInt8Zeros) {
      storage_.emplace_back(DType::kI32, std::initializer_list<int64_t>{n, groups});
      for (int64_t i = 0; i < n * groups; ++i)
        storage_.back().ptr<int32_t>()[i] = static_cast<int32_t>(next() % 256) - 127;
      weight.zeros = storage_.back().view();
    } else if (form == QuantForm::kInt4Offsets || form == QuantForm::kInt8Offsets) {
      storage_.emplace_back(DType::kF32, std::initializer_list<int64_t>{n, groups});
      const float codes_mid = form == QuantForm::kInt4Offsets ? 8.0f : 16.0f;
      for (int64_t i = 0; i < n * groups; ++i)
        storage_.back().ptr<float>()[i] = scale * codes_mid * (0.5f + uniform());
      weight.offsets = storage_.back().view();
    }
  }
  RandomQuantWeight(const RandomQuantWeight&) = delete;
  RandomQuantWeight& operator=(const RandomQuantWeight&) = delete;

  Weight weight;

 private:
  uint64_t next() {
    state_ ^= state_ << 13;
    state_ ^= state_ >> 7;
    state_ ^= state_ << 17;
    return state_ >> 11;
  }
  float uniform() { return static_cast<float>(next() % (1 << 20)) / static_cast<float>(1 << 20); }

  uint64_t state_;
  std::vector<HostTensor> storage_;
};

}  // namespace pagoda::test
