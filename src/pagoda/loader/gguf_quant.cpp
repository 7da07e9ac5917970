// Block rows decoded (gguf_blocks.h) and stored in the internal layouts: int4 codes two per byte (k even in
// the low nibble), 5/6-bit codes one per I8 byte, fp32 scales and zeros or offsets per group. Rows are
// converted on all cores, each thread a contiguous range of rows (the rows' storage is disjoint).
#include "pagoda/loader/gguf_quant.h"

#include <algorithm>
#include <thread>

#include "pagoda/core/check.h"
#include "pagoda/loader/quant/quant_tensors.h"

namespace pagoda {

Weight convert_gguf_blocks(const GgufTensorInfo& t, const std::function<int64_t(int64_t)>& src_row,
                           std::vector<HostTensor>& owned) {
  const std::optional<GgufBlockConversion> conversion = gguf_block_conversion(t.type);
  const GgmlTypeInfo info = *ggml_type_info(static_cast<uint32_t>(t.type));
  PAGODA_CHECK(conversion.has_value(), "{}: {} is not a converted block type", t.name, info.name);
  PAGODA_CHECK(t.shape.size() == 2, "{}: a {} weight must be 2-D", t.name, info.name);
  const GgufBlockConversion c = *conversion;
  const int64_t n = t.shape[0], k = t.shape[1];
  const int64_t row_bytes = k / info.block_elems * info.block_bytes;
  const bool int4 = c.scheme == QuantScheme::kInt4Group;
  const bool zeros = int4 && !c.offsets;  // int8 with a fixed zero point is stored symmetric: no zeros
  quant::QuantWeightBuilder out(c.scheme, int4 ? DType::kU8 : DType::kI8, n, k, c.group_size, zeros, DType::kU8,
                                owned);
  if (c.offsets) out.use_offsets();
  out.set_source_format(info.name);
  // The I8 code of unsigned code u: u - c with c = the type's zero point (0 in the offsets form).
  const int shift = c.offsets ? 0 : c.zero_point;

  for (int64_t r = 0; r < n; ++r)  // checked here: the worker threads must not throw
    PAGODA_CHECK(src_row(r) >= 0 && src_row(r) < n, "{}: row {} of {}", t.name, src_row(r), n);

  auto convert_rows = [&](int64_t begin, int64_t end) {
    std::vector<uint8_t> codes(static_cast<size_t>(k));
    for (int64_t r = begin; r < end; ++r) {
      const int64_t src = src_row(r);
      decode_gguf_row(t.type, t.data + src * row_bytes, k, codes.data(), out.scales_row(r),
                      c.offsets ? out.offsets_row(r) : nullptr);
      uint8_t* dst = out.data_row(r);
      if (int4) {
        for (int64_t j = 0; j < k / 2; ++j) dst[j] = static_cast<uint8_t>(codes[2 * j] | (codes[2 * j + 1] << 4));
        if (zeros)
          for (int64_t g = 0; g < out.groups(); ++g) out.set_zero(r, g, c.zero_point);
      } else {
        auto* q = reinterpret_cast<int8_t*>(dst);
        for (int64_t j = 0; j < k; ++j) q[j] = static_cast<int8_t>(codes[j] - shift);
      }
    }
  };
  // Small tensors on this thread; large ones split into one range of rows per core.
  const int64_t threads = n * k < (int64_t{1} << 20)
                              ? 1
                              : std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, std::min<int64_t>(n, 32));
  if (threads == 1) {
    convert_rows(0, n);
  } else {
    std::vector<std::jthread> pool;
    for (int64_t i = 0; i < threads; ++i) pool.emplace_back(convert_rows, n * i / threads, n * (i + 1) / threads);
  }
  Weight w = out.finish();
  // On the CPU, as llama.cpp: its k-quants (super-blocks of 256) multiply Q8_K blocks, the others Q8_0 or Q8_1.
  w.activations = info.block_elems == 256 ? ActivationQuant::kInt8SuperBlock : ActivationQuant::kInt8Block;
  return w;
}

}  // namespace pagoda
