// Random codes and scales for the quantized dummy linears. Codes are drawn around the zero point from sums of
// uniform bits (cheap, bell-shaped, like real quantized weights and unlike uniform codes, whose mean would be
// off the zero point); each scale is the one that gives the values a stddev of 0.02, jittered by +-25% per
// group or row, as real scales vary.
#include "pagoda/loader/dummy_quant_weights.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <vector>
#include <nlohmann/json.hpp>

#include "pagoda/core/check.h"
#include "pagoda/core/error.h"
#include "pagoda/loader/dummy_random.h"

namespace pagoda {
namespace {

using dummy::splitmix64;

constexpr float kStddev = 0.02f;
constexpr int64_t kDefaultGroupSize = 128;
// The RMS of the scale jitter 0.75 + 0.5 u (u uniform in [0, 1)): sqrt(1 + 0.25^2 / 3).
constexpr float kJitterRms = 1.0103630f;

// A scale of `base` * [0.75, 1.25) from 16 random bits.
inline float jittered(float base, uint64_t bits) {
  return base * (0.75f + 0.5f * static_cast<float>(bits & 0xffff) / 65536.0f);
}

// Sums of uniform bits, several per 64-bit hash, in SIMD-within-a-register arithmetic (a loop over the
// nibbles or bytes one at a time makes the int4 fill several times slower):
//   nibble_sums: the 16-bit lane i holds the sum of the four nibbles of bits' lane i, 0..60 (stddev 9.2)
//   byte_sums:   the 32-bit lane i holds the sum of the four bytes of bits' lane i, 0..1020 (stddev 147.8)
inline uint64_t nibble_sums(uint64_t bits) {
  const uint64_t pairs = (bits & 0x0f0f0f0f0f0f0f0full) + ((bits >> 4) & 0x0f0f0f0f0f0f0f0full);  // 8 x 0..30
  return (pairs & 0x00ff00ff00ff00ffull) + ((pairs >> 8) & 0x00ff00ff00ff00ffull);
}
inline uint64_t byte_sums(uint64_t bits) {
  const uint64_t pairs = (bits & 0x00ff00ff00ff00ffull) + ((bits >> 8) & 0x00ff00ff00ff00ffull);  // 4 x 0..510
  return (pairs & 0x0000ffff0000ffffull) + ((pairs >> 16) & 0x0000ffff0000ffffull);
}
// d / 4 rounded half away from zero: symmetric, so the codes' mean stays on the zero point.
constexpr int32_t quarter(int32_t d) { return d >= 0 ? (d + 2) >> 2 : -((2 - d) >> 2); }

// The code of each sum, with the stddev of the code distribution that results (exact, over every input):
//   int4  q = clamp(z + quarter(sum - 30), 0, 15); q - z in [-8, 8], stddev 2.4239 for z = 7 or 8 (the
//         clamp makes it 2.4211 for z = 6 or 9)
//   int8  q = clamp(quarter(sum - 510), -127, 127), stddev 37.052
//   fp8   the e4m3 code nearest to 0.875 * (sum - 510) (ties to the smaller magnitude), so that the codes
//         reach 448, e4m3's largest finite value (as absmax / 448 scaling puts a row's largest weight), and
//         never the NaN codes 0x7F / 0xFF; stddev 129.25
constexpr float kInt4CodeStddev = 2.4239186f;
constexpr float kInt8CodeStddev = 37.052302f;
constexpr float kFp8CodeStddev = 129.24676f;
struct CodeTables {
  uint8_t int4[16][61];  // [zero point][sum]
  int8_t int8[1021];
  uint8_t fp8[1021];
};

const CodeTables& code_tables() {
  static const CodeTables tables = [] {
    CodeTables t{};
    for (int32_t z = 0; z < 16; ++z)
      for (int32_t sum = 0; sum <= 60; ++sum)
        t.int4[z][sum] = static_cast<uint8_t>(std::clamp(z + quarter(sum - 30), 0, 15));
    for (int32_t sum = 0; sum <= 1020; ++sum) {
      const int32_t d = sum - 510;
      t.int8[sum] = static_cast<int8_t>(std::clamp(quarter(d), -127, 127));
      const float target = 0.875f * static_cast<float>(std::abs(d));
      uint8_t best = 0;
      for (uint8_t c = 1; c < 0x7F; ++c)  // 0x7F is NaN
        if (std::fabs(f8e4m3_to_f32(c) - target) < std::fabs(f8e4m3_to_f32(best) - target)) best = c;
      t.fp8[sum] = static_cast<uint8_t>(best | (d < 0 ? 0x80 : 0));
    }
    return t;
  }();
  return tables;
}

// data U8 [N, K/2] (k even in the low nibble), scales F32 [N, groups], zeros U8 [N, groups].
void fill_int4_rows(const Weight& w, bool random_zeros, int64_t begin, int64_t end, uint64_t& state) {
  const int64_t groups = w.scales.dim(1), row_bytes = w.in_features / 2, group_bytes = w.group_size / 2;
  constexpr float kScale = kStddev / (kInt4CodeStddev * kJitterRms);
  const CodeTables& tables = code_tables();
  for (int64_t r = begin; r < end; ++r) {
    float* scales = w.scales.ptr<float>() + r * groups;
    uint8_t* zeros = w.zeros.ptr<uint8_t>() + r * groups;
    uint8_t* codes = w.data.ptr<uint8_t>() + r * row_bytes;
    for (int64_t g = 0; g < groups; ++g) {
      const uint64_t bits = splitmix64(state);
      scales[g] = jittered(kScale, bits);
      zeros[g] = static_cast<uint8_t>(random_zeros ? 6 + ((bits >> 16) & 3) : 8);
      const uint8_t* code = tables.int4[zeros[g]];
      // One hash, four codes: two bytes of the group (the second unused at the end of an odd-length group).
      for (int64_t j = g * group_bytes, j_end = j + group_bytes; j < j_end; j += 2) {
        const uint64_t sums = nibble_sums(splitmix64(state));
        codes[j] = static_cast<uint8_t>(code[sums & 0xff] | (code[(sums >> 16) & 0xff] << 4));
        if (j + 1 < j_end) codes[j + 1] = static_cast<uint8_t>(code[(sums >> 32) & 0xff] | (code[sums >> 48] << 4));
      }
    }
  }
}

// Rows of e4m3 or int8 codes, two per hash, from `table` (the code of each byte sum), and a scale per row.
template <typename Code>
void fill_channel_rows(const Weight& w, const Code* table, float scale, int64_t begin, int64_t end,
                       uint64_t& state) {
  const int64_t k = w.in_features;
  for (int64_t r = begin; r < end; ++r) {
    w.scales.ptr<float>()[r] = jittered(scale, splitmix64(state));
    Code* codes = reinterpret_cast<Code*>(w.data.ptr<uint8_t>()) + r * k;
    for (int64_t c = 0; c < k; c += 2) {
      const uint64_t sums = byte_sums(splitmix64(state));
      codes[c] = table[sums & 0xffff];
      if (c + 1 < k) codes[c + 1] = table[sums >> 32];
    }
  }
}

// config.json's quantization_config (null when there is none, or no config).
nlohmann::json config_quantization(const std::string& config_path) {
  if (config_path.empty()) return nullptr;
  std::ifstream in(config_path, std::ios::binary);
  const nlohmann::json root = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!root.is_object()) return nullptr;  // parse_hf_config has already said what is wrong
  const auto q = root.find("quantization_config");
  return q != root.end() && q->is_object() ? *q : nlohmann::json(nullptr);
}

// quantization_config.desc_act is true.
bool config_desc_act(const std::string& config_path) {
  const nlohmann::json q = config_quantization(config_path);
  return q.is_object() && q.value("desc_act", nlohmann::json(false)) == true;
}

// The act-order g_idx of a K-column linear: the columns in a random order (the same for every linear of that K),
// group_size at a time.
void fill_act_order_g_idx(const Weight& w) {
  const int64_t k = w.in_features;
  std::vector<int32_t> perm(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) perm[i] = static_cast<int32_t>(i);
  uint64_t state = 0x5eed0f9c0ull ^ static_cast<uint64_t>(k);
  for (int64_t i = k - 1; i > 0; --i) std::swap(perm[i], perm[splitmix64(state) % static_cast<uint64_t>(i + 1)]);
  for (int64_t i = 0; i < k; ++i) w.g_idx.ptr<int32_t>()[perm[i]] = static_cast<int32_t>(i / w.group_size);
}

// config.json's quantization_config.group_size, or kDefaultGroupSize when it has none; 0 for -1 (per row).
int64_t config_group_size(const std::string& config_path) {
  const nlohmann::json q = config_quantization(config_path);
  if (!q.is_object()) return kDefaultGroupSize;
  const auto g = q.find("group_size");
  if (g == q.end() || g->is_null()) return kDefaultGroupSize;
  const int64_t size = g->is_number_integer() ? g->get<int64_t>() : 0;
  if (size != -1 && (size <= 0 || size % 2 != 0))  // as the converters read it (quant_config.cpp)
    throw LoadError(config_path, fmt::format("quantization_config.group_size must be -1 or a positive even number, "
                                             "got {}", g->dump()));
  return size == -1 ? 0 : size;
}

}  // namespace

