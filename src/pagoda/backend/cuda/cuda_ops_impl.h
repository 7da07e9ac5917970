// CudaOps' private state, shared by its .cpp files (ops and steps, weight upload, device sampling).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <chrono>
#include <map>
#include <set>
#include <vector>

#include "pagoda/backend/cuda/cuda_ops.h"
#include "pagoda/backend/cuda/device_memory.h"
#include "pagoda/backend/cuda/fp8_gemm.h"
#include "pagoda/backend/cuda/step_inputs.h"
#include "pagoda/kernels/cuda_check.h"
#include "pagoda/kernels/elementwise.h"
#include "pagoda/kernels/quant_gemv_few_tokens.h"
#include "pagoda/kernels/sampling.h"

namespace pagoda {

// A decode graph: its graph set (run_step's graph_set: one per weight set) and padded batch size.
using GraphKey = std::pair<int, int>;

struct DecodeGraph {
  cudaGraphExec_t exec = nullptr;
  Tensor logits;  // [padded batch, vocab] in the workspace, as captured
};

// Optional timing of graph replays (PAGODA_CUDA_STEP_TIMING=1), for finding host gaps between steps. Two
// pairs of events take turns, so that reading one replay's time never waits for the replay in flight.
struct GraphTimer {
  GraphTimer();
  ~GraphTimer();
  void begin(cudaStream_t stream);
  void end(cudaStream_t stream);

  struct EventPair {
    cudaEvent_t start = nullptr, stop = nullptr;
    bool pending = false;  // recorded, not yet read
  };
  bool enabled = false;
  EventPair pairs[2];
  int next = 0;
  int64_t count = 0, num_timed = 0;
  double gpu_ms = 0, wall_ms = 0;
  std::chrono::steady_clock::time_point last_begin;
};

// Device sampling's buffers, in two slots that take turns (one waited for while the next is enqueued).
// A slot's device ids are read by the next step's placeholder tokens and copied to its pinned buffer on a
// stream of their own, so the next step's input copy and graph do not queue behind that copy; a slot is
// reused only after it was waited for, so a sample never overwrites ids a copy may still be reading.
struct DeviceSampling {
  struct Slot {
    cuda::PinnedBuffer host;  // [rows] SamplingRow, then [rows] int32 ids
    cuda::DeviceBuffer ids;   // [rows] int32: the tokens drawn
    cudaEvent_t sampled = nullptr;  // on the compute stream, after the sampling kernel
    cudaEvent_t done = nullptr;     // on copy_stream, after the ids reached `host`
    bool outstanding = false;       // enqueued, not yet waited for
  };
  ~DeviceSampling();
  // The next slot, in turn (it must not be outstanding), with its events made.
  int take_slot();

  Slot slots[2];
  int next_slot = 0;
  cudaStream_t copy_stream = nullptr;
  cuda::DeviceBuffer rows, workspace;
  std::vector<kernels::SamplingRow> uploaded;  // what `rows` holds: identical rows are not uploaded again
  int latest = -1;   // slot of the latest enqueue_sample: its ids are the placeholders' source
  int num_ids = 0;   // rows of the latest enqueue_sample
  const int32_t* latest_ids() const { return static_cast<const int32_t*>(slots[latest].ids.data()); }
};

struct CudaOps::Impl {
  explicit Impl(const CudaOpsOptions& options);
  ~Impl();

