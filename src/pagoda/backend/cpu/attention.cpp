// CPU causal attention over a paged KV cache of fp32 or fp16 rows. One work item is (query token, KV head): the
// query heads that share that KV head (GQA) are processed together, so each key and value row is read once per
// group. Keys are walked page by page (no per-key division). Softmax in fp32 with the maximum subtracted. Over
// fp16 rows the inputs of both products are fp16 values (the queries and the probabilities rounded to fp16, as
// llama.cpp's CPU attention rounds them for its F16 dot products) and every sum is fp32.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "pagoda/backend/cpu/cpu_kernels.h"
#include "pagoda/backend/cpu/fp16_rounding.h"
#include "pagoda/backend/cpu/parallel.h"
#include "pagoda/core/dtype.h"

namespace pagoda::cpu {
namespace {

// One cache element as fp32.
inline float value_of(float v) { return v; }
inline float value_of(uint16_t v) { return f16_to_f32(v); }

template <typename KV>
inline float dot(const float* a, const KV* b, int64_t n) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += a[i] * value_of(b[i]);
  return s;
}

#ifdef __AVX2__
// 8 cache elements as fp32.
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

// Dot products of q with 8 keys (each `hd` floats, hd % 8 == 0, rows `stride` floats apart), returned
// as one vector: per-key partial sums, then a transpose-and-add instead of 8 horizontal reductions.
template <typename KV>
inline __m256 dot8(const float* q, const KV* k, int64_t stride, int64_t hd) {
  __m256 acc[8];
  for (int j = 0; j < 8; ++j) acc[j] = _mm256_setzero_ps();
  for (int64_t d = 0; d < hd; d += 8) {
    const __m256 qv = _mm256_loadu_ps(q + d);
    for (int j = 0; j < 8; ++j) acc[j] = _mm256_fmadd_ps(qv, load8(k + j * stride + d), acc[j]);
  }
  const __m256 r0 = _mm256_hadd_ps(acc[0], acc[1]);
  const __m256 r1 = _mm256_hadd_ps(acc[2], acc[3]);
  const __m256 r2 = _mm256_hadd_ps(acc[4], acc[5]);
  const __m256 r3 = _mm256_hadd_ps(acc[6], acc[7]);
  const __m256 s0 = _mm256_hadd_ps(r0, r1);  // lanes: k0 k1 k2 k3 | k0 k1 k2 k3 (low/high halves)
  const __m256 s1 = _mm256_hadd_ps(r2, r3);  // lanes: k4 k5 k6 k7 | k4 k5 k6 k7
  return _mm256_add_ps(_mm256_permute2f128_ps(s0, s1, 0x20), _mm256_permute2f128_ps(s0, s1, 0x31));
}
// exp(x) for x <= 0 (softmax inputs after subtracting the maximum), 8 at a time: x = n ln2 + r with
// |r| <= ln2/2, e^r by a degree-6 polynomial, 2^n through the exponent bits. Relative error ~2e-7.
inline __m256 exp_nonpositive(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));  // below this e^x underflows: flush to ~0
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);  // ln2 split in two for accuracy
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

// out[0:8V] = sum_j p[j] * v_j for keys j of one page, accumulators held in registers.
template <int V, typename KV>
inline void accumulate_values(float* out, const float* p, const KV* v_rows, int64_t stride, int64_t n) {
  __m256 acc[V];
  for (int i = 0; i < V; ++i) acc[i] = _mm256_loadu_ps(out + 8 * i);
  for (int64_t j = 0; j < n; ++j) {
    const __m256 pj = _mm256_set1_ps(p[j]);
    for (int i = 0; i < V; ++i) acc[i] = _mm256_fmadd_ps(pj, load8(v_rows + j * stride + 8 * i), acc[i]);
  }
  for (int i = 0; i < V; ++i) _mm256_storeu_ps(out + 8 * i, acc[i]);
}
#endif

template <typename KV>
inline void axpy(float* y, float a, const KV* x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] += a * value_of(x[i]);
}

