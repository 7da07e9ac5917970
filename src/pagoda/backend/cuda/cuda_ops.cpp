// CudaOps: workspace, the ops as kernel launches, and steps (one input copy, placeholder tokens, CUDA graphs for
// decode). Weight upload lives in weight_upload.cpp, KV cache storage and the host tier's copies in
// kv_cache_storage.cpp, sampling in device_sampling.cpp.
#include "pagoda/backend/cuda/cuda_ops.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <numeric>
#include <vector>

#include "pagoda/backend/cuda/cuda_ops_impl.h"
#include "pagoda/core/env_knob.h"
#include "pagoda/core/error.h"
#include "pagoda/core/logging.h"
#include "pagoda/kernels/elementwise.h"
#include "pagoda/kernels/fp8_linear.h"
#include "pagoda/kernels/gemv.h"
#include "pagoda/kernels/kv_fp8_store.h"
#include "pagoda/kernels/paged_attention.h"
#include "pagoda/kernels/placeholder_tokens.h"
#include "pagoda/kernels/quant_embedding.h"
#include "pagoda/kernels/quant_gemm.h"
#include "pagoda/kernels/quant_gemv.h"

namespace pagoda {

using kernels::bf16;
using cuda::DeviceBuffer;

namespace {

constexpr size_t kAlign = 256;
constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;

void check_cublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error(fmt::format("cuBLAS error {} in {}", cublasGetStatusString(status), what));
}

bf16* bf(const Tensor& t) {
  PAGODA_CHECK(t.dtype == DType::kBF16 && t.device == Device::kCuda, "expected a bf16 CUDA tensor, got {} {}",
               dtype_name(t.dtype), t.shape_string());
  return static_cast<bf16*>(t.data);
}
const int32_t* i32(const Tensor& t) {
  PAGODA_CHECK(t.dtype == DType::kI32 && t.device == Device::kCuda, "expected an int32 CUDA tensor");
  return t.ptr<const int32_t>();
}

// A norm's output order (Weight::output_order: the input order of the act-order linear it feeds), or null.
const int32_t* output_order(const Weight& norm) { return norm.output_order.empty() ? nullptr : i32(norm.output_order); }
int rows_of(const Tensor& t) { return static_cast<int>(t.dim(0)); }
// Elements of one row: the product of every dim but the first (also for a tensor of zero rows).
int row_elems(const Tensor& t) {
  int64_t n = 1;
  for (int i = 1; i < t.ndim; ++i) n *= t.shape[i];
  return static_cast<int>(n);
}

// A W8A8 weight as prepare_weights uploads it: FP8 rows with one scale each (Weight::activations set).
bool is_fp8_rows(const Weight& w) {
  return !w.tiled && w.scheme == QuantScheme::kFp8Channel && w.activations != ActivationQuant::kNone &&
         w.data.device == Device::kCuda;
}
kernels::Fp8Rows fp8_rows(const Weight& w) {
  return {w.data.ptr<const uint8_t>(), w.scales.ptr<const float>(), static_cast<int>(w.num_rows()),
          static_cast<int>(w.cols())};
}

// The device view of a tiled weight (Weight::tiled: prepare_weights packed it).
kernels::QuantMatrix quant_matrix(const Weight& w) {
  kernels::QuantMatrix m;
  m.codes = w.data.data;
  m.params = w.scales.ptr<const float>();
  m.shape.codes = w.scheme == QuantScheme::kInt4Group   ? TileCodes::kU4
                  : w.scheme == QuantScheme::kInt8Channel ? TileCodes::kI8
                                                          : TileCodes::kE4M3;
  m.shape.offsets = w.tiled_offsets;
  m.shape.n = w.out_features;
  m.shape.k = w.in_features;
  m.shape.group_size = w.group_size;
  return m;
}

// Decode graphs exist for these padded batch sizes: 1, 2, 4, 8, then steps of 8.
int graph_size_for(int num_seqs) {
  if (num_seqs <= 1) return 1;
  if (num_seqs <= 2) return 2;
  if (num_seqs <= 4) return 4;
  return (num_seqs + 7) / 8 * 8;
}

}  // namespace

