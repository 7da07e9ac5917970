// Parallel, seeded random fill of every weight a config needs. Work is cut into fixed-size chunks, each with
// its own RNG stream keyed by (seed, tensor, chunk), so results do not depend on scheduling. Quantized
// linears (--quantization) are filled by dummy_quant_weights.cpp, in chunks of whole rows.
#include "pagoda/loader/dummy_weights.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

#include "pagoda/core/error.h"
#include "pagoda/loader/dummy_random.h"
#include "pagoda/loader/progress_bar.h"
#include "pagoda/loader/weight_mapping.h"

namespace pagoda {
namespace {

using dummy::approx_normal;
using dummy::splitmix64;

constexpr int64_t kChunkElems = int64_t{1} << 18;
constexpr float kStddev = 0.02f;

template <typename T, typename Convert>
void fill(T* out, int64_t begin, int64_t end, uint64_t state, bool norm, Convert convert) {
  if (norm) {
    std::fill(out + begin, out + end, convert(1.0f));
    return;
  }
  for (int64_t i = begin; i < end; ++i) out[i] = convert(kStddev * approx_normal(splitmix64(state)));
}

// A piece of one weight's fill: elements [begin, end) of an unquantized weight's data, or rows [begin, end) of a
// quantized one (codes, scales and zeros together).
struct Chunk {
  const Weight* weight;
  uint64_t tensor_index;
  int64_t begin, end;
  bool norm;
  int64_t bytes;  // what the progress bar counts
};

void fill_chunk(const Chunk& c, const DummyQuant& quant, uint64_t seed) {
  // A stream per (seed, tensor, chunk start): the same weights whichever thread fills the chunk.
  const uint64_t state = dummy::chunk_stream(seed, c.tensor_index, c.begin);
  if (c.weight->quantized()) return fill_dummy_quant_rows(*c.weight, quant, c.begin, c.end, state);
  const Tensor& t = c.weight->data;
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

void make_dummy_weights(LoadedModel& model, const DummyQuant& quant, uint64_t seed, bool show_progress) {
  const DType dtype = model.config.dtype;
  if (dtype != DType::kF32 && dtype != DType::kF16 && dtype != DType::kBF16)
    throw LoadError(model.source,
                    fmt::format("dummy weights need an F32, F16 or BF16 dtype, not {}", dtype_name(dtype)));
  const std::vector<WeightSlot> slots = weight_slots(model.config, model.weights);
  // Every tensor to allocate: a weight's data in the config dtype, or a quantized linear's codes, scales and
  // zeros (whose layout also sets the Weight's scheme fields, and checks K against the group size).
  std::vector<DummyTensorSpec> specs;
  for (const WeightSlot& slot : slots) {
    if (quant.scheme != QuantScheme::kNone && is_linear(slot.role)) {
      for (DummyTensorSpec& spec : dummy_quant_layout(quant, model.source, hf_weight_name(slot), slot.shape[0],
                                                      slot.shape[1], *slot.target))
        specs.push_back(std::move(spec));
    } else {
      specs.push_back({&slot.target->data, dtype, slot.shape});
    }
  }
  int64_t total_bytes = 0;
  for (const DummyTensorSpec& spec : specs) {
    int64_t n = 1;
    for (int64_t d : spec.shape) n *= d;
    total_bytes += dtype_storage_bytes(spec.dtype, n);
  }

  // Allocation zero-fills and page-faults every byte, which costs as much as generating the values, so it
  // runs in parallel too (one tensor per job).
  const size_t first = model.owned.size();
  model.owned.resize(first + specs.size());
  try {
    parallel_for(
        specs.size(),
        [&](size_t i) {
          model.owned[first + i] = HostTensor(specs[i].dtype, std::span<const int64_t>(specs[i].shape));
        },
        [] {});
  } catch (const std::bad_alloc&) {
    throw LoadError(model.source, fmt::format("out of memory allocating {:.2f} GiB of dummy weights",
                                              static_cast<double>(total_bytes) / (1 << 30)));
  }
  for (size_t i = 0; i < specs.size(); ++i) *specs[i].target = model.owned[first + i].view();

  std::vector<Chunk> chunks;
  for (size_t s = 0; s < slots.size(); ++s) {
    const Weight* w = slots[s].target;
    if (w->quantized()) {  // whole rows, about kChunkElems values each
      const int64_t rows = w->num_rows(), step = std::max<int64_t>(1, kChunkElems / w->in_features);
      const int64_t row_bytes = w->nbytes() / rows;
      for (int64_t r = 0; r < rows; r += step) {
        const int64_t end = std::min(r + step, rows);
        chunks.push_back({w, s, r, end, false, (end - r) * row_bytes});
      }
      continue;
    }
    const int64_t numel = w->data.numel();
    for (int64_t b = 0; b < numel; b += kChunkElems) {
      const int64_t end = std::min(b + kChunkElems, numel);
      chunks.push_back({w, s, b, end, is_norm(slots[s].role), dtype_storage_bytes(dtype, end - b)});
    }
  }
  tie_lm_head(model.config, model.weights);

  ProgressBar bar("generating dummy weights", total_bytes, show_progress);
  std::atomic<int64_t> done_bytes{0};
  parallel_for(
      chunks.size(),
      [&](size_t i) {
        fill_chunk(chunks[i], quant, seed);
        done_bytes += chunks[i].bytes;
      },
      [&] { bar.set(done_bytes.load()); });
  bar.finish();
}

}  // namespace pagoda