template <typename KV>
void paged_attention(float* out, const float* q, const KV* k_cache, const KV* v_cache, const KvCacheSpec& spec,
                     int num_heads, const ForwardBatch& batch, float scale) {
  constexpr bool kF16 = std::is_same_v<KV, uint16_t>;
  const int64_t hd = spec.head_dim;
  const int64_t num_kv_heads = spec.num_kv_heads;
  const int64_t group = num_heads / num_kv_heads;
  const int64_t bs = spec.block_size;
  const int64_t slot_stride = num_kv_heads * hd;  // floats between consecutive slots
  const int32_t* seq_lens = batch.seq_lens.ptr<int32_t>();
  const int32_t* page_start = batch.kv_page_start.ptr<int32_t>();
  const int32_t* pages = batch.kv_pages.ptr<int32_t>();
  const int32_t* positions = batch.positions.ptr<int32_t>();
  const int64_t token_stride = num_heads * hd;
  const int64_t num_work = static_cast<int64_t>(batch.num_tokens) * num_kv_heads;
  PAGODA_CHECK(group <= 64, "more than 64 query heads per KV head");

  const int32_t* seq_of_token = batch.token_seq.ptr<int32_t>();

  // A decode step has a few items (TinyLlama: 4 a token): one a thread at a time.
  parallel_for_dynamic(num_work, num_work * batch.max_seq_len * hd * group >= (1 << 16), [&](int64_t w) {
    thread_local std::vector<float> scores;    // [group, num_keys]
    thread_local std::vector<float> q_rounded;  // kF16: the group's queries as fp16 values [group, hd]
    const int64_t t = w / num_kv_heads;
    const int64_t kvh = w % num_kv_heads;
    const int s = seq_of_token[t];
    // Causal: the token at position p sees keys 0..p (its own key is already stored).
    const int64_t num_keys = std::min<int64_t>(positions[t] + 1, seq_lens[s]);
    const int32_t* seq_pages = pages + page_start[s];
    const float* q0 = q + t * token_stride + kvh * group * hd;  // the group's first query head
    if constexpr (kF16) {
      q_rounded.resize(static_cast<size_t>(group * hd));
      for (int64_t i = 0; i < group * hd; ++i) q_rounded[i] = round_to_fp16(q0[i]);
      q0 = q_rounded.data();
    }
    scores.resize(static_cast<size_t>(group * num_keys));

    float max_score[64];
    std::fill(max_score, max_score + group, -INFINITY);
    for (int64_t j0 = 0; j0 < num_keys; j0 += bs) {
      const KV* k_page = k_cache + static_cast<int64_t>(seq_pages[j0 / bs]) * bs * slot_stride + kvh * hd;
      const int64_t n = std::min(bs, num_keys - j0);
      int64_t j = 0;
#ifdef __AVX2__
      if (hd % 8 == 0) {
        for (; j + 8 <= n; j += 8) {
          for (int64_t g = 0; g < group; ++g) {
            const __m256 sc = _mm256_mul_ps(dot8(q0 + g * hd, k_page + j * slot_stride, slot_stride, hd),
                                            _mm256_set1_ps(scale));
            _mm256_storeu_ps(&scores[g * num_keys + j0 + j], sc);
            alignas(32) float tmp[8];
            _mm256_store_ps(tmp, sc);
            for (float v : tmp) max_score[g] = std::max(max_score[g], v);
          }
        }
      }
#endif
      for (; j < n; ++j) {
        const KV* kv = k_page + j * slot_stride;
        for (int64_t g = 0; g < group; ++g) {
          const float sc = dot(q0 + g * hd, kv, hd) * scale;
          scores[g * num_keys + j0 + j] = sc;
          max_score[g] = std::max(max_score[g], sc);
        }
      }
    }
    for (int64_t g = 0; g < group; ++g) {
      float* sg = scores.data() + g * num_keys;
      float sum = 0.0f;
      int64_t j = 0;
#ifdef __AVX2__
      __m256 sum8 = _mm256_setzero_ps();
      const __m256 mx = _mm256_set1_ps(max_score[g]);
      for (; j + 8 <= num_keys; j += 8) {
        const __m256 e = exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(sg + j), mx));
        _mm256_storeu_ps(sg + j, e);
        sum8 = _mm256_add_ps(sum8, e);
      }
      alignas(32) float lanes[8];
      _mm256_store_ps(lanes, sum8);
      for (float v : lanes) sum += v;
#endif
      for (; j < num_keys; ++j) {
        sg[j] = std::exp(sg[j] - max_score[g]);
        sum += sg[j];
      }
      const float inv_sum = 1.0f / sum;
      for (int64_t j = 0; j < num_keys; ++j) sg[j] = kF16 ? round_to_fp16(sg[j] * inv_sum) : sg[j] * inv_sum;
      float* o = out + t * token_stride + (kvh * group + g) * hd;
      std::fill(o, o + hd, 0.0f);
    }
    for (int64_t j0 = 0; j0 < num_keys; j0 += bs) {
      const KV* v_page = v_cache + static_cast<int64_t>(seq_pages[j0 / bs]) * bs * slot_stride + kvh * hd;
      const int64_t n = std::min(bs, num_keys - j0);
      for (int64_t g = 0; g < group; ++g) {
        float* o = out + t * token_stride + (kvh * group + g) * hd;
        const float* p = scores.data() + g * num_keys + j0;
#ifdef __AVX2__
        if (hd == 8) { accumulate_values<1>(o, p, v_page, slot_stride, n); continue; }
        if (hd == 16) { accumulate_values<2>(o, p, v_page, slot_stride, n); continue; }
        if (hd == 32) { accumulate_values<4>(o, p, v_page, slot_stride, n); continue; }
        if (hd == 64) { accumulate_values<8>(o, p, v_page, slot_stride, n); continue; }
#endif
        for (int64_t j = 0; j < n; ++j) axpy(o, p[j], v_page + j * slot_stride, hd);
      }
    }
  });
}

}  // namespace

void paged_attention_f32(float* out, const float* q, const float* k_cache, const float* v_cache,
                         const KvCacheSpec& spec, int num_heads, const ForwardBatch& batch, float scale) {
  paged_attention(out, q, k_cache, v_cache, spec, num_heads, batch, scale);
}

void paged_attention_f16(float* out, const float* q, const uint16_t* k_cache, const uint16_t* v_cache,
                         const KvCacheSpec& spec, int num_heads, const ForwardBatch& batch, float scale) {
  paged_attention(out, q, k_cache, v_cache, spec, num_heads, batch, scale);
}

}  // namespace pagoda::cpu
