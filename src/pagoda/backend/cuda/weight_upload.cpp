// CudaOps::prepare_weights: every weight to the device as bf16, tensor by tensor straight from the
// checkpoint's mapping (no host copy of the whole model), with QKV and gate-up fused into one matrix each
// so that a layer runs two GEMMs fewer. The row orders let one GEMM warp hold both halves of what the
// epilogue combines: Q, K and V are stacked, with the rows of each Q and K head in RoPE pairs (element i,
// element i + head_dim / 2, ...: kernels::skinny_gemm_qkv_rope); gate and up are interleaved (gate_j, up_j,
// gate_j+1, ...: kernels::skinny_gemm_silu).
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "pagoda/backend/cpu/cpu_kernels.h"
#include "pagoda/backend/cuda/cuda_ops_impl.h"
#include "pagoda/core/logging.h"
#include "pagoda/loader/progress_bar.h"

namespace pagoda {
namespace {

constexpr size_t kStagingBytes = size_t{64} << 20;

// Uploads the host weight `src` [rows, cols] (any weight dtype) into `dst` as bf16, row r at dst + r *
// `row_stride` elements (cols: contiguous). BF16 goes straight from the mapping; other dtypes are
// converted on the host, a slab of rows at a time, through `staging`.
void upload_bf16(uint16_t* dst, const Tensor& src, int64_t row_stride, cuda::PinnedBuffer& staging,
                 cudaStream_t stream) {
  const int64_t rows = src.ndim == 1 ? 1 : src.dim(0);
  const int64_t cols = src.numel() / rows;
  const size_t row_bytes = static_cast<size_t>(cols) * sizeof(uint16_t);
  const size_t pitch = static_cast<size_t>(row_stride) * sizeof(uint16_t);
  if (src.dtype == DType::kBF16) {
    PAGODA_CUDA_CHECK(cudaMemcpy2D(dst, pitch, src.data, row_bytes, row_bytes, static_cast<size_t>(rows),
                                   cudaMemcpyHostToDevice));
    return;
  }
  const int64_t slab = std::max<int64_t>(1, static_cast<int64_t>(kStagingBytes / 2 / sizeof(uint16_t)) / cols);
  auto* out = static_cast<uint16_t*>(staging.data());
  const int64_t src_row_bytes = dtype_storage_bytes(src.dtype, cols);
  for (int64_t r0 = 0; r0 < rows; r0 += slab) {
    const int64_t n = std::min(slab, rows - r0);
    uint16_t* half = out + ((r0 / slab) % 2) * (kStagingBytes / 2 / sizeof(uint16_t));  // double-buffered
    PAGODA_CUDA_CHECK(cudaStreamSynchronize(stream));  // the slab's previous copy is done
#pragma omp parallel
    {
      std::vector<float> row(static_cast<size_t>(cols));
#pragma omp for
      for (int64_t r = 0; r < n; ++r) {
        cpu::dequantize_row(static_cast<const char*>(src.data) + (r0 + r) * src_row_bytes, src.dtype, cols, row.data());
        for (int64_t c = 0; c < cols; ++c) half[r * cols + c] = f32_to_bf16(row[c]);
      }
    }
    PAGODA_CUDA_CHECK(cudaMemcpy2DAsync(dst + r0 * row_stride, pitch, half, row_bytes, row_bytes,
                                        static_cast<size_t>(n), cudaMemcpyHostToDevice, stream));
  }
  PAGODA_CUDA_CHECK(cudaStreamSynchronize(stream));
}

int64_t rows_of(const Weight& w) { return w.data.ndim == 1 ? 1 : w.data.dim(0); }
int64_t elems_of(const Weight& w) { return w.data.numel(); }

}  // namespace

ModelWeights CudaOps::prepare_weights(const ModelWeights& host, const ModelConfig& config, bool show_progress) {
  Impl& m = *impl_;
  int64_t total = 0;
  for (const Weight* w : host.all())
    if (w != &host.lm_head || host.lm_head.data.data != host.embed_tokens.data.data) total += 2 * elems_of(*w);
  ProgressBar bar("Uploading weights to the GPU", total, show_progress);
  cuda::PinnedBuffer staging(kStagingBytes);

  // One device allocation holding `parts` stacked by rows; returns the stacked weight and sets each
  // part's view (its rows inside the stack). `interleaved`: row i of part p lands at row i * P + p
  // instead (equal row counts). `rope_pairs`: the first `rope_pairs` parts have their rows in RoPE pairs
  // per head of config.head_dim. Parts whose rows were reordered get no views of their own.
  auto upload_stacked = [&](std::initializer_list<std::pair<const Weight*, Weight*>> parts, bool interleaved = false,
                            int rope_pairs = 0) {
    int64_t rows = 0, cols = -1;
    for (auto [src, dst] : parts) {
      rows += rows_of(*src);
      const int64_t c = elems_of(*src) / rows_of(*src);
      PAGODA_CHECK(cols < 0 || cols == c, "fused weights disagree on in_features");
      cols = c;
    }
    m.weight_storage.emplace_back(static_cast<size_t>(rows * cols) * sizeof(uint16_t));
    auto* base = static_cast<uint16_t*>(m.weight_storage.back().data());
    int64_t row = 0;
    const int64_t num_parts = static_cast<int64_t>(parts.size());
    int part = 0;
    for (auto [src, dst] : parts) {
      if (part++ < rope_pairs) {  // per head: rows [0, half) to even rows, [half, hd) to odd rows
        const int64_t hd = config.head_dim, half = hd / 2, part_rows = rows_of(*src);
        PAGODA_CHECK(hd % 2 == 0 && part_rows % hd == 0, "RoPE rows {} do not hold heads of {}", part_rows, hd);
        for (int64_t h = 0; h < part_rows; h += hd) {
          upload_bf16(base + (row + h) * cols, src->data.rows(h, half), 2 * cols, staging, m.stream);
          upload_bf16(base + (row + h + 1) * cols, src->data.rows(h + half, half), 2 * cols, staging, m.stream);
        }
        *dst = Weight{};
        row += part_rows;
        bar.advance(2 * elems_of(*src));
        continue;
      }
      if (interleaved) {
        PAGODA_CHECK(rows_of(*src) * num_parts == rows, "interleaved weights differ in out_features");
        upload_bf16(base + row * cols, src->data, num_parts * cols, staging, m.stream);
        *dst = Weight{};
        ++row;
        bar.advance(2 * elems_of(*src));
        continue;
      }
      upload_bf16(base + row * cols, src->data, cols, staging, m.stream);
      Tensor view = src->data;
      view.dtype = DType::kBF16;
      view.device = Device::kCuda;
      view.data = base + row * cols;
      dst->data = view;
      row += rows_of(*src);
      bar.advance(2 * elems_of(*src));
    }
    const int64_t dims[] = {rows, cols};
    const int64_t vec[] = {cols};
    return Weight{rows == 1 && parts.begin()->first->data.ndim == 1
                      ? Tensor::from_span(base, DType::kBF16, vec, Device::kCuda)
                      : Tensor::from_span(base, DType::kBF16, dims, Device::kCuda)};
  };

  ModelWeights dev;
  upload_stacked({{&host.embed_tokens, &dev.embed_tokens}});
  dev.layers.resize(host.layers.size());
  for (size_t l = 0; l < host.layers.size(); ++l) {
    const LayerWeights& h = host.layers[l];
    LayerWeights& d = dev.layers[l];
    upload_stacked({{&h.attn_norm, &d.attn_norm}});
    d.wqkv = upload_stacked({{&h.wq, &d.wq}, {&h.wk, &d.wk}, {&h.wv, &d.wv}}, /*interleaved=*/false, /*rope_pairs=*/2);
    upload_stacked({{&h.wo, &d.wo}});
    upload_stacked({{&h.ffn_norm, &d.ffn_norm}});
    d.w_gate_up = upload_stacked({{&h.w_gate, &d.w_gate}, {&h.w_up, &d.w_up}}, /*interleaved=*/true);
    upload_stacked({{&h.w_down, &d.w_down}});
  }
  upload_stacked({{&host.final_norm, &dev.final_norm}});
  if (host.lm_head.data.data == host.embed_tokens.data.data)
    dev.lm_head = dev.embed_tokens;  // tied
  else
    upload_stacked({{&host.lm_head, &dev.lm_head}});
  bar.finish();
  spdlog::info("weights on the GPU: {:.2f} GiB (bf16; QKV and gate-up fused)", static_cast<double>(total) / (1 << 30));
  return dev;
}

}  // namespace pagoda