CudaOps::Impl::Impl(const CudaOpsOptions& o) : options(o) {
  int count = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess || count == 0) {
    cudaGetLastError();
    throw Error(fmt::format("--device cuda: no usable CUDA device ({})",
                            e != cudaSuccess ? cudaGetErrorString(e) : "none found"));
  }
  if (o.device < 0 || o.device >= count)
    throw Error(fmt::format("CUDA device {} does not exist ({} visible)", o.device, count));
  PAGODA_CUDA_CHECK(cudaSetDevice(o.device));
  PAGODA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  check_cublas(cublasCreate(&cublas), "cublasCreate");
  check_cublas(cublasSetStream(cublas, stream), "cublasSetStream");
  cublas_workspace = DeviceBuffer(kCublasWorkspaceBytes);
  // A workspace of our own keeps cuBLAS from allocating while a graph is being captured.
  check_cublas(cublasSetWorkspace(cublas, cublas_workspace.data(), cublas_workspace.size()), "cublasSetWorkspace");
  check_cublas(cublasSetMathMode(cublas, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  fp8_gemm = std::make_unique<cuda::Fp8Gemm>(stream, cublas_workspace.data(), cublas_workspace.size());
}

CudaOps::Impl::~Impl() {
  drop_graphs();
  if (cublas) cublasDestroy(cublas);
  if (stream) cudaStreamDestroy(stream);
}

void CudaOps::Impl::drop_graphs() {
  for (auto& [size, g] : graphs) cudaGraphExecDestroy(g.exec);
  graphs.clear();
  uncapturable.clear();
}

// PAGODA_CUDA_STEP_TIMING=1: CUDA events around every graph replay; the mean GPU time of a replay and the
// mean wall time from one replay's start to the next are logged at exit (GPU busy vs host gaps).
GraphTimer::GraphTimer() {
  enabled = env_flag("PAGODA_CUDA_STEP_TIMING", false);
}

GraphTimer::~GraphTimer() {
  if (!enabled) return;
  if (count > 1 && num_timed > 0)
    spdlog::info("CUDA graph replays: {} ({} timed), GPU {:.3f} ms each, {:.3f} ms from one replay's start to the "
                 "next", count, num_timed, gpu_ms / num_timed, wall_ms / (count - 1));
  for (EventPair& p : pairs) {
    if (p.start) cudaEventDestroy(p.start);
    if (p.stop) cudaEventDestroy(p.stop);
  }
}

void GraphTimer::begin(cudaStream_t stream) {
  if (!enabled) return;
  const auto now = std::chrono::steady_clock::now();
  if (count > 0) wall_ms += std::chrono::duration<double, std::milli>(now - last_begin).count();
  EventPair& p = pairs[next];
  if (!p.start) {  // created here, on the stream's device
    PAGODA_CUDA_CHECK(cudaEventCreate(&p.start));
    PAGODA_CUDA_CHECK(cudaEventCreate(&p.stop));
  }
  if (p.pending) {  // the replay two before this one: done, its tokens were read back
    float ms = 0;
    if (cudaEventSynchronize(p.stop) == cudaSuccess && cudaEventElapsedTime(&ms, p.start, p.stop) == cudaSuccess) {
      gpu_ms += ms;
      ++num_timed;
    }
    p.pending = false;
  }
  last_begin = now;
  ++count;
  cudaEventRecord(p.start, stream);
}

void GraphTimer::end(cudaStream_t stream) {
  if (!enabled) return;
  EventPair& p = pairs[next];
  cudaEventRecord(p.stop, stream);
  p.pending = true;
  next ^= 1;
}

void* CudaOps::Impl::arena_alloc(size_t bytes) {
  bytes = (bytes + kAlign - 1) / kAlign * kAlign;
  step_bytes += bytes;
  while (chunk < chunks.size() && chunk_used + bytes > chunks[chunk].size()) {
    ++chunk;
    chunk_used = 0;
  }
  if (chunk == chunks.size()) {
    // Growing needs cudaMalloc, which a capture forbids: the caller falls back to an eager step.
    if (capturing) throw Error("the GPU workspace would have to grow during CUDA graph capture");
    const size_t last = chunks.empty() ? 0 : chunks.back().size();
    spdlog::debug("GPU workspace grows: {} MiB more for a step of {} MiB so far", std::max({bytes, 2 * last, size_t{64} << 20}) >> 20,
                  step_bytes >> 20);
    chunks.emplace_back(std::max({bytes, 2 * last, size_t{64} << 20}));
    chunk_used = 0;
  }
  void* p = static_cast<char*>(chunks[chunk].data()) + chunk_used;
  chunk_used += bytes;
  return p;
}

void CudaOps::Impl::arena_reset() {
  // After a step that needed several chunks, make one chunk of the step's size: addresses then repeat
  // exactly from step to step (graphs captured before the move are dropped).
  if (chunks.size() > 1 && !capturing) {
    const size_t total = step_bytes;
    spdlog::debug("GPU workspace made one chunk of {} MiB; CUDA graphs dropped", total >> 20);
    chunks.clear();
    chunks.emplace_back(total);
    drop_graphs();
  }
  chunk = 0;
  chunk_used = 0;
  step_bytes = 0;
  normed_fp8 = {};
  deferred_norm = {};
}

kernels::ProductScales CudaOps::Impl::fp8_gemm_unscaled(Tensor out, const Tensor& x, const Weight& w) {
  // PAGODA_FP8_SCALE_PASS=1: the separate scaling pass instead (A/B runs)
  static const bool scale_pass = env_flag("PAGODA_FP8_SCALE_PASS", false);
  const int T = rows_of(x), N = static_cast<int>(w.num_rows()), K = static_cast<int>(w.cols());
  if (scale_pass || !is_fp8_rows(w) || T <= kernels::kFp8GemvMaxTokens || !fp8_gemm->supported(T, N, K)) return {};
  const kernels::Fp8Activations q = quantize_input(x, w);
  const kernels::Fp8Rows rows = fp8_rows(w);
  fp8_gemm->run(static_cast<bf16*>(out.data), q, rows, T, /*scaled=*/false);
  return kernels::ProductScales{rows.scales, q.scales};
}

namespace {

// Whether w's few-token GEMV can read the rows of `residual` [T, K] as its x (kernels::NormedInput).
bool few_tokens_reads(const Tensor& residual, const Weight& w) {
  if (!w.tiled || !w.input_order.empty() || w.cols() != row_elems(residual)) return false;
  return kernels::quant_gemv_few_tokens_takes(residual.data, quant_matrix(w), rows_of(residual));
}

}  // namespace

bool CudaOps::Impl::defer_norm(Tensor residual, const Tensor& x, const Weight& w, const Tensor& out, const Weight& norm,
                               float eps, const Weight& reader) {
  // On by default since it ran on an H100 (W4A16 batch-1 decode +2.0-2.2%, W8A16 +2.0%: docs/PERFORMANCE.md);
  // PAGODA_DEFERRED_NORM=0 turns it off.
  static const bool enabled = env_flag("PAGODA_DEFERRED_NORM", true);
  const int T = rows_of(x);
  if (!enabled || T < 1 || T > kernels::kQuantGemvFewTokensMax || !w.tiled || !w.input_order.empty() ||
      !norm.output_order.empty() || residual.dtype != DType::kBF16 || rows_of(residual) != T ||
      w.num_rows() != row_elems(residual) || !few_tokens_reads(residual, reader))
    return false;
  const kernels::QuantMatrix m = quant_matrix(w);
  if (!kernels::quant_gemv_few_tokens_takes(x.data, m, T)) return false;
  const int tiles = static_cast<int>(m.shape.tiles());
  auto* squares = static_cast<float*>(arena_alloc(static_cast<size_t>(T) * tiles * sizeof(float)));  // [T, tiles]
  kernels::quant_gemv_few_tokens(kernels::Epilogue::kPlain, nullptr, {}, bf(x), m, T, stream, {},
                                 kernels::ResidualAdd{bf(residual), squares});
  deferred_norm = {out, residual, kernels::NormedInput{bf(residual), squares, bf(norm.data), tiles, eps}};
  return true;
}

void CudaOps::Impl::settle_norm(const Tensor& x, const Weight& w) {
  if (deferred_norm.out.data == nullptr || deferred_norm.out.data != x.data) return;
  if (few_tokens_reads(deferred_norm.residual, w)) return;  // its GEMV will take it
  const DeferredNorm d = deferred_norm;
  deferred_norm = {};
  kernels::rms_norm(bf(d.out), bf(d.residual), d.input.gamma, rows_of(d.residual), row_elems(d.residual), d.input.eps,
                    stream);
}

kernels::NormedInput CudaOps::Impl::take_norm(const Tensor& x) {
  if (deferred_norm.out.data == nullptr || deferred_norm.out.data != x.data) return {};
  const kernels::NormedInput input = deferred_norm.input;
  deferred_norm = {};
  return input;
}

Tensor CudaOps::Impl::ordered_input(const Tensor& x, const Weight& w) {
  if (w.input_order.empty()) return x;
  const int T = rows_of(x), K = row_elems(x);
  Tensor ordered(nullptr, DType::kBF16, {T, K}, Device::kCuda);
  ordered.data = arena_alloc(static_cast<size_t>(ordered.nbytes()));
  kernels::gather_columns(bf(ordered), bf(x), i32(w.input_order), T, K, stream);
  return ordered;
}

kernels::Fp8Activations CudaOps::Impl::quantize_input(const Tensor& x, const Weight& w) {
  const int T = rows_of(x), K = row_elems(x);
  if (normed_fp8.source == x.data && normed_fp8.rows == T && normed_fp8.cols == K &&
      w.activations != ActivationQuant::kFp8Static) {
    const kernels::Fp8Activations a = normed_fp8.act;
    normed_fp8 = {};
    return a;
  }
  const kernels::Fp8Activations a = fp8_activations(T, K);
  kernels::quantize_fp8_rows(a, bf(x), T, K, w.activations == ActivationQuant::kFp8Static ? w.input_scale : 0.0f,
                             stream);
  return a;
}

kernels::Fp8Activations CudaOps::Impl::quantize_in_norm(const Tensor& out, const Weight& linear) {
  // The same codes as quantize_input's launch, without it (H100: offline FP8 + FP8 KV 1.016x, perplexity and greedy
  // ids unchanged; docs/PERFORMANCE.md). PAGODA_FP8_NORM_QUANT=0: the separate launch (A/B runs).
  static const bool off = !env_flag("PAGODA_FP8_NORM_QUANT", true);
  normed_fp8 = {};
  if (off || !is_fp8_rows(linear) || linear.activations == ActivationQuant::kFp8Static) return {};
  const int T = rows_of(out), K = row_elems(out);
  normed_fp8 = {out.data, T, K, fp8_activations(T, K)};
  return normed_fp8.act;
}

kernels::Fp8Activations CudaOps::Impl::fp8_activations(int rows, int cols) {
  return {static_cast<uint8_t*>(arena_alloc(static_cast<size_t>(rows) * cols)),
          static_cast<float*>(arena_alloc(static_cast<size_t>(rows) * sizeof(float)))};
}

const float* CudaOps::Impl::device_inv_freq(const RopeParams& p) {
  auto it = inv_freq.find(p.inv_freq.data());
  if (it == inv_freq.end()) {
    if (capturing) throw Error("RoPE tables must be on the GPU before a CUDA graph is captured");
    DeviceBuffer buf(p.inv_freq.size() * sizeof(float));
    PAGODA_CUDA_CHECK(cudaMemcpy(buf.data(), p.inv_freq.data(), buf.size(), cudaMemcpyHostToDevice));
    it = inv_freq.emplace(p.inv_freq.data(), std::move(buf)).first;
  }
  return static_cast<const float*>(it->second.data());
}

CudaOps::CudaOps(const CudaOpsOptions& options) : impl_(std::make_unique<Impl>(options)) {}
CudaOps::~CudaOps() = default;

Tensor CudaOps::alloc(DType dtype, std::initializer_list<int64_t> dims) {
  Tensor t(nullptr, dtype, dims, Device::kCuda);
  t.data = impl_->arena_alloc(static_cast<size_t>(t.nbytes()));
  return t;
}

void CudaOps::reset_workspace() { impl_->arena_reset(); }

Tensor CudaOps::upload(const Tensor& host) {
  Tensor t = host;
  t.device = Device::kCuda;
  t.data = impl_->arena_alloc(static_cast<size_t>(host.nbytes()));
  PAGODA_CUDA_CHECK(cudaMemcpyAsync(t.data, host.data, host.nbytes(), cudaMemcpyHostToDevice, impl_->stream));
  return t;
}

void CudaOps::embedding(Tensor out, Tensor ids, const Weight& table) {
  if (table.quantized()) {  // rows as stored (weight_upload.cpp)
    const kernels::QuantRowsTable t{
        .codes = table.scheme == QuantScheme::kInt4Group     ? kernels::QuantRowCodes::kInt4
                 : table.scheme == QuantScheme::kInt8Channel ? kernels::QuantRowCodes::kInt8
                                                             : kernels::QuantRowCodes::kFp8,
        .data = table.data.data,
        .scales = table.scales.ptr<const float>(),
        .zeros = table.zeros.empty() ? nullptr : table.zeros.data,
        .offsets = table.offsets.empty() ? nullptr : table.offsets.ptr<const float>(),
        .hidden = static_cast<int>(table.cols()),
        .group_size = static_cast<int>(table.group_size),
        .groups = static_cast<int>(table.scales.dim(1))};
    kernels::quant_embedding(bf(out), i32(ids), t, rows_of(out), impl_->stream);
    return;
  }
  kernels::embedding(bf(out), i32(ids), bf(table.data), rows_of(out), static_cast<int>(table.data.dim(1)),
                     impl_->stream);
}

void CudaOps::rms_norm(Tensor out, Tensor x, const Weight& w, float eps) {
  impl_->normed_fp8 = {};
  impl_->deferred_norm = {};
  kernels::rms_norm(bf(out), bf(x), bf(w.data), rows_of(x), row_elems(x), eps, impl_->stream, {}, output_order(w));
}

void CudaOps::add_rms_norm(Tensor residual, Tensor x, Tensor out, const Weight& w, float eps) {
  impl_->normed_fp8 = {};
  impl_->deferred_norm = {};
  kernels::add_rms_norm(bf(residual), bf(x), bf(out), bf(w.data), rows_of(x), row_elems(x), eps, impl_->stream, {},
                        {}, output_order(w));
}

void CudaOps::linear_add_rms_norm(Tensor residual, Tensor proj, Tensor x, const Weight& w, Tensor out,
                                  const Weight& norm, float eps, const Weight* reader) {
  PAGODA_CHECK(row_elems(x) == w.cols() && row_elems(proj) == w.num_rows() && rows_of(proj) == rows_of(x),
               "linear_add_rms_norm: x {} w {} proj {}", x.shape_string(), w.data.shape_string(), proj.shape_string());
  impl_->settle_norm(x, w);  // (x is an attention output or SwiGLU's: never a deferred norm's in the model)
  impl_->deferred_norm = {};
  // A decode step of a W4 or W8 model: w's GEMV adds into the residual, and the reader's GEMV normalises it.
  if (reader != nullptr && impl_->defer_norm(residual, x, w, out, norm, eps, *reader)) return;
  // FP8 W8A8 on cuBLASLt: the sums stay unscaled and the norm kernel applies s_w[n] * s_x[t] as it reads them.
  const kernels::ProductScales scales = impl_->fp8_gemm_unscaled(proj, x, w);
  if (scales.rows == nullptr) linear(proj, x, w);
  // The norm's output goes into the next linear (QKV, gate-up); in a W8A8 model the norm also quantizes it, and
  // before an act-order one it writes it in that linear's input order.
  const int32_t* order = output_order(norm);
  kernels::add_rms_norm(bf(residual), bf(proj), bf(out), bf(norm.data), rows_of(proj), row_elems(proj), eps,
                        impl_->stream, scales, order != nullptr ? kernels::Fp8Activations{} : impl_->quantize_in_norm(out, w),
                        order);
}

void CudaOps::linear(Tensor out, Tensor x, const Weight& w) {
  const int T = rows_of(x), N = static_cast<int>(w.num_rows()), K = static_cast<int>(w.cols());
  PAGODA_CHECK(row_elems(x) == K && row_elems(out) == N, "linear: x {} w {} out {}", x.shape_string(),
               w.data.shape_string(), out.shape_string());
  if (T == 0) return;
  impl_->settle_norm(x, w);
  x = impl_->ordered_input(x, w);  // (qkv_rope_store and gate_up_silu come here with x as it was)
  if (is_fp8_rows(w)) {
    const kernels::Fp8Activations q = impl_->quantize_input(x, w);
    const kernels::Fp8Rows rows = fp8_rows(w);
    if (T > kernels::kFp8GemvMaxTokens && impl_->fp8_gemm->supported(T, N, K)) {
      impl_->fp8_gemm->run(bf(out), q, rows, T);
      return;
    }
    for (int t0 = 0; t0 < T; t0 += kernels::kFp8GemvMaxTokens) {  // (without cuBLASLt: passes of the GEMV)
      const int n = std::min(kernels::kFp8GemvMaxTokens, T - t0);
      const kernels::Fp8Activations part{q.codes + static_cast<int64_t>(t0) * K, q.scales + t0};
      kernels::fp8_gemv(bf(out) + static_cast<int64_t>(t0) * N, part, rows, n, impl_->stream);
    }
    return;
  }
  const bf16* weights = nullptr;  // bf16 [N, K]
  if (w.tiled) {
    const kernels::QuantMatrix m = quant_matrix(w);
    if (const kernels::NormedInput normed = impl_->take_norm(x); normed.residual != nullptr) {
      kernels::quant_gemv_few_tokens(kernels::Epilogue::kPlain, bf(out), {}, nullptr, m, T, impl_->stream, normed);
      return;
    }
    if (kernels::quant_gemv_supported(x.data, m, T)) {
      kernels::quant_gemv(bf(out), bf(x), m, T, impl_->stream);
      return;
    }
    // Many tokens: on Hopper 129 to 512 take the warp-specialized form and 65 to 128 the register wgmma form, up to 192
    // the mma.sync form (kernels/quant_gemm.h has each band). Their partial sums (when K is cut into slices) go to the
    // dequantization scratch, idle on this path, where they fit (a few MB: always on Llama-sized models), so that no
    // step grows the workspace.
    auto workspace = [&](size_t bytes) -> void* {
      return bytes == 0 ? nullptr : bytes <= impl_->dequant_scratch.size() ? impl_->dequant_scratch.data()
                                                                           : impl_->arena_alloc(bytes);
    };
    if (kernels::quant_gemm_ws_takes(x.data, m, T)) {
      kernels::quant_gemm_ws(bf(out), bf(x), m, T, workspace(kernels::quant_gemm_ws_workspace_bytes(m, T)), impl_->stream);
      return;
    }
    if (kernels::quant_gemm_wgmma_takes(x.data, m, T)) {
      kernels::quant_gemm_wgmma(bf(out), bf(x), m, T, workspace(kernels::quant_gemm_wgmma_workspace_bytes(m, T)),
                                impl_->stream);
      return;
    }
    if (kernels::quant_gemm_supported(x.data, m, T)) {
      kernels::quant_gemm(bf(out), bf(x), m, T, workspace(kernels::quant_gemm_workspace_bytes(m, T)), impl_->stream);
      return;
    }
    // Long prompts (and the offsets form without Hopper): a bf16 copy of this one weight in the scratch matrix, then
    // cuBLAS. (Its cost, a write and a read of N x K bf16, is small beside the GEMM's once T is in the hundreds.)
    PAGODA_CHECK(impl_->dequant_scratch.size() >= static_cast<size_t>(N) * K * sizeof(uint16_t),
                 "the dequantization scratch is smaller than a {} x {} weight", N, K);
    auto* scratch = static_cast<bf16*>(impl_->dequant_scratch.data());
    kernels::dequantize_tiles_bf16(scratch, m, impl_->stream);
    weights = scratch;
  } else {
    if (kernels::skinny_gemm_supported(x.data, w.data.data, T, N, K)) {
      kernels::skinny_gemm(bf(out), bf(x), bf(w.data), T, N, K, impl_->stream);
      return;
    }
    weights = bf(w.data);
  }
  // Column-major view: out^T [N, T] = W [K, N]^T · x^T [K, T].
  const float alpha = 1.0f, beta = 0.0f;
  check_cublas(cublasGemmEx(impl_->cublas, CUBLAS_OP_T, CUBLAS_OP_N, N, T, K, &alpha, weights, CUDA_R_16BF, K, bf(x),
                            CUDA_R_16BF, K, &beta, bf(out), CUDA_R_16BF, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx");
}

void CudaOps::rope(Tensor q, Tensor k, Tensor positions, const RopeParams& params) {
  kernels::rope(bf(q), bf(k), i32(positions), impl_->device_inv_freq(params), params.attention_scaling, rows_of(q),
                static_cast<int>(q.dim(1)), static_cast<int>(k.dim(1)), static_cast<int>(q.dim(2)), impl_->stream);
}

namespace {

// One layer of an FP8 KV cache, as the FP8 store kernels take it.
kernels::Fp8KvLayer fp8_kv_layer(const KvCache& cache, int layer) {
  const KvCacheSpec& s = cache.spec;
  return {static_cast<uint8_t*>(cache.k[layer].data), static_cast<uint8_t*>(cache.v[layer].data),
          static_cast<int8_t*>(cache.k_exp[layer].data), static_cast<int8_t*>(cache.v_exp[layer].data),
          s.num_kv_heads, s.head_dim, s.block_size};
}

}  // namespace

void CudaOps::store_kv(KvCache& cache, int layer, Tensor k, Tensor v, const ForwardBatch& batch) {
  if (cache.spec.fp8()) {
    kernels::store_kv_fp8(fp8_kv_layer(cache, layer), bf(k), bf(v), i32(batch.slot_mapping), rows_of(k), impl_->stream);
    return;
  }
  kernels::store_kv(bf(cache.k[layer]), bf(cache.v[layer]), bf(k), bf(v), i32(batch.slot_mapping), rows_of(k),
                    cache.spec.num_kv_heads, cache.spec.head_dim, impl_->stream);
}

void CudaOps::qkv_rope_store(Tensor q_out, Tensor x, const Weight& wqkv, KvCache& cache, int layer,
                             const ForwardBatch& batch, const RopeParams& params) {
  // wqkv: Q, K, V stacked, each Q and K head in RoPE pairs (weight_upload.cpp).
  const int T = rows_of(x), K = row_elems(x), N = static_cast<int>(wqkv.num_rows());
  const int nh = static_cast<int>(q_out.dim(1)), nkv = cache.spec.num_kv_heads, hd = cache.spec.head_dim;
  PAGODA_CHECK(N == (nh + 2 * nkv) * hd && wqkv.cols() == K, "qkv_rope_store: x {} wqkv {} q_out {}",
               x.shape_string(), wqkv.data.shape_string(), q_out.shape_string());
  if (T == 0) return;
  impl_->settle_norm(x, wqkv);
  const float* inv_freq = impl_->device_inv_freq(params);
  // Decode: RoPE and the KV store in the GEMM's epilogue. Not for an FP8 cache: a row's exponent needs the
  // amax of the whole row, so the GEMM writes qkv and the FP8 store kernel follows.
  if (!cache.spec.fp8()) {
    const kernels::QkvRopeOutput o{bf(q_out), bf(cache.k[layer]), bf(cache.v[layer]), i32(batch.positions),
                                   i32(batch.slot_mapping), inv_freq, params.attention_scaling, nh, nkv, hd};
    if (is_fp8_rows(wqkv) && T <= kernels::kFp8GemvMaxTokens) {
      kernels::fp8_gemv_qkv_rope(o, impl_->quantize_input(x, wqkv), fp8_rows(wqkv), T, impl_->stream);
      return;
    }
    if (wqkv.tiled) {
      const kernels::QuantMatrix m = quant_matrix(wqkv);
      if (const kernels::NormedInput normed = impl_->take_norm(x); normed.residual != nullptr) {
        kernels::quant_gemv_few_tokens(kernels::Epilogue::kRope, nullptr, o, nullptr, m, T, impl_->stream, normed);
        return;
      }
      if (kernels::quant_gemv_supported(x.data, m, T)) {
        kernels::quant_gemv_qkv_rope(o, bf(impl_->ordered_input(x, wqkv)), m, T, impl_->stream);
        return;
      }
    }
    if (!wqkv.tiled && !is_fp8_rows(wqkv) && kernels::skinny_gemm_supported(x.data, wqkv.data.data, T, N, K)) {
      kernels::skinny_gemm_qkv_rope(o, bf(x), bf(wqkv.data), T, K, impl_->stream);
      return;
    }
  }
  Tensor qkv = alloc(DType::kBF16, {T, N});
  const kernels::ProductScales scales = impl_->fp8_gemm_unscaled(qkv, x, wqkv);  // FP8 W8A8 on cuBLASLt
  if (scales.rows == nullptr) linear(qkv, x, wqkv);
  if (cache.spec.fp8()) {
    kernels::qkv_rope_store_fp8(bf(q_out), bf(qkv), fp8_kv_layer(cache, layer), i32(batch.positions),
                                i32(batch.slot_mapping), inv_freq, params.attention_scaling, T, nh, impl_->stream, scales);
  } else {
    kernels::qkv_rope_store(bf(q_out), bf(qkv), bf(cache.k[layer]), bf(cache.v[layer]), i32(batch.positions),
                            i32(batch.slot_mapping), inv_freq, params.attention_scaling, T, nh, nkv, hd, impl_->stream,
                            scales);
  }
}

void CudaOps::attention(Tensor out, Tensor q, const KvCache& cache, int layer, const ForwardBatch& batch,
                        float scale) {
  kernels::PagedAttentionParams p;
  p.out = bf(out);
  p.q = bf(q);
  if (cache.spec.fp8()) {
    p.k_cache = p.v_cache = nullptr;
    p.k_fp8 = static_cast<const uint8_t*>(cache.k[layer].data);
    p.v_fp8 = static_cast<const uint8_t*>(cache.v[layer].data);
    p.k_exp = static_cast<const int8_t*>(cache.k_exp[layer].data);
    p.v_exp = static_cast<const int8_t*>(cache.v_exp[layer].data);
  } else {
    p.k_cache = bf(cache.k[layer]);
    p.v_cache = bf(cache.v[layer]);
  }
  p.query_start = i32(batch.query_start);
  p.seq_lens = i32(batch.seq_lens);
  p.kv_page_start = i32(batch.kv_page_start);
  p.kv_pages = i32(batch.kv_pages);
  p.token_seq = i32(batch.token_seq);
  p.num_seqs = batch.num_seqs;
  p.num_tokens = batch.num_tokens;
  p.num_heads = static_cast<int>(q.dim(1));
  p.num_kv_heads = cache.spec.num_kv_heads;
  p.head_dim = cache.spec.head_dim;
  p.block_size = cache.spec.block_size;
  p.max_query_len = batch.max_query_len;
  p.max_seq_len = batch.max_seq_len;
  p.scale = scale;
  if (batch.num_tokens == 0) return;
  auto decode = [&](const kernels::PagedAttentionParams& d) {
    // A captured graph must cover every context it may replay with: split for the longest one.
    const int splits = std::max(
        1, kernels::decode_num_splits(impl_->graph_shapes ? impl_->options.max_model_len : batch.max_seq_len));
    void* workspace = impl_->arena_alloc(
        kernels::paged_attention_decode_workspace_bytes(d.num_seqs, d.num_heads, d.head_dim, splits));
    kernels::paged_attention_decode(d, splits, workspace, impl_->stream);
  };
  if (batch.decode_only && batch.num_tokens == batch.num_seqs) {
    decode(p);
    return;
  }
  // A mixed step: its leading one-token sequences take the decode kernel (K/V read once per KV head),
  // the prompt chunks after them the prefill kernel. The tensor-core prefill reads query_start,
  // seq_lens and kv_page_start by sequence and addresses tokens absolutely, so the prompt part is the same
  // arrays from sequence D on; the plain kernel for other head dims indexes by token and takes the step whole.
  const int D = batch.num_leading_decodes;
  if (D > 0 && D < batch.num_seqs && (p.head_dim == 64 || p.head_dim == 128)) {
    kernels::PagedAttentionParams d = p;
    d.num_seqs = d.num_tokens = D;
    d.max_query_len = 1;
    decode(d);
    kernels::PagedAttentionParams f = p;
    f.query_start += D;
    f.seq_lens += D;
    f.kv_page_start += D;
    f.num_seqs -= D;
    f.num_tokens -= D;
    kernels::paged_attention_prefill(f, impl_->stream);
    return;
  }
  kernels::paged_attention_prefill(p, impl_->stream);
}

void CudaOps::silu_mul(Tensor out, Tensor gate, Tensor up) {
  kernels::silu_mul(bf(out), bf(gate), bf(up), out.numel(), impl_->stream);
}

void CudaOps::gate_up_silu(Tensor out, Tensor x, const Weight& w_gate_up) {
  // w_gate_up [2I, H] interleaves gate and up rows (weight_upload.cpp).
  const int T = rows_of(x), N = static_cast<int>(w_gate_up.num_rows()), K = static_cast<int>(w_gate_up.cols());
  PAGODA_CHECK(N % 2 == 0 && row_elems(x) == K && row_elems(out) == N / 2 && rows_of(out) == T,
               "gate_up_silu: x {} w {} out {}", x.shape_string(), w_gate_up.data.shape_string(), out.shape_string());
  if (T == 0) return;
  impl_->settle_norm(x, w_gate_up);
  if (is_fp8_rows(w_gate_up) && T <= kernels::kFp8GemvMaxTokens) {
    kernels::fp8_gemv_silu(bf(out), impl_->quantize_input(x, w_gate_up), fp8_rows(w_gate_up), T, impl_->stream);
    return;
  }
  if (w_gate_up.tiled) {
    const kernels::QuantMatrix m = quant_matrix(w_gate_up);
    if (const kernels::NormedInput normed = impl_->take_norm(x); normed.residual != nullptr) {
      kernels::quant_gemv_few_tokens(kernels::Epilogue::kSilu, bf(out), {}, nullptr, m, T, impl_->stream, normed);
      return;
    }
    if (kernels::quant_gemv_supported(x.data, m, T)) {
      kernels::quant_gemv_silu(bf(out), bf(impl_->ordered_input(x, w_gate_up)), m, T, impl_->stream);
      return;
    }
  }
  if (!w_gate_up.tiled && !is_fp8_rows(w_gate_up) && kernels::skinny_gemm_supported(x.data, w_gate_up.data.data, T, N, K)) {
    kernels::skinny_gemm_silu(bf(out), bf(x), bf(w_gate_up.data), T, N / 2, K, impl_->stream);
    return;
  }
  Tensor gate_up = alloc(DType::kBF16, {T, N});
  const kernels::ProductScales scales = impl_->fp8_gemm_unscaled(gate_up, x, w_gate_up);  // FP8 W8A8, cuBLASLt
  if (scales.rows == nullptr) linear(gate_up, x, w_gate_up);
  kernels::silu_mul_interleaved(bf(out), bf(gate_up), T, N / 2, impl_->stream, scales);
}

void CudaOps::gather_rows(Tensor out, Tensor x, Tensor rows) {
  kernels::gather_rows(bf(out), bf(x), i32(rows), rows_of(rows), row_elems(x), impl_->stream);
}

void CudaOps::download(void* host, Tensor x) {
  PAGODA_CUDA_CHECK(cudaMemcpyAsync(host, x.data, x.nbytes(), cudaMemcpyDeviceToHost, impl_->stream));
  synchronize();
}

void CudaOps::download_f32(Tensor host_out, Tensor x) {
  PAGODA_CHECK(host_out.numel() == x.numel());
  const size_t bytes = static_cast<size_t>(x.nbytes());
  if (impl_->download_staging.size() < bytes) impl_->download_staging = cuda::PinnedBuffer(std::max(bytes, size_t{1} << 20));
  download(impl_->download_staging.data(), x);
  const int64_t n = x.numel();
  float* out = host_out.ptr<float>();
  if (x.dtype == DType::kF32) {
    std::memcpy(out, impl_->download_staging.data(), bytes);
    return;
  }
  PAGODA_CHECK(x.dtype == DType::kBF16);
  const auto* src = static_cast<const uint16_t*>(impl_->download_staging.data());
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(src[i]);
}

void CudaOps::synchronize() { PAGODA_CUDA_CHECK(cudaStreamSynchronize(impl_->stream)); }

GpuMemoryInfo CudaOps::memory_info() const {
  size_t free = 0, total = 0;
  PAGODA_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return {static_cast<int64_t>(free), static_cast<int64_t>(total)};
}

// --- Steps and graphs ---

int CudaOps::last_graph_batch_size() const { return impl_->last_graph_size; }

Tensor CudaOps::Impl::capture(GraphKey key, const ForwardFn& forward, const ForwardBatch& batch) {
  cudaGraph_t graph = nullptr;
  PAGODA_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  capturing = graph_shapes = true;
  Tensor logits;
  try {
    logits = forward(batch);
  } catch (...) {
    capturing = graph_shapes = false;
    cudaStreamEndCapture(stream, &graph);
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    throw;
  }
  capturing = graph_shapes = false;
  PAGODA_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  PAGODA_CUDA_CHECK(status);
  graphs[key] = DecodeGraph{exec, logits};
  return logits;
}

void CudaOps::Impl::fill_placeholder_tokens(const ForwardBatch& host, const ForwardBatch& staged) {
  if (host.num_tokens_from_prev_sample == 0) return;
  const int32_t* rows = host.token_from_prev_sample.ptr<const int32_t>();
  for (int t = 0; t < host.num_tokens; ++t)
    PAGODA_CHECK(rows[t] < sampling.num_ids, "token {} reads sample row {} of {}", t, rows[t], sampling.num_ids);
  kernels::fill_placeholder_tokens(staged.token_ids.ptr<int32_t>(), staged.token_from_prev_sample.ptr<const int32_t>(),
                                   sampling.latest_ids(), host.num_tokens, stream);
}

Tensor CudaOps::run_step(const ForwardBatch& host, const ForwardFn& forward, int graph_set) {
  Impl& m = *impl_;
  m.last_graph_size = 0;
  const int n = host.num_seqs;
  const int rows = static_cast<int>(host.logits_rows.dim(0));
  bool rows_are_seqs = rows == n;
  for (int i = 0; rows_are_seqs && i < rows; ++i) rows_are_seqs = host.logits_rows.ptr<int32_t>()[i] == i;
  const bool graph = !m.options.enforce_eager && host.decode_only && n > 0 && n <= m.options.max_num_seqs &&
                     rows_are_seqs && !m.inv_freq.empty();
  bool moved = false;
  if (!graph) {
    const ForwardBatch& batch = m.inputs.stage(host, n, m.stream, &moved);
    if (moved) m.drop_graphs();
    m.fill_placeholder_tokens(host, batch);
    return forward(batch);
  }
  const int size = graph_size_for(n);
  const ForwardBatch& batch = m.inputs.stage(host, size, m.stream, &moved);
  if (moved) m.drop_graphs();
  m.fill_placeholder_tokens(host, batch);  // outside the graph, which reads the staged token ids
  const GraphKey key{graph_set, size};
  auto it = m.graphs.find(key);
  if (it == m.graphs.end() && !m.uncapturable.contains(key)) {
    spdlog::debug("capturing the CUDA graph of decode batch size {} (graph set {})", size, graph_set);
    try {
      m.capture(key, forward, batch);
      it = m.graphs.find(key);
    } catch (const Error& e) {  // e.g. the workspace was too small: this size runs eagerly until it grows
      spdlog::warn("decode batch size {} (graph set {}) runs without a CUDA graph: {}", size, graph_set, e.what());
      m.uncapturable.insert(key);
    }
  }
  if (it == m.graphs.end()) return forward(batch).rows(0, rows);
  m.timer.begin(m.stream);
  PAGODA_CUDA_CHECK(cudaGraphLaunch(it->second.exec, m.stream));
  m.timer.end(m.stream);
  m.last_graph_size = size;
  return it->second.logits.rows(0, rows);
}

void CudaOps::warm_up_decode(const ForwardFn& forward, bool capture_graphs, int graph_set) {
  Impl& m = *impl_;
  if (m.options.enforce_eager) return;
  std::vector<int> sizes;
  for (int s = 1; s <= graph_size_for(m.options.max_num_seqs); s = graph_size_for(s + 1)) sizes.push_back(s);
  bool moved = false;
  // The largest graph's step, eagerly: the workspace grows to what every capture will need.
  m.graph_shapes = true;
  try {
    forward(m.inputs.stage_padding(sizes.back(), m.stream, &moved));
  } catch (...) {
    m.graph_shapes = false;
    throw;
  }
  m.graph_shapes = false;
  synchronize();
  if (!capture_graphs) return;
  for (auto it = sizes.rbegin(); it != sizes.rend(); ++it) {
    const ForwardBatch& batch = m.inputs.stage_padding(*it, m.stream, &moved);
    if (moved) m.drop_graphs();
    m.capture({graph_set, *it}, forward, batch);
  }
  synchronize();
  spdlog::info("CUDA graphs captured for {} decode batch sizes (1 to {}){}", sizes.size(), sizes.back(),
               graph_set == 0 ? "" : fmt::format(", graph set {}", graph_set));
}

}  // namespace pagoda