  void* arena_alloc(size_t bytes);
  // W8A8: x [T, K] as FP8 codes and per-token (or the static) scales, in the workspace: the ones the norm that
  // wrote x already made (normed_fp8), else quantized here.
  kernels::Fp8Activations quantize_input(const Tensor& x, const Weight& w);
  // For linear_add_rms_norm after an FP8 W8A8 linear with per-token inputs (the next linear takes its input the
  // same way in a W8A8 model): where the norm kernel is to write its output's codes, and remembers them.
  kernels::Fp8Activations quantize_in_norm(const Tensor& out, const Weight& linear);
  // linear_add_rms_norm with a reader: whether the norm can be left to the reader's kernel (the few-token quantized
  // GEMV on both sides, no column orders; PAGODA_DEFERRED_NORM=0 turns it off), and if so, w's GEMV adding x · w^T into
  // the residual (deferred_norm remembers the rest).
  bool defer_norm(Tensor residual, const Tensor& x, const Weight& w, const Tensor& out, const Weight& norm, float eps,
                  const Weight& reader);
  // Before an op of weight w reads x: if x is the deferred norm's output and w's few-token GEMV cannot normalise it
  // as it loads it, the norm writes x now (rms_norm of the residual, already added to).
  void settle_norm(const Tensor& x, const Weight& w);
  // Where w's few-token GEMV reads x: the deferred norm of x (then forgotten), or none (x as it is).
  kernels::NormedInput take_norm(const Tensor& x);
  // Room in the workspace for [rows, cols] e4m3 codes and their [rows] scales.
  kernels::Fp8Activations fp8_activations(int rows, int cols);
  // An FP8 W8A8 weight on cuBLASLt (more tokens than the GEMV takes): out [T, N] = the unscaled sums of x's codes
  // and w's, and the scales that make them the product, for the kernel that reads them. Other weights and shapes:
  // nothing done, null scales.
  kernels::ProductScales fp8_gemm_unscaled(Tensor out, const Tensor& x, const Weight& w);
  // x [T, K] as w reads it: x itself, or for an act-order weight with its columns sorted by group
  // (Weight::input_order), x[:, input_order] in the workspace.
  Tensor ordered_input(const Tensor& x, const Weight& w);
  void arena_reset();
  const float* device_inv_freq(const RopeParams& params);
  void drop_graphs();
  // Captures forward(batch) as the graph for `size` sequences; returns the logits it will write.
  Tensor capture(GraphKey key, const ForwardFn& forward, const ForwardBatch& batch);
  // Writes the staged batch's placeholder tokens from the latest device samples (async scheduling).
  void fill_placeholder_tokens(const ForwardBatch& host, const ForwardBatch& staged);

  CudaOpsOptions options;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  cuda::DeviceBuffer cublas_workspace;
  std::unique_ptr<cuda::Fp8Gemm> fp8_gemm;  // FP8 W8A8 GEMMs for many tokens (cuBLASLt, same workspace)

  // The workspace: a bump allocator over chunks, reset at every forward.
  std::vector<cuda::DeviceBuffer> chunks;
  size_t chunk = 0, chunk_used = 0, step_bytes = 0;
  bool capturing = false;
  // The codes a norm kernel made of its output, for the one linear that reads that output next (quantize_input);
  // forgotten when taken, at the next norm, and with the workspace.
  struct NormedFp8 {
    const void* source = nullptr;  // the norm's output [T, K]
    int rows = 0, cols = 0;
    kernels::Fp8Activations act;
  } normed_fp8;
  // A residual norm left to the GEMV that reads its output (defer_norm): `out` is not written; forgotten when taken
  // (take_norm) or written (settle_norm), at the next norm, and with the workspace.
  struct DeferredNorm {
    Tensor out;       // the norm's output [T, K], not written
    Tensor residual;  // [T, K], the residual after the add
    kernels::NormedInput input;
  } deferred_norm;
  bool graph_shapes = false;  // decode attention sized for max_model_len (graph capture and its warm-up)

  std::vector<cuda::DeviceBuffer> weight_storage;
  cuda::DeviceBuffer dequant_scratch;  // bf16 [N, K] of the largest tiled weight (CudaOps::linear, large T)
  std::map<const void*, cuda::DeviceBuffer> kv_storage;  // by the cache's first K pointer
  std::map<const float*, cuda::DeviceBuffer> inv_freq;   // RoPE tables, by host address

  cuda::StepInputs inputs;
  std::map<GraphKey, DecodeGraph> graphs;
  std::set<GraphKey> uncapturable;  // keys whose capture failed since graphs were last dropped
  GraphTimer timer;
  int last_graph_size = 0;

  cuda::PinnedBuffer download_staging;
  DeviceSampling sampling;
};

}  // namespace pagoda
