// Parallel, seeded random fill of every weight a config needs. Work is cut into fixed-size chunks, each with
// its own RNG stream keyed by (seed, tensor, chunk), so results do not depend on scheduling.
#include "pagoda/loader/dummy_weights.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <numbers>
#include <thread>

#include "pagoda/core/error.h"
#include "pagoda/loader/progress_bar.h"
#include "pagoda/loader/weight_mapping.h"

namespace pagoda {
namespace {

constexpr int64_t kChunkElems = int64_t{1} << 18;
constexpr float kStddev = 0.02f;

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in (0, 1]: never 0, so log() below is finite.
float uniform01(uint64_t& state) { return static_cast<float>((splitmix64(state) >> 40) + 1) * 0x1p-24f; }

void store(const Tensor& t, int64_t i, float v) {
  switch (t.dtype) {
    case DType::kF32: t.ptr<float>()[i] = v; break;
    case DType::kF16: t.ptr<uint16_t>()[i] = f32_to_f16(v); break;
    case DType::kBF16: t.ptr<uint16_t>()[i] = f32_to_bf16(v); break;
    default: PAGODA_CHECK(false, "dummy weights in {}", dtype_name(t.dtype));
  }
}

struct Chunk {
  const Tensor* tensor;
  uint64_t tensor_index;
  int64_t begin, end;
  bool norm;
};

void fill_chunk(const Chunk& c, uint64_t seed) {
  if (c.norm) {
    for (int64_t i = c.begin; i < c.end; ++i) store(*c.tensor, i, 1.0f);
    return;
  }
  uint64_t state =
      seed ^ (c.tensor_index * 0xd1b54a32d192ed03ull) ^ (static_cast<uint64_t>(c.begin) * 0x8cb92ba72f3d8dd7ull);
  splitmix64(state);
  // Box-Muller: two normals per pair of uniforms.
  for (int64_t i = c.begin; i < c.end; i += 2) {
    const float r = kStddev * std::sqrt(-2.0f * std::log(uniform01(state)));
    const float a = 2.0f * std::numbers::pi_v<float> * uniform01(state);
    store(*c.tensor, i, r * std::cos(a));
    if (i + 1 < c.end) store(*c.tensor, i + 1, r * std::sin(a));
  }
}

}  // namespace

void make_dummy_weights(LoadedModel& model, uint64_t seed, bool show_progress) {
  const DType dtype = model.config.dtype;
  if (dtype != DType::kF32 && dtype != DType::kF16 && dtype != DType::kBF16)
    throw LoadError(model.source,
                    fmt::format("dummy weights need an F32, F16 or BF16 dtype, not {}", dtype_name(dtype)));
  const std::vector<WeightSlot> slots = weight_slots(model.config, model.weights);
  model.owned.reserve(model.owned.size() + slots.size());
  std::vector<Chunk> chunks;
  int64_t total_bytes = 0;
  for (size_t s = 0; s < slots.size(); ++s) {
    try {
      model.owned.emplace_back(dtype, std::span<const int64_t>(slots[s].shape));
    } catch (const std::bad_alloc&) {
      throw LoadError(model.source, fmt::format("out of memory allocating {} dummy weights", dtype_name(dtype)));
    }
    slots[s].target->data = model.owned.back().view();
    const Tensor* t = &slots[s].target->data;
    for (int64_t b = 0; b < t->numel(); b += kChunkElems)
      chunks.push_back({t, s, b, std::min(b + kChunkElems, t->numel()), is_norm(slots[s].role)});
    total_bytes += t->nbytes();
  }
  tie_lm_head(model.config, model.weights);

  ProgressBar bar("generating dummy weights", total_bytes, show_progress);
  std::atomic<size_t> next{0};
  std::atomic<int64_t> done_bytes{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < chunks.size();) {
      fill_chunk(chunks[i], seed);
      done_bytes += dtype_storage_bytes(dtype, chunks[i].end - chunks[i].begin);
    }
  };
  const unsigned num_threads = std::max(1u, std::min(std::thread::hardware_concurrency(), 64u));
  std::vector<std::jthread> threads;
  for (unsigned i = 1; i < num_threads; ++i) threads.emplace_back(worker);
  if (bar.enabled()) {  // the calling thread reports progress while the pool fills
    while (done_bytes.load() < total_bytes) {
      bar.set(done_bytes.load());
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (num_threads == 1) break;
    }
  }
  worker();
  threads.clear();
  bar.finish();
}

}  // namespace pagoda
