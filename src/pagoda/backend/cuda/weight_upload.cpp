// CudaOps::prepare_weights: every weight to the device, tensor by tensor straight from the checkpoint's
// mapping (no host copy of the whole model), with QKV and gate-up fused into one matrix each so that a layer
// runs two GEMMs fewer. The row orders let one GEMM warp hold both halves of what the epilogue combines: Q,
// K and V are stacked, with the rows of each Q and K head in RoPE pairs (element i, element i + head_dim / 2,
// ...: kernels::skinny_gemm_qkv_rope); gate and up are interleaved (gate_j, up_j, gate_j+1, ...:
// kernels::skinny_gemm_silu). Quantized linears (QuantScheme, and GGUF Q8_0) stay quantized: their rows, in
// the same orders, are packed into the tensor-core GEMV's tiles (backend/mma_layout/quant_tiles.h) one
// weight at a time, except W8A8 ones (FP8 weights whose inputs are quantized too: Weight::activations), whose
// rows go up as they are, e4m3 with a scale each, for the FP8 GEMV and cuBLASLt (kernels/fp8_linear.h).
// A quantized embedding table goes up in its loader row form (core/quant_scheme.h: codes, scales, zeros or
// offsets), which kernels/quant_embedding.h reads a row per token; a tied lm_head then has its own upload.
// Act-order weights (g_idx) go up with their columns sorted by group and the permutation their input needs
// (backend/cpu/act_order.h: Weight::input_order), where every group holds group_size columns and the parts of a
// fused weight share one g_idx; the down projection's permutation goes into the gate-up rows instead, and QKV's and
// gate-up's into the norms before them (Weight::output_order: the norm writes its output in that order), so that
// only the O projection's input is gathered.
// Everything else, and quantized weights neither layout holds (other act-order weights, fused parts of different
// schemes), goes up as bf16, converted on the host a slab of rows at a time.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "pagoda/backend/cpu/act_order.h"
#include "pagoda/backend/cpu/cpu_kernels.h"
#include "pagoda/backend/cpu/linear_quant.h"
#include "pagoda/backend/cuda/cuda_ops_impl.h"
#include "pagoda/backend/mma_layout/quant_tiles.h"
#include "pagoda/core/env_knob.h"
#include "pagoda/core/logging.h"
#include "pagoda/kernels/fp8_linear.h"
#include "pagoda/loader/progress_bar.h"

