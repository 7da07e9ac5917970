#include "pagoda/backend/cpu/act_order.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <span>

namespace pagoda::cpu {

std::optional<Weight> sort_columns_by_group(const Weight& w, std::vector<HostTensor>& storage) {
  if (w.g_idx.empty() || w.group_size <= 0 || w.tiled ||
      (w.scheme != QuantScheme::kInt4Group && w.scheme != QuantScheme::kInt8Channel))
    return std::nullopt;
  const int64_t k = w.in_features, n = w.num_rows(), gs = w.group_size;
  const int32_t* g_idx = w.g_idx.ptr<const int32_t>();
  std::vector<int32_t> order(static_cast<size_t>(k));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return g_idx[a] < g_idx[b]; });
  for (int64_t j = 0; j < k; ++j)  // sorted column j must be in group j / group_size
    if (g_idx[order[j]] != j / gs) return std::nullopt;

  HostTensor& codes = storage.emplace_back(w.data.dtype, std::span<const int64_t>(w.data.shape.data(), w.data.ndim),
                                           Buffer::Init::kHugePages);
  const int64_t row_bytes = w.data.row_bytes();
  const auto* src = static_cast<const uint8_t*>(w.data.data);
  auto* dst = codes.ptr<uint8_t>();
  if (w.scheme == QuantScheme::kInt4Group) {  // two codes a byte, k even in the low nibble
    for (int64_t r = 0; r < n; ++r) {
      const uint8_t* in = src + r * row_bytes;
      uint8_t* out = dst + r * row_bytes;
      std::fill_n(out, row_bytes, uint8_t{0});
      for (int64_t j = 0; j < k; ++j) {
        const int64_t c = order[j];
        const uint8_t q = (in[c / 2] >> (4 * (c % 2))) & 0xf;
        out[j / 2] |= static_cast<uint8_t>(q << (4 * (j % 2)));
      }
    }
  } else {  // a byte a code
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < k; ++j) dst[r * row_bytes + j] = src[r * row_bytes + order[j]];
  }
  Weight sorted = w;
  sorted.data = codes.view();  // before the next emplace_back, which may move `storage` (and `codes` with it)
  HostTensor& input_order = storage.emplace_back(DType::kI32, std::initializer_list<int64_t>{k});
  std::copy(order.begin(), order.end(), input_order.ptr<int32_t>());

  sorted.g_idx = Tensor{};
  sorted.input_order = input_order.view();
  return sorted;
}

}  // namespace pagoda::cpu
