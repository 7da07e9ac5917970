// Parallel, seeded random fill of every weight a config needs. Work is cut into fixed-size chunks, each with
// its own RNG stream keyed by (seed, tensor, chunk), so results do not depend on scheduling.
#include "pagoda/loader/dummy_weights.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
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

// Approximately N(0, 1): the sum of four 16-bit uniforms (Irwin-Hall, variance 4/12) rescaled. One hash per
// value and no transcendental functions, so billions of values fill quickly; the tails stop at ~3.5 sigma,
// which does not matter for weights that only exist to be timed.
inline float approx_normal(uint64_t bits) {
  const uint64_t sum = (bits & 0xffff) + ((bits >> 16) & 0xffff) + ((bits >> 32) & 0xffff) + (bits >> 48);
  constexpr float kScale = 1.7320508f / 65536.0f;  // sqrt(3) / 2^16
  return (static_cast<float>(sum) - 2.0f * 65535.0f) * kScale;
}

template <typename T, typename Convert>
void fill(T* out, int64_t begin, int64_t end, uint64_t state, bool norm, Convert convert) {
  if (norm) {
    std::fill(out + begin, out + end, convert(1.0f));
    return;
  }
  for (int64_t i = begin; i < end; ++i) out[i] = convert(kStddev * approx_normal(splitmix64(state)));
}

struct Chunk {
  const Tensor* tensor;
  uint64_t tensor_index;
  int64_t begin, end;
  bool norm;
};

void fill_chunk(const Chunk& c, uint64_t seed) {
  // A stream per (seed, tensor, chunk start): the same weights whichever thread fills the chunk.
  uint64_t state = seed ^ (c.tensor_index * 0xd1b54a32d192ed03ull) ^
                   (static_cast<uint64_t>(c.begin) * 0x8cb92ba72f3d8dd7ull);
  splitmix64(state);
  const Tensor& t = *c.tensor;
  switch (t.dtype) {
    case DType::kF32: fill(t.ptr<float>(), c.begin, c.end, state, c.norm, [](float v) { return v; }); break;
    case DType::kF16: fill(t.ptr<uint16_t>(), c.begin, c.end, state, c.norm, f32_to_f16); break;
    case DType::kBF16: fill(t.ptr<uint16_t>(), c.begin, c.end, state, c.norm, f32_to_bf16); break;
    default: PAGODA_CHECK(false, "dummy weights in {}", dtype_name(t.dtype));
  }
}

// Runs fn(i) for i in [0, n) on all cores; `on_wait` is polled by the calling thread meanwhile (progress).
// The first exception thrown by fn is rethrown here.
template <typename Fn, typename Wait>
void parallel_for(size_t n, Fn fn, Wait on_wait) {
  std::atomic<size_t> next{0};
  std::atomic<size_t> finished{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < n;) {
      try {
        fn(i);
      } catch (...) {
        const std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
      }
      finished.fetch_add(1);
    }
  };
  const unsigned num_threads = std::clamp(std::thread::hardware_concurrency(), 1u, 64u);
  {
    std::vector<std::jthread> threads;
    for (unsigned t = 0; t < num_threads; ++t) threads.emplace_back(worker);
    while (finished.load() < n) {
      on_wait();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace

void make_dummy_weights(LoadedModel& model, uint64_t seed, bool show_progress) {
  const DType dtype = model.config.dtype;
  if (dtype != DType::kF32 && dtype != DType::kF16 && dtype != DType::kBF16)
    throw LoadError(model.source,
                    fmt::format("dummy weights need an F32, F16 or BF16 dtype, not {}", dtype_name(dtype)));
  const std::vector<WeightSlot> slots = weight_slots(model.config, model.weights);
  const size_t first = model.owned.size();
  model.owned.resize(first + slots.size());
  int64_t total_bytes = 0;
  for (const WeightSlot& slot : slots) {
    int64_t n = 1;
    for (int64_t d : slot.shape) n *= d;
    total_bytes += dtype_storage_bytes(dtype, n);
  }

  // Allocation zero-fills and page-faults every byte, which costs as much as generating the values, so it
  // runs in parallel too (one tensor per job).
  try {
    parallel_for(
        slots.size(),
        [&](size_t s) { model.owned[first + s] = HostTensor(dtype, std::span<const int64_t>(slots[s].shape)); },
        [] {});
  } catch (const std::bad_alloc&) {
    throw LoadError(model.source, fmt::format("out of memory allocating {:.2f} GiB of dummy weights",
                                              static_cast<double>(total_bytes) / (1 << 30)));
  }
  std::vector<Chunk> chunks;
  for (size_t s = 0; s < slots.size(); ++s) {
    slots[s].target->data = model.owned[first + s].view();
    const Tensor* t = &slots[s].target->data;
    for (int64_t b = 0; b < t->numel(); b += kChunkElems)
      chunks.push_back({t, s, b, std::min(b + kChunkElems, t->numel()), is_norm(slots[s].role)});
  }
  tie_lm_head(model.config, model.weights);

  ProgressBar bar("generating dummy weights", total_bytes, show_progress);
  std::atomic<int64_t> done_bytes{0};
  parallel_for(
      chunks.size(),
      [&](size_t i) {
        fill_chunk(chunks[i], seed);
        done_bytes += dtype_storage_bytes(dtype, chunks[i].end - chunks[i].begin);
      },
      [&] { bar.set(done_bytes.load()); });
  bar.finish();
}

}  // namespace pagoda