namespace pagoda {
namespace {

constexpr size_t kStagingBytes = size_t{64} << 20;

// Uploads the host weight `src` [rows, cols] (any dtype or quantization scheme) into `dst` as bf16, row r
// at dst + r * `row_stride` elements (cols: contiguous). BF16 goes straight from the mapping; everything else
// is converted on the host, a slab of rows at a time, through `staging`.
void upload_bf16(uint16_t* dst, const Weight& src, int64_t row_stride, cuda::PinnedBuffer& staging,
                 cudaStream_t stream) {
  const int64_t rows = src.num_rows(), cols = src.cols();
  const size_t row_bytes = static_cast<size_t>(cols) * sizeof(uint16_t);
  const size_t pitch = static_cast<size_t>(row_stride) * sizeof(uint16_t);
  if (!src.quantized() && src.data.dtype == DType::kBF16) {
    PAGODA_CUDA_CHECK(cudaMemcpy2D(dst, pitch, src.data.data, row_bytes, row_bytes, static_cast<size_t>(rows),
                                   cudaMemcpyHostToDevice));
    return;
  }
  const int64_t slab = std::max<int64_t>(1, static_cast<int64_t>(kStagingBytes / 2 / sizeof(uint16_t)) / cols);
  auto* out = static_cast<uint16_t*>(staging.data());
  const int64_t src_row_bytes = src.quantized() ? 0 : dtype_storage_bytes(src.data.dtype, cols);
  for (int64_t r0 = 0; r0 < rows; r0 += slab) {
    const int64_t n = std::min(slab, rows - r0);
    uint16_t* half = out + ((r0 / slab) % 2) * (kStagingBytes / 2 / sizeof(uint16_t));  // double-buffered
    PAGODA_CUDA_CHECK(cudaStreamSynchronize(stream));  // the slab's previous copy is done
#pragma omp parallel
    {
      std::vector<float> row(static_cast<size_t>(cols));
#pragma omp for
      for (int64_t r = 0; r < n; ++r) {
        if (src.quantized()) {
          cpu::dequantize_rows(src, r0 + r, 1, row.data());
        } else {
          cpu::dequantize_row(static_cast<const char*>(src.data.data) + (r0 + r) * src_row_bytes, src.data.dtype,
                              cols, row.data());
        }
        for (int64_t c = 0; c < cols; ++c) half[r * cols + c] = f32_to_bf16(row[c]);
      }
    }
    PAGODA_CUDA_CHECK(cudaMemcpy2DAsync(dst + r0 * row_stride, pitch, half, row_bytes, row_bytes,
                                        static_cast<size_t>(n), cudaMemcpyHostToDevice, stream));
  }
  PAGODA_CUDA_CHECK(cudaStreamSynchronize(stream));
}

// Elements of the unpacked [rows, cols] weight (what its bf16 copy holds).
int64_t elems_of(const Weight& w) { return w.num_rows() * w.cols(); }

bool is_quantized_linear(const Weight& w) { return w.quantized(); }

// Whether the rows of `parts` go up as tiles. When they are quantized but cannot, says why, once per reason
// (an act-order model would otherwise warn for every linear of every layer).
bool tile_parts(std::span<const Weight* const> parts, std::set<std::string>& warned) {
  for (const Weight* w : parts)
    if (!is_quantized_linear(*w)) return false;
  const std::string why = quant_tiles_unsupported(parts);
  if (why.empty()) return true;
  if (warned.insert(why).second) spdlog::warn("quantized weights go to the GPU as bf16: {}", why);
  return false;
}

// Act-order `parts` with their columns sorted by group (backend/cpu/act_order.h), the new codes in `storage`;
// nullopt unless every part has the first's g_idx (the parts of a fused weight read one input: GPTQ orders their
// columns alike) and can be sorted.
std::optional<std::vector<Weight>> sorted_parts(std::span<const Weight* const> parts, std::vector<HostTensor>& storage) {
  const Tensor& g_idx = parts[0]->g_idx;
  std::vector<Weight> out;
  for (const Weight* w : parts) {
    if (w->g_idx.empty() || w->g_idx.numel() != g_idx.numel() ||
        std::memcmp(w->g_idx.data, g_idx.data, static_cast<size_t>(g_idx.nbytes())) != 0)
      return std::nullopt;
    std::optional<Weight> sorted = cpu::sort_columns_by_group(*w, storage);
    if (!sorted) return std::nullopt;
    out.push_back(*sorted);
  }
  return out;
}

// Whether the rows of `parts` go up as FP8 rows (W8A8): FP8 with one scale per row and the same activation
// scheme in every part, K a multiple of 16.
bool fp8_row_parts(std::span<const Weight* const> parts) {
  const Weight& first = *parts[0];
  for (const Weight* w : parts)
    if (w->scheme != QuantScheme::kFp8Channel || w->activations == ActivationQuant::kNone ||
        w->activations != first.activations || w->scales.ndim != 2 || w->scales.dim(1) != 1 || !w->g_idx.empty() ||
        w->cols() != first.cols())
      return false;
  return first.cols() % 16 == 0 && kernels::fp8_w8a8_supported();
}

// The device Weight of FP8 rows (one source each, in output order): codes [N, K] e4m3 and scales [N, 1], both
// allocated to a whole number of 16-row tiles (zeros), in two device allocations of `storage`. The parts of a
// fused weight share one static activation scale (the loader gave them the largest: model_loader.cpp).
Weight upload_fp8_rows(std::span<const TileRowSource> rows, const Weight& like, std::vector<cuda::DeviceBuffer>& storage) {
  const int64_t n = static_cast<int64_t>(rows.size()), k = rows[0].weight->cols();
  const int64_t padded = (n + kernels::kFp8RowAlignment - 1) / kernels::kFp8RowAlignment * kernels::kFp8RowAlignment;
  std::vector<uint8_t> codes(static_cast<size_t>(padded * k), 0);
  std::vector<float> scales(static_cast<size_t>(padded), 0.0f);
  float input_scale = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const Weight& w = *rows[i].weight;
    std::memcpy(codes.data() + i * k, static_cast<const uint8_t*>(w.data.data) + rows[i].row * k, static_cast<size_t>(k));
    scales[i] = w.scales.ptr<const float>()[rows[i].row];
    input_scale = std::max(input_scale, w.input_scale);
  }
  Weight d;
  storage.emplace_back(codes.size());
  PAGODA_CUDA_CHECK(cudaMemcpy(storage.back().data(), codes.data(), codes.size(), cudaMemcpyHostToDevice));
  const int64_t code_dims[] = {n, k};
  d.data = Tensor::from_span(storage.back().data(), DType::kF8E4M3, code_dims, Device::kCuda);
  storage.emplace_back(scales.size() * sizeof(float));
  PAGODA_CUDA_CHECK(cudaMemcpy(storage.back().data(), scales.data(), scales.size() * sizeof(float), cudaMemcpyHostToDevice));
  const int64_t scale_dims[] = {n, 1};
  d.scales = Tensor::from_span(storage.back().data(), DType::kF32, scale_dims, Device::kCuda);
  d.scheme = QuantScheme::kFp8Channel;
  d.in_features = k;
  d.group_size = k;
  d.activations = like.activations;
  d.input_scale = input_scale;
  d.source_format = like.source_format;
  return d;
}

// A quantized embedding table's rows as stored (quant_embedding.h), when it has that form: F32 scales, no g_idx.
bool embedding_rows_as_stored(const Weight& w) {
  return w.quantized() && w.g_idx.empty() && w.scales.dtype == DType::kF32 &&
         (w.offsets.empty() || w.offsets.dtype == DType::kF32) && w.cols() % 2 == 0;
}

// Each of the tensors of `host` (an embedding_rows_as_stored table) copied into its own allocation of `storage`.
Weight upload_embedding_rows(const Weight& host, std::vector<cuda::DeviceBuffer>& storage) {
  Weight d = host;
  for (Tensor* t : {&d.data, &d.scales, &d.zeros, &d.offsets}) {
    if (t->empty()) continue;
    storage.emplace_back(static_cast<size_t>(t->nbytes()));
    PAGODA_CUDA_CHECK(cudaMemcpy(storage.back().data(), t->data, static_cast<size_t>(t->nbytes()), cudaMemcpyHostToDevice));
    t->data = storage.back().data();
    t->device = Device::kCuda;
  }
  d.scales_base = d.offsets_base = Tensor{};
  d.activations = ActivationQuant::kNone;  // rows are looked up, not multiplied
  return d;
}

// The device Weight of packed tiles: codes and params in two device allocations of `storage`.
Weight upload_tiles(const HostQuantTiles& tiles, const Weight& like, std::vector<cuda::DeviceBuffer>& storage) {
  const QuantTilesShape& s = tiles.shape;
  storage.emplace_back(tiles.codes.size());
  PAGODA_CUDA_CHECK(cudaMemcpy(storage.back().data(), tiles.codes.data(), tiles.codes.size(), cudaMemcpyHostToDevice));
  const int64_t code_dims[] = {static_cast<int64_t>(tiles.codes.size())};
  Weight w;
  w.data = Tensor::from_span(storage.back().data(), DType::kU8, code_dims, Device::kCuda);
  storage.emplace_back(tiles.params.size() * sizeof(float));
  PAGODA_CUDA_CHECK(cudaMemcpy(storage.back().data(), tiles.params.data(), tiles.params.size() * sizeof(float),
                               cudaMemcpyHostToDevice));
  const int64_t param_dims[] = {static_cast<int64_t>(tiles.params.size())};
  w.scales = Tensor::from_span(storage.back().data(), DType::kF32, param_dims, Device::kCuda);
  w.scheme = s.codes == TileCodes::kU4 ? QuantScheme::kInt4Group
             : s.codes == TileCodes::kI8 ? QuantScheme::kInt8Channel
                                         : QuantScheme::kFp8Channel;
  w.group_size = s.group_size;
  w.in_features = s.k;
  w.source_format = like.source_format;
  w.tiled = true;
  w.tiled_offsets = s.offsets;
  w.out_features = s.n;
  return w;
}

}  // namespace

