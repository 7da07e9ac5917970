// CPU causal attention over a paged KV cache: one (sequence, query token, head) at a time, softmax in
// fp32 with the running maximum subtracted. GQA: query head h reads KV head h / (num_heads / num_kv_heads).
#include <algorithm>
#include <cmath>
#include <vector>

#include "pagoda/backend/cpu/cpu_kernels.h"

namespace pagoda::cpu {

void paged_attention_f32(float* out, const float* q, const float* k_cache, const float* v_cache,
                         const KvCacheSpec& spec, int num_heads, const ForwardBatch& batch, float scale) {
  const int64_t hd = spec.head_dim;
  const int64_t num_kv_heads = spec.num_kv_heads;
  const int64_t group = num_heads / num_kv_heads;
  const int64_t bs = spec.block_size;
  const int32_t* query_start = batch.query_start.ptr<int32_t>();
  const int32_t* seq_lens = batch.seq_lens.ptr<int32_t>();
  const int32_t* page_start = batch.kv_page_start.ptr<int32_t>();
  const int32_t* pages = batch.kv_pages.ptr<int32_t>();
  const int32_t* positions = batch.positions.ptr<int32_t>();
  const int64_t token_stride = num_heads * hd;
  const int64_t num_work = static_cast<int64_t>(batch.num_tokens) * num_heads;

#pragma omp parallel if (num_work * batch.max_seq_len * hd >= (1 << 15))
  {
    thread_local std::vector<float> scores;
    thread_local std::vector<float> acc;
    acc.resize(static_cast<size_t>(hd));
#pragma omp for schedule(dynamic, 4)
    for (int64_t w = 0; w < num_work; ++w) {
      const int64_t t = w / num_heads;
      const int64_t h = w % num_heads;
      const int64_t kvh = h / group;
      // The sequence this token belongs to (few sequences: a linear scan is fine on the CPU).
      int s = 0;
      while (query_start[s + 1] <= t) ++s;
      // Causal: token at position p sees keys 0..p (its own key is already stored).
      const int64_t num_keys = std::min<int64_t>(positions[t] + 1, seq_lens[s]);
      const int32_t* seq_pages = pages + page_start[s];
      const float* qv = q + t * token_stride + h * hd;

      scores.resize(static_cast<size_t>(num_keys));
      float max_score = -INFINITY;
      for (int64_t j = 0; j < num_keys; ++j) {
        const int64_t slot = static_cast<int64_t>(seq_pages[j / bs]) * bs + j % bs;
        const float* kv = k_cache + (slot * num_kv_heads + kvh) * hd;
        float dot = 0.0f;
        for (int64_t i = 0; i < hd; ++i) dot += qv[i] * kv[i];
        scores[j] = dot * scale;
        max_score = std::max(max_score, scores[j]);
      }
      float sum = 0.0f;
      for (int64_t j = 0; j < num_keys; ++j) {
        scores[j] = std::exp(scores[j] - max_score);
        sum += scores[j];
      }
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t j = 0; j < num_keys; ++j) {
        const int64_t slot = static_cast<int64_t>(seq_pages[j / bs]) * bs + j % bs;
        const float* vv = v_cache + (slot * num_kv_heads + kvh) * hd;
        const float p = scores[j];
        for (int64_t i = 0; i < hd; ++i) acc[i] += p * vv[i];
      }
      float* o = out + t * token_stride + h * hd;
      const float inv_sum = 1.0f / sum;
      for (int64_t i = 0; i < hd; ++i) o[i] = acc[i] * inv_sum;
    }
  }
}

}  // namespace pagoda::cpu
