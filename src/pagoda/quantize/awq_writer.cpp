// Packing into AutoAWQ's GEMM layout: K-major words of eight output columns in AutoAWQ's interleaved order.
#include "pagoda/quantize/awq_writer.h"

namespace pagoda::quantizer {
namespace {

constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};

// [rows, N] values in [0, 15] (value(r, n)) -> I32 [rows, N/8] words.
template <typename ValueAt>
std::vector<uint32_t> pack_columns(int64_t rows, int64_t n, ValueAt value) {
  std::vector<uint32_t> words(static_cast<size_t>(rows * (n / 8)), 0u);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < n / 8; ++c) {
      uint32_t w = 0;
      for (int i = 0; i < 8; ++i) w |= static_cast<uint32_t>(value(r, 8 * c + kAwqOrder[i])) << (4 * i);
      words[r * (n / 8) + c] = w;
    }
  return words;
}

}  // namespace

std::vector<SafetensorsEntry> awq_gemm_tensors(const std::string& module, const AsymGroupCodes& q) {
  const int64_t n = q.n, k = q.k, groups = q.k / q.group_size;
  const std::vector<uint32_t> qweight = pack_columns(k, n, [&](int64_t row, int64_t col) { return q.codes[col * k + row]; });
  const std::vector<uint32_t> qzeros = pack_columns(groups, n, [&](int64_t g, int64_t col) { return q.zeros[col * groups + g]; });
  std::vector<uint16_t> scales(static_cast<size_t>(groups * n));  // [K/G, N]
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t col = 0; col < n; ++col) scales[g * n + col] = f32_to_f16(q.scales[col * groups + g]);
  std::vector<SafetensorsEntry> out;
  out.push_back(make_entry(module + ".qweight", DType::kI32, {k, n / 8}, qweight));
  out.push_back(make_entry(module + ".qzeros", DType::kI32, {groups, n / 8}, qzeros));
  out.push_back(make_entry(module + ".scales", DType::kF16, {groups, n}, scales));
  return out;
}

nlohmann::ordered_json awq_quantization_config(int64_t group_size) {
  return {{"quant_method", "awq"}, {"zero_point", true},  {"group_size", group_size},
          {"bits", 4},             {"version", "gemm"},   {"modules_to_not_convert", nullptr}};
}

}  // namespace pagoda::quantizer