ModelWeights CudaOps::prepare_weights(const ModelWeights& host, const ModelConfig& config, bool show_progress,
                                      const ModelWeights* shared) {
  Impl& m = *impl_;
  PAGODA_CHECK(!shared || shared->layers.size() == host.layers.size(), "a shared weight set of another model");
  // Linears are uploaded whatever `shared` holds; the rest only without it.
  const bool embedding_quantized = embedding_rows_as_stored(host.embed_tokens);
  const bool tied = host.lm_head.data.data == host.embed_tokens.data.data;
  int64_t total = 0;
  for (const Weight* w : host.all())
    if (w != &host.lm_head || !tied || embedding_quantized) total += 2 * elems_of(*w);
  if (shared) {
    for (const Weight* w : {&host.embed_tokens, &host.final_norm}) total -= 2 * elems_of(*w);
    if (!tied || embedding_quantized) total -= 2 * elems_of(host.lm_head);
    for (const LayerWeights& l : host.layers) total -= 2 * (elems_of(l.attn_norm) + elems_of(l.ffn_norm));
  }
  ProgressBar bar("Uploading weights to the GPU", total, show_progress);
  cuda::PinnedBuffer staging(kStagingBytes);

  // One device allocation per weight; returns its bf16 device view.
  auto allocate = [&](int64_t rows, int64_t cols, int ndim) {
    m.weight_storage.emplace_back(static_cast<size_t>(rows * cols) * sizeof(uint16_t));
    auto* base = static_cast<uint16_t*>(m.weight_storage.back().data());
    const int64_t dims[] = {rows, cols};
    const int64_t vec[] = {cols};
    return ndim == 1 ? Tensor::from_span(base, DType::kBF16, vec, Device::kCuda)
                     : Tensor::from_span(base, DType::kBF16, dims, Device::kCuda);
  };
  // Rows of `src` to the rows first, first + step, ... of `dst`.
  auto put_rows = [&](Tensor& dst, int64_t first, int64_t step, const Weight& src) {
    const int64_t cols = dst.numel() / (dst.ndim == 1 ? 1 : dst.dim(0));
    PAGODA_CHECK(src.cols() == cols, "fused weights disagree on in_features");
    upload_bf16(static_cast<uint16_t*>(dst.data) + first * cols, src, step * cols, staging, m.stream);
    bar.advance(2 * elems_of(src));
  };
  std::set<std::string> warned;  // reasons already logged by tile_parts
  // Rows of quantized weights, in the fused order, as tiles.
  int64_t device_bytes = 0, largest_tiled = 0;
  auto upload_tiled = [&](std::span<const TileRowSource> rows, const Weight& like) {
    const HostQuantTiles tiles = pack_quant_tiles(rows);
    for (size_t i = 0; i < rows.size(); ++i) bar.advance(2 * rows[i].weight->cols());
    device_bytes += static_cast<int64_t>(tiles.codes.size() + tiles.params.size() * sizeof(float));
    largest_tiled = std::max(largest_tiled, tiles.shape.n * tiles.shape.k);
    return upload_tiles(tiles, like, m.weight_storage);
  };
  // Rows of quantized `parts` (in the fused order) as FP8 rows or tiles; nullopt when they go up as bf16.
  auto upload_quantized = [&](std::span<const Weight* const> parts,
                              std::span<const TileRowSource> rows) -> std::optional<Weight> {
    std::vector<HostTensor> sorted_storage;  // act-order parts' sorted codes, for this upload only
    std::optional<std::vector<Weight>> sorted;
    std::vector<const Weight*> sorted_ptrs;
    std::vector<TileRowSource> sorted_rows;
    if (!parts[0]->g_idx.empty() && (sorted = sorted_parts(parts, sorted_storage))) {
      for (const Weight& w : *sorted) sorted_ptrs.push_back(&w);
      for (TileRowSource r : rows) {
        r.weight = &(*sorted)[std::find(parts.begin(), parts.end(), r.weight) - parts.begin()];
        sorted_rows.push_back(r);
      }
      parts = sorted_ptrs;
      rows = sorted_rows;
    }
    if (fp8_row_parts(parts)) {
      for (size_t i = 0; i < rows.size(); ++i) bar.advance(2 * rows[i].weight->cols());
      Weight d = upload_fp8_rows(rows, *parts[0], m.weight_storage);
      device_bytes += d.data.nbytes() + d.scales.nbytes();
      return d;
    }
    if (!tile_parts(parts, warned)) return std::nullopt;
    Weight d = upload_tiled(rows, *parts[0]);
    if (const Tensor& order = parts[0]->input_order; !order.empty()) {  // the permutation of the input, [K] int32
      m.weight_storage.emplace_back(static_cast<size_t>(order.nbytes()));
      PAGODA_CUDA_CHECK(cudaMemcpy(m.weight_storage.back().data(), order.data, static_cast<size_t>(order.nbytes()),
                                   cudaMemcpyHostToDevice));
      const int64_t dims[] = {order.numel()};
      d.input_order = Tensor::from_span(m.weight_storage.back().data(), DType::kI32, dims, Device::kCuda);
      device_bytes += order.nbytes();
    }
    return d;
  };
  auto upload_bf16_weight = [&](const Weight& src) {
    Tensor dst = allocate(src.num_rows(), src.cols(), src.data.ndim);
    put_rows(dst, 0, 1, src);
    device_bytes += dst.nbytes();
    return Weight{dst};
  };
  // A quantized linear as tiles; everything else as bf16. (Embedding rows are gathered, not multiplied: the
  // embedding table always goes up as bf16.)
  auto upload = [&](const Weight& src) {
    if (src.data.ndim == 2 && is_quantized_linear(src)) {
      const Weight* parts[] = {&src};
      if (std::optional<Weight> d = upload_quantized(parts, tile_rows(src))) return *d;
    }
    return upload_bf16_weight(src);
  };
  // Q, K and V stacked, each Q and K head in RoPE pairs: rows [0, hd/2) of a head to its even rows, [hd/2,
  // hd) to its odd rows (kernels::skinny_gemm_qkv_rope).
  auto upload_qkv = [&](const LayerWeights& h) {
    const int64_t hd = config.head_dim;
    const Weight* parts[] = {&h.wq, &h.wk, &h.wv};
    if (is_quantized_linear(h.wq)) {
      std::vector<TileRowSource> rows;
      for (const Weight* part : {&h.wq, &h.wk}) {
        const int64_t n = part->num_rows();
        PAGODA_CHECK(hd % 2 == 0 && n % hd == 0, "RoPE rows {} do not hold heads of {}", n, hd);
        for (int64_t head = 0; head < n; head += hd)
          for (int64_t i = 0; i < hd / 2; ++i) {
            rows.push_back({part, head + i});
            rows.push_back({part, head + hd / 2 + i});
          }
      }
      for (int64_t r = 0; r < h.wv.num_rows(); ++r) rows.push_back({&h.wv, r});
      if (std::optional<Weight> d = upload_quantized(parts, rows)) return *d;
    }
    Tensor dst = allocate(h.wq.num_rows() + h.wk.num_rows() + h.wv.num_rows(), h.wq.cols(), 2);
    int64_t row = 0;
    for (const Weight* part : {&h.wq, &h.wk}) {
      const int64_t rows = part->num_rows();
      PAGODA_CHECK(hd % 2 == 0 && rows % hd == 0, "RoPE rows {} do not hold heads of {}", rows, hd);
      for (int64_t head = 0; head < rows; head += hd) {
        put_rows(dst, row + head, 2, part->rows(head, hd / 2));
        put_rows(dst, row + head + 1, 2, part->rows(head + hd / 2, hd / 2));
      }
      row += rows;
    }
    put_rows(dst, row, 1, h.wv);
    device_bytes += dst.nbytes();
    return Weight{dst};
  };
  // Gate and up interleaved by rows: gate_j, up_j, gate_j+1, ... (kernels::skinny_gemm_silu); with `order` (an
  // act-order down projection's input order), pair j is the rows order[j], so that the output is down's input as
  // its sorted columns read it.
  auto upload_gate_up = [&](const LayerWeights& h, const int32_t* order) {
    PAGODA_CHECK(h.w_gate.num_rows() == h.w_up.num_rows(), "gate and up differ in out_features");
    const Weight* parts[] = {&h.w_gate, &h.w_up};
    const auto row = [&](int64_t j) -> int64_t { return order ? order[j] : j; };
    if (is_quantized_linear(h.w_gate)) {
      std::vector<TileRowSource> rows;
      for (int64_t j = 0; j < h.w_gate.num_rows(); ++j) {
        rows.push_back({&h.w_gate, row(j)});
        rows.push_back({&h.w_up, row(j)});
      }
      if (std::optional<Weight> d = upload_quantized(parts, rows)) return *d;
    }
    Tensor dst = allocate(2 * h.w_gate.num_rows(), h.w_gate.cols(), 2);
    if (order == nullptr) {
      put_rows(dst, 0, 2, h.w_gate);
      put_rows(dst, 1, 2, h.w_up);
    } else {  // (a row at a time: gate and up that do not go up as tiles beside an act-order down, rare)
      for (int64_t j = 0; j < h.w_gate.num_rows(); ++j) {
        put_rows(dst, 2 * j, 1, h.w_gate.rows(row(j), 1));
        put_rows(dst, 2 * j + 1, 1, h.w_up.rows(row(j), 1));
      }
    }
    device_bytes += dst.nbytes();
    return Weight{dst};
  };

  // The fused layers keep no views of their parts (wq ... w_up): their row orders are the kernels'.
  ModelWeights dev;
  if (shared) {
    dev.embed_tokens = shared->embed_tokens;
  } else if (embedding_quantized) {
    dev.embed_tokens = upload_embedding_rows(host.embed_tokens, m.weight_storage);
    device_bytes += dev.embed_tokens.nbytes();
    bar.advance(2 * elems_of(host.embed_tokens));
  } else {
    dev.embed_tokens = upload_bf16_weight(host.embed_tokens);
  }
  // PAGODA_ACT_ORDER_IN_NORM=0: act-order QKV and gate-up inputs gathered in CudaOps::linear instead of written in
  // order by the norms (A/B runs).
  static const bool order_in_norms = env_flag("PAGODA_ACT_ORDER_IN_NORM", true);
  // A norm of the shared set, without the output order its own linears may have given it (below).
  auto shared_norm = [](Weight norm) {
    norm.output_order = Tensor{};
    return norm;
  };
  dev.layers.resize(host.layers.size());
  for (size_t l = 0; l < host.layers.size(); ++l) {
    const LayerWeights& h = host.layers[l];
    LayerWeights& d = dev.layers[l];
    d.attn_norm = shared ? shared_norm(shared->layers[l].attn_norm) : upload(h.attn_norm);
    d.wqkv = upload_qkv(h);
    d.wo = upload(h.wo);
    d.ffn_norm = shared ? shared_norm(shared->layers[l].ffn_norm) : upload(h.ffn_norm);
    // An act-order down projection (columns sorted by group) reads the gate-up output in its input order when the
    // gate and up rows go up in that order: then its input needs no gather.
    std::vector<HostTensor> down_storage;
    if (std::optional<Weight> down = cpu::sort_columns_by_group(h.w_down, down_storage)) {
      d.w_gate_up = upload_gate_up(h, down->input_order.ptr<const int32_t>());
      down->input_order = Tensor{};
      d.w_down = upload(*down);
    } else {
      d.w_gate_up = upload_gate_up(h, nullptr);
      d.w_down = upload(h.w_down);
    }
    // Likewise the norms write the act-order QKV and gate-up inputs in their order (Weight::output_order), a copy
    // of the norm's Weight.
    for (auto [norm, linear] : {std::pair{&d.attn_norm, &d.wqkv}, std::pair{&d.ffn_norm, &d.w_gate_up}}) {
      if (!order_in_norms || linear->input_order.empty()) continue;
      norm->output_order = linear->input_order;
      linear->input_order = Tensor{};
    }
  }
  dev.final_norm = shared ? shared->final_norm : upload(host.final_norm);
  dev.lm_head = shared                         ? shared->lm_head
                : tied && !embedding_quantized ? dev.embed_tokens
                                               : upload(host.lm_head);
  bar.finish();
  // Large token counts multiply tiled weights as bf16 copies made one GEMM at a time (CudaOps::linear): one
  // scratch matrix of the largest, allocated now so that it is counted before the KV cache is sized.
  if (largest_tiled > 0 && static_cast<size_t>(largest_tiled) * sizeof(uint16_t) > m.dequant_scratch.size())
    m.dequant_scratch = cuda::DeviceBuffer(static_cast<size_t>(largest_tiled) * sizeof(uint16_t));
  spdlog::info("weights on the GPU: {:.2f} GiB (QKV and gate-up fused; quantized linears in their kernels' layouts){}",
               static_cast<double>(device_bytes) / (1 << 30),
               largest_tiled > 0 ? fmt::format(", plus a {:.0f} MiB dequantization scratch",
                                               static_cast<double>(largest_tiled) * 2 / (1 << 20))
                                 : "");
  return dev;
}

}  // namespace pagoda
