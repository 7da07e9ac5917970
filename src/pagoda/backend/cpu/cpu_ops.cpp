// CpuOps: argument checks and dispatch to the kernels in cpu_kernels.h.
#include "pagoda/backend/cpu/cpu_ops.h"

#include <omp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_map>

#include "pagoda/backend/cpu/act_order.h"
#include "pagoda/backend/cpu/compact_weights.h"
#include "pagoda/backend/cpu/cpu_kernels.h"
#include "pagoda/backend/cpu/fp16_rounding.h"
#include "pagoda/backend/cpu/linear_quant.h"
#include "pagoda/backend/cpu/parallel.h"
#include "pagoda/core/dtype.h"
#include "pagoda/kv/kv_fp8.h"

namespace pagoda {

CpuOps::CpuOps(const CpuOpsOptions& options)
    : fp8_kv_scratch_bytes_(options.fp8_kv_scratch_bytes), num_threads_(options.num_threads) {
  if (num_threads_ > 0) omp_set_num_threads(num_threads_);
}

Tensor CpuOps::alloc(DType dtype, std::initializer_list<int64_t> dims) {
  Tensor t(nullptr, dtype, dims);
  const size_t nbytes = (static_cast<size_t>(t.nbytes()) + 63) / 64 * 64;
  bytes_requested_ += nbytes;
  if (chunks_.empty() || chunk_used_ + nbytes > chunks_.back().size()) {
    chunks_.emplace_back(std::max<size_t>(nbytes, 1 << 20), Buffer::Init::kUninitialized);
    chunk_used_ = 0;
  }
  t.data = static_cast<char*>(chunks_.back().data()) + chunk_used_;
  chunk_used_ += nbytes;
  return t;
}

// OpenMP keeps a pool of worker threads per thread that opened a parallel region, and libgomp counts them all:
// once they outnumber the cores, every worker sleeps on a futex after about 1,000 spins between regions instead of
// 300,000. The kernels' regions run on ThreadPool now (parallel.h), but loading may still open OpenMP regions on
// the loading thread: freeing that pool leaves no idle OpenMP workers beside the steps' (on 2 vCPUs, two pools had
// each of a TinyLlama decode step's ~110 regions wake a sleeping worker: docs/PERFORMANCE.md).
void CpuOps::release_calling_thread() { omp_pause_resource_all(omp_pause_soft); }

void CpuOps::reset_workspace() {
  // OpenMP's thread count is per calling thread: the engine's thread, which runs the steps, did not inherit the
  // one set in the constructor (before this, --threads 1 still ran every kernel on all cores). A step starts here.
  if (num_threads_ > 0 && omp_get_max_threads() != num_threads_) omp_set_num_threads(num_threads_);
  if (chunks_.size() > 1) {  // settle into one chunk big enough for the largest step seen
    const size_t want = bytes_requested_;
    chunks_.clear();
    chunks_.emplace_back(std::max<size_t>(want, 1 << 20), Buffer::Init::kUninitialized);
  }
  chunk_used_ = 0;
  bytes_requested_ = 0;
}

void CpuOps::embedding(Tensor out, Tensor ids, const Weight& table) {
  const int64_t num_tokens = ids.dim(0);
  const int64_t hidden = table.cols();
  const int64_t vocab = table.num_rows();
  PAGODA_CHECK(out.dim(0) == num_tokens && out.dim(1) == hidden);
  const int64_t row_bytes = table.data.row_bytes();
  for (int64_t t = 0; t < num_tokens; ++t) {
    const int32_t id = ids.ptr<int32_t>()[t];
    PAGODA_CHECK(id >= 0 && id < vocab, "token id {} outside the vocabulary of {}", id, vocab);
    float* dst = out.ptr<float>() + t * hidden;
    if (table.quantized()) {  // a quantized table (GGUF Q4_K, Q6_K, ...): the token's row, dequantized
      cpu::dequantize_rows(table, id, 1, dst);
    } else {
      cpu::dequantize_row(static_cast<const char*>(table.data.data) + id * row_bytes, table.data.dtype, hidden, dst);
    }
  }
}

void CpuOps::rms_norm(Tensor out, Tensor x, const Weight& w, float eps) {
  const float* weight = w.data.ptr<float>();
  if (w.data.dtype != DType::kF32) {  // BF16/F16 norm weights: a few KiB, converted into a reused buffer
    norm_weight_.resize(static_cast<size_t>(w.data.numel()));
    cpu::dequantize_row(w.data.data, w.data.dtype, w.data.numel(), norm_weight_.data());
    weight = norm_weight_.data();
  }
  cpu::rms_norm_f32(out.ptr<float>(), x.ptr<float>(), weight, x.dim(0), x.dim(1), eps);
}

void CpuOps::add_rms_norm(Tensor residual, Tensor x, Tensor out, const Weight& w, float eps) {
  const int64_t n = residual.numel();
  float* r = residual.ptr<float>();
  const float* xv = x.ptr<float>();
  for (int64_t i = 0; i < n; ++i) r[i] += xv[i];
  rms_norm(out, residual, w, eps);
}

void CpuOps::linear(Tensor out, Tensor x, const Weight& w) {
  const int64_t num_tokens = x.dim(0);
  const int64_t k = x.dim(1);
  const int64_t n = w.data.dim(0);
  PAGODA_CHECK(w.cols() == k, "linear: x {} vs w {} ({} in_features)", x.shape_string(), w.data.shape_string(),
               w.cols());
  PAGODA_CHECK(out.dim(0) == num_tokens && out.dim(1) == n);
  if (!w.input_order.empty()) {  // act-order columns sorted by group (backend/cpu/act_order.h): x[:, order]
    Tensor ordered = alloc(DType::kF32, {num_tokens, k});
    const int32_t* order = w.input_order.ptr<const int32_t>();
    cpu::parallel_for(num_tokens, num_tokens > 1, [&](int64_t t) {
      const float* in = x.ptr<float>() + t * k;
      float* o = ordered.ptr<float>() + t * k;
      for (int64_t j = 0; j < k; ++j) o[j] = in[order[j]];
    });
    x = ordered;
  }
  if (w.quantized()) return cpu::linear_quant_f32(out.ptr<float>(), x.ptr<float>(), num_tokens, w);
  cpu::linear_f32(out.ptr<float>(), x.ptr<float>(), num_tokens, w.data.data, w.data.dtype, n, k);
}

ModelWeights CpuOps::prepare_weights(const ModelWeights& host, const ModelConfig&, bool, const ModelWeights*) {
  // Act-order linears with their columns sorted by group, where they can be (backend/cpu/act_order.h): groups of
  // contiguous columns dequantize a group at a time, not a few columns at a time.
  ModelWeights sorted = host;
  for (LayerWeights& l : sorted.layers)
    for (Weight* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
      if (std::optional<Weight> s = cpu::sort_columns_by_group(*w, weight_storage_)) *w = *s;
  return cpu::compact_linears(sorted, weight_storage_);
}

void CpuOps::rope(Tensor q, Tensor k, Tensor positions, const RopeParams& params) {
  const int64_t num_tokens = q.dim(0);
  const int64_t head_dim = q.dim(2);
  PAGODA_CHECK(static_cast<int64_t>(params.inv_freq.size()) * 2 == head_dim);
  cpu::rope_f32(q.ptr<float>(), positions.ptr<int32_t>(), num_tokens, q.dim(1), head_dim, params.inv_freq.data());
  cpu::rope_f32(k.ptr<float>(), positions.ptr<int32_t>(), num_tokens, k.dim(1), head_dim, params.inv_freq.data());
}

// --calculate-kv-scales: a layer's K and V exponents from the amax of the first batch it stores.
void CpuOps::calibrate_fp8_layer_scales(KvCache& cache, int layer, Tensor k, Tensor v) {
  if (cache.k_layer_exp.empty()) {
    cache.k_layer_exp.assign(static_cast<size_t>(cache.spec.num_layers), kFp8KvUncalibrated);
    cache.v_layer_exp.assign(static_cast<size_t>(cache.spec.num_layers), kFp8KvUncalibrated);
  }
  if (cache.k_layer_exp[layer] != kFp8KvUncalibrated) return;
  const auto amax = [](Tensor x) {
    float m = 0.0f;
    for (int64_t i = 0; i < x.numel(); ++i) m = std::max(m, std::fabs(x.ptr<float>()[i]));
    return m;
  };
  cache.k_layer_exp[layer] = fp8_kv_exponent(amax(k));
  cache.v_layer_exp[layer] = fp8_kv_exponent(amax(v));
  spdlog::debug("layer {}: KV scales calibrated, K 2^{} and V 2^{}", layer, cache.k_layer_exp[layer],
                cache.v_layer_exp[layer]);
}

void CpuOps::store_kv(KvCache& cache, int layer, Tensor k, Tensor v, const ForwardBatch& batch) {
  const int64_t row = static_cast<int64_t>(cache.spec.num_kv_heads) * cache.spec.head_dim;
  const int32_t* slots = batch.slot_mapping.ptr<int32_t>();
  if (cache.spec.fp8()) {  // each (token, head) row: e4m3 codes and its exponent (kv/kv_fp8.h)
    const int nkv = cache.spec.num_kv_heads, hd = cache.spec.head_dim;
    const bool per_layer = cache.spec.fp8_scales == Fp8KvScales::kPerLayer;
    if (per_layer) calibrate_fp8_layer_scales(cache, layer, k, v);
    for (int64_t t = 0; t < k.dim(0); ++t) {
      PAGODA_CHECK(slots[t] >= 0 && slots[t] < cache.spec.num_tokens(), "slot {} outside the cache", slots[t]);
      for (int h = 0; h < nkv; ++h) {
        const int64_t r = static_cast<int64_t>(slots[t]) * nkv + h, e = cache.spec.exponent_index(slots[t], h);
        const float* kr = k.ptr<float>() + t * row + h * hd;
        const float* vr = v.ptr<float>() + t * row + h * hd;
        uint8_t* kc = cache.k[layer].ptr<uint8_t>() + r * hd;
        uint8_t* vc = cache.v[layer].ptr<uint8_t>() + r * hd;
        if (per_layer) {
          quantize_fp8_kv_row_at(kr, hd, cache.k_exp[layer].ptr<int8_t>()[e] = cache.k_layer_exp[layer], kc);
          quantize_fp8_kv_row_at(vr, hd, cache.v_exp[layer].ptr<int8_t>()[e] = cache.v_layer_exp[layer], vc);
        } else {
          cache.k_exp[layer].ptr<int8_t>()[e] = quantize_fp8_kv_row(kr, hd, kc);
          cache.v_exp[layer].ptr<int8_t>()[e] = quantize_fp8_kv_row(vr, hd, vc);
        }
      }
    }
    return;
  }
  if (cache.spec.dtype == DType::kF16) {  // each value rounded to fp16 (to nearest even)
    uint16_t* kc = cache.k[layer].ptr<uint16_t>();
    uint16_t* vc = cache.v[layer].ptr<uint16_t>();
    for (int64_t t = 0; t < k.dim(0); ++t) {
      PAGODA_CHECK(slots[t] >= 0 && slots[t] < cache.spec.num_tokens(), "slot {} outside the cache", slots[t]);
      cpu::store_fp16(k.ptr<float>() + t * row, row, kc + slots[t] * row);
      cpu::store_fp16(v.ptr<float>() + t * row, row, vc + slots[t] * row);
    }
    return;
  }
  float* kc = cache.k[layer].ptr<float>();
  float* vc = cache.v[layer].ptr<float>();
  for (int64_t t = 0; t < k.dim(0); ++t) {
    PAGODA_CHECK(slots[t] >= 0 && slots[t] < cache.spec.num_tokens(), "slot {} outside the cache", slots[t]);
    std::memcpy(kc + slots[t] * row, k.ptr<float>() + t * row, row * sizeof(float));
    std::memcpy(vc + slots[t] * row, v.ptr<float>() + t * row, row * sizeof(float));
  }
}

void CpuOps::attention(Tensor out, Tensor q, const KvCache& cache, int layer, const ForwardBatch& batch,
                       float scale) {
  if (cache.spec.dtype == DType::kF16) {
    cpu::paged_attention_f16(out.ptr<float>(), q.ptr<float>(), cache.k[layer].ptr<uint16_t>(),
                             cache.v[layer].ptr<uint16_t>(), cache.spec, static_cast<int>(q.dim(1)), batch, scale);
    return;
  }
  if (!cache.spec.fp8()) {
    cpu::paged_attention_f32(out.ptr<float>(), q.ptr<float>(), cache.k[layer].ptr<float>(),
                             cache.v[layer].ptr<float>(), cache.spec, static_cast<int>(q.dim(1)), batch, scale);
    return;
  }
  // FP8: the pages a group of sequences reads, dequantized into fp32 pages of their own, and a block table
  // onto them; the attention is then the fp32 one over exactly the values the cache holds. Groups of
  // consecutive sequences keep the dequantized pages under fp8_kv_scratch_bytes (one sequence at least), so the
  // scratch never grows with the batch.
  const KvCacheSpec& spec = cache.spec;
  const int64_t rows_per_page = int64_t{spec.block_size} * spec.num_kv_heads, page_floats = rows_per_page * spec.head_dim;
  const int64_t max_pages =
      std::max<int64_t>(1, fp8_kv_scratch_bytes_ / static_cast<int64_t>(2 * page_floats * sizeof(float)));
  const int32_t* query_start = batch.query_start.ptr<int32_t>();
  const int32_t* page_start = batch.kv_page_start.ptr<int32_t>();
  const int32_t* pages = batch.kv_pages.ptr<int32_t>();
  const int64_t token_stride = q.dim(1) * q.dim(2);
  std::unordered_map<int32_t, int32_t> local;
  std::vector<int32_t> unique, remapped, local_page_start, local_token_seq;
  for (int s0 = 0; s0 < batch.num_seqs;) {
    local.clear();
    unique.clear();
    remapped.clear();
    local_page_start.assign(1, 0);
    int s1 = s0;
    for (; s1 < batch.num_seqs; ++s1) {
      const int64_t n = page_start[s1 + 1] - page_start[s1];
      if (s1 > s0 && static_cast<int64_t>(unique.size()) + n > max_pages) break;
      for (int64_t i = page_start[s1]; i < page_start[s1 + 1]; ++i) {
        const auto [it, inserted] = local.emplace(pages[i], static_cast<int32_t>(unique.size()));
        if (inserted) unique.push_back(pages[i]);
        remapped.push_back(it->second);
      }
      local_page_start.push_back(static_cast<int32_t>(remapped.size()));
    }
    fp8_pages_.resize(static_cast<size_t>(2 * unique.size() * page_floats));
    float* kf = fp8_pages_.data();
    float* vf = kf + unique.size() * page_floats;
    cpu::parallel_for(static_cast<int64_t>(unique.size()), unique.size() * page_floats >= (1 << 16), [&](int64_t u) {
      for (int64_t r = 0; r < rows_per_page; ++r) {
        const int64_t src = unique[u] * rows_per_page + r, dst = u * rows_per_page + r;
        const int64_t e = spec.exponent_index(src / spec.num_kv_heads, static_cast<int>(src % spec.num_kv_heads));
        dequantize_fp8_kv_row(cache.k[layer].ptr<uint8_t>() + src * spec.head_dim, cache.k_exp[layer].ptr<int8_t>()[e],
                              spec.head_dim, kf + dst * spec.head_dim);
        dequantize_fp8_kv_row(cache.v[layer].ptr<uint8_t>() + src * spec.head_dim, cache.v_exp[layer].ptr<int8_t>()[e],
                              spec.head_dim, vf + dst * spec.head_dim);
      }
    });
    // The group's tokens are rows [query_start[s0], query_start[s1]) of the batch.
    const int t0 = query_start[s0], t1 = query_start[s1];
    local_token_seq.resize(static_cast<size_t>(t1 - t0));
    for (int t = t0; t < t1; ++t) local_token_seq[t - t0] = batch.token_seq.ptr<int32_t>()[t] - s0;
    ForwardBatch g = batch;
    const int64_t tokens[] = {t1 - t0}, seqs[] = {s1 - s0}, starts[] = {s1 - s0 + 1},
                  page_dims[] = {static_cast<int64_t>(remapped.size())};
    g.positions = Tensor::from_span(const_cast<int32_t*>(batch.positions.ptr<int32_t>()) + t0, DType::kI32, tokens);
    g.token_seq = Tensor::from_span(local_token_seq.data(), DType::kI32, tokens);
    g.seq_lens = Tensor::from_span(const_cast<int32_t*>(batch.seq_lens.ptr<int32_t>()) + s0, DType::kI32, seqs);
    g.kv_page_start = Tensor::from_span(local_page_start.data(), DType::kI32, starts);
    g.kv_pages = Tensor::from_span(remapped.data(), DType::kI32, page_dims);
    g.num_tokens = t1 - t0;
    g.num_seqs = s1 - s0;
    cpu::paged_attention_f32(out.ptr<float>() + t0 * token_stride, q.ptr<float>() + t0 * token_stride, kf, vf, spec,
                             static_cast<int>(q.dim(1)), g, scale);
    s0 = s1;
  }
}

void CpuOps::silu_mul(Tensor out, Tensor gate, Tensor up) {
  const int64_t n = out.numel();
  float* o = out.ptr<float>();
  const float* g = gate.ptr<float>();
  const float* u = up.ptr<float>();
  cpu::parallel_for(n, n >= (1 << 16), [&](int64_t i) { o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i]; });
}

void CpuOps::gather_rows(Tensor out, Tensor x, Tensor rows) {
  const int64_t row_bytes = x.row_bytes();
  for (int64_t r = 0; r < rows.dim(0); ++r) {
    const int32_t src = rows.ptr<int32_t>()[r];
    PAGODA_CHECK(src >= 0 && src < x.dim(0));
    std::memcpy(static_cast<char*>(out.data) + r * row_bytes, static_cast<const char*>(x.data) + src * row_bytes,
                row_bytes);
  }
}

void CpuOps::download_f32(Tensor host_out, Tensor x) {
  PAGODA_CHECK(x.dtype == DType::kF32 && host_out.numel() == x.numel());
  if (x.numel() == 0) return;  // zero rows: the pointers may be null, which memcpy does not allow
  std::memcpy(host_out.data, x.data, static_cast<size_t>(x.nbytes()));
}

KvCache CpuOps::allocate_kv_cache(const KvCacheSpec& spec) {
  PAGODA_CHECK(spec.dtype == DType::kF32 || spec.dtype == DType::kF16 || spec.fp8(),
               "the CPU backend keeps its KV cache in F32, F16 or FP8, not {}", dtype_name(spec.dtype));
  KvCache cache;
  cache.spec = spec;
  for (int l = 0; l < spec.num_layers; ++l) {
    for (auto* list : {&cache.k, &cache.v}) {
      Tensor t(nullptr, spec.dtype, {spec.num_blocks, spec.block_size, spec.num_kv_heads, spec.head_dim});
      kv_storage_.emplace_back(static_cast<size_t>(t.nbytes()));
      t.data = kv_storage_.back().data();
      list->push_back(t);
    }
    if (!spec.fp8()) continue;
    for (auto* list : {&cache.k_exp, &cache.v_exp}) {
      Tensor t(nullptr, DType::kI8, {spec.num_blocks, spec.num_kv_heads, spec.block_size});
      kv_storage_.emplace_back(static_cast<size_t>(t.nbytes()));
      t.data = kv_storage_.back().data();
      list->push_back(t);
    }
  }
  return cache;
}

void CpuOps::free_kv_cache(KvCache& cache) {
  for (auto* list : {&cache.k, &cache.v, &cache.k_exp, &cache.v_exp})
    for (const Tensor& t : *list)
      std::erase_if(kv_storage_, [&](const Buffer& b) { return b.data() == t.data; });
  cache = KvCache{};
}

KvHostStore CpuOps::allocate_kv_host_store(const KvCacheSpec& spec, int num_slots) {
  PAGODA_CHECK(num_slots >= 0, "{} host slots", num_slots);
  KvHostStore store{nullptr, num_slots, spec.bytes_per_block()};
  if (num_slots == 0) return store;
  kv_storage_.emplace_back(static_cast<size_t>(store.bytes_per_slot * num_slots));
  store.data = static_cast<std::byte*>(kv_storage_.back().data());
  return store;
}

void CpuOps::free_kv_host_store(KvHostStore& store) {
  std::erase_if(kv_storage_, [&](const Buffer& b) { return b.data() == store.data; });
  store = KvHostStore{};
}

void CpuOps::copy_kv_blocks(KvCache& cache, KvHostStore& store, const KvTransfers& transfers) {
  // The "device" and host tiers are both RAM here: the same copies as on a GPU, by memcpy.
  const KvCacheSpec& spec = cache.spec;
  const int64_t part = spec.block_part_bytes(), exps = spec.block_exponent_bytes();
  auto block_of = [](const Tensor& t, BlockId block, int64_t bytes) {
    return static_cast<std::byte*>(t.data) + static_cast<int64_t>(block) * bytes;
  };
  auto copy = [&](const KvBlockCopy& c, bool to_host) {
    PAGODA_CHECK(c.block >= 0 && c.block < spec.num_blocks && c.slot >= 0 && c.slot < store.num_slots,
                 "block copy {} <-> slot {} out of range", c.block, c.slot);
    std::byte* slot = store.data + static_cast<int64_t>(c.slot) * store.bytes_per_slot;
    for (int l = 0; l < spec.num_layers; ++l) {
      std::byte* host = slot + l * spec.host_layer_bytes();
      std::byte* dev[4] = {block_of(cache.k[l], c.block, part), block_of(cache.v[l], c.block, part),
                           spec.fp8() ? block_of(cache.k_exp[l], c.block, exps) : nullptr,
                           spec.fp8() ? block_of(cache.v_exp[l], c.block, exps) : nullptr};
      const int64_t bytes[4] = {part, part, exps, exps};
      for (int p = 0; p < 4; ++p) {
        if (bytes[p] == 0) continue;
        if (to_host) std::memcpy(host, dev[p], static_cast<size_t>(bytes[p]));
        else std::memcpy(dev[p], host, static_cast<size_t>(bytes[p]));
        host += bytes[p];
      }
    }
  };
  for (const KvBlockCopy& c : transfers.to_host) copy(c, true);
  for (const KvBlockCopy& c : transfers.to_device) copy(c, false);
}

void CpuOps::qkv_rope_store(Tensor q_out, Tensor x, const Weight& wqkv, KvCache& cache, int layer,
                            const ForwardBatch& batch, const RopeParams& params) {
  // The reference form for a stacked [Wq; Wk; Wv] (the CPU fuses nothing itself): one GEMM, then the
  // separate ops on its parts.
  const int64_t T = x.dim(0), nh = q_out.dim(1), hd = q_out.dim(2), nkv = (wqkv.data.dim(0) / hd - nh) / 2;
  Tensor qkv = alloc(DType::kF32, {T, nh + 2 * nkv, hd});
  linear(qkv.reshape({T, (nh + 2 * nkv) * hd}), x, wqkv);
  Tensor k = alloc(DType::kF32, {T, nkv, hd});
  Tensor v = alloc(DType::kF32, {T, nkv, hd});
  const float* src = qkv.ptr<float>();
  for (int64_t t = 0; t < T; ++t) {
    const float* row = src + t * (nh + 2 * nkv) * hd;
    std::memcpy(q_out.ptr<float>() + t * nh * hd, row, nh * hd * sizeof(float));
    std::memcpy(k.ptr<float>() + t * nkv * hd, row + nh * hd, nkv * hd * sizeof(float));
    std::memcpy(v.ptr<float>() + t * nkv * hd, row + (nh + nkv) * hd, nkv * hd * sizeof(float));
  }
  rope(q_out, k, batch.positions, params);
  store_kv(cache, layer, k, v, batch);
}

void CpuOps::gate_up_silu(Tensor out, Tensor x, const Weight& w_gate_up) {
  // The CPU keeps gate and up apart (prepare_weights fuses nothing); a stacked [gate; up] weight works too.
  const int64_t rows = out.dim(0), inter = out.dim(1);
  Tensor gate_up = alloc(DType::kF32, {rows, 2 * inter});
  linear(gate_up, x, w_gate_up);
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = gate_up.ptr<float>() + r * 2 * inter;
    float* o = out.ptr<float>() + r * inter;
    for (int64_t i = 0; i < inter; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * g[inter + i];
  }
}

}  // namespace pagoda