DummyQuant dummy_quant_kind(const std::string& quantization, const std::string& source,
                            const std::string& config_path) {
  if (quantization.empty() || quantization == "none") return {};
  if (quantization == "awq") return {QuantScheme::kInt4Group, "dummy awq", config_group_size(config_path), true};
  if (quantization == "gptq") {
    const bool act_order = config_desc_act(config_path);
    return {QuantScheme::kInt4Group, act_order ? "dummy gptq act-order" : "dummy gptq", config_group_size(config_path),
            false, act_order};
  }
  if (quantization == "compressed-tensors")
    return {QuantScheme::kInt4Group, "dummy compressed-tensors", config_group_size(config_path), false};
  if (quantization == "int8") return {QuantScheme::kInt8Channel, "dummy int8", 0, false};
  if (quantization == "fp8") return {QuantScheme::kFp8Channel, "dummy fp8", 0, false};
  if (quantization == "modelopt") return {QuantScheme::kFp8Channel, "dummy modelopt", 0, false};
  throw LoadError(source, fmt::format("unknown --quantization \"{}\" for --load-format dummy (expected awq, gptq, "
                                      "compressed-tensors, int8, fp8, modelopt or none)", quantization));
}

std::vector<DummyTensorSpec> dummy_quant_layout(const DummyQuant& quant, const std::string& source,
                                                const std::string& name, int64_t n, int64_t k, Weight& w) {
  w.scheme = quant.scheme;
  w.in_features = k;
  w.source_format = quant.source_format;
  w.group_size = k;  // per row, unless int4 groups
  switch (quant.scheme) {
    case QuantScheme::kInt4Group: {
      const int64_t g = quant.group_size == 0 ? k : quant.group_size;
      if (k % g != 0 || k % 2 != 0)
        throw LoadError(source, fmt::format("tensor {}: in_features {} is not a multiple of the group size {} "
                                            "(--load-format dummy, {})", name, k, g, quant.source_format));
      w.group_size = g;
      std::vector<DummyTensorSpec> specs = {{&w.data, DType::kU8, {n, k / 2}}, {&w.scales, DType::kF32, {n, k / g}},
                                            {&w.zeros, DType::kU8, {n, k / g}}};
      if (quant.act_order && g < k) specs.push_back({&w.g_idx, DType::kI32, {k}});
      return specs;
    }
    case QuantScheme::kInt8Channel:
      return {{&w.data, DType::kI8, {n, k}}, {&w.scales, DType::kF32, {n, 1}}};
    case QuantScheme::kFp8Channel:  // W8A8 with dynamic per-token activation scales (FP8_DYNAMIC)
      w.activations = ActivationQuant::kFp8PerToken;
      return {{&w.data, DType::kF8E4M3, {n, k}}, {&w.scales, DType::kF32, {n, 1}}};
    case QuantScheme::kNone: break;
  }
  PAGODA_CHECK(false, "dummy_quant_layout: scheme {}", quant_scheme_name(quant.scheme));
  return {};
}

void fill_dummy_quant_rows(const Weight& w, const DummyQuant& quant, int64_t begin, int64_t end, uint64_t state) {
  switch (w.scheme) {
    case QuantScheme::kInt4Group:
      if (!w.g_idx.empty() && begin == 0) fill_act_order_g_idx(w);
      return fill_int4_rows(w, quant.random_zeros, begin, end, state);
    case QuantScheme::kInt8Channel:
      return fill_channel_rows(w, code_tables().int8, kStddev / (kInt8CodeStddev * kJitterRms), begin, end, state);
    case QuantScheme::kFp8Channel:
      return fill_channel_rows(w, code_tables().fp8, kStddev / (kFp8CodeStddev * kJitterRms), begin, end, state);
    case QuantScheme::kNone: break;
  }
  PAGODA_CHECK(false, "fill_dummy_quant_rows: scheme {}", quant_scheme_name(w.scheme));
}

}  // namespace pagoda
