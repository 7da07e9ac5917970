// ModelRunner: executes a scheduler StepPlan on one backend: lays the step out as a ForwardBatch, runs
// the model, and samples each sampling sequence's row with that request's own parameters and random
// generator (so a seeded request draws the same tokens alone or batched). A step is launched, then
// collected: with device sampling nothing waits for the GPU in between, so the engine can plan the next
// step meanwhile (async scheduling). Engine thread only.
#pragma once

#include <optional>
#include <unordered_map>
#include <vector>

#include "pagoda/backend/ops.h"
#include "pagoda/model/llama_model.h"
#include "pagoda/runner/batch_builder.h"
#include "pagoda/runner/sampler.h"
#include "pagoda/runner/sampling_params.h"
#include "pagoda/sched/precision_fallback.h"
#include "pagoda/sched/step_plan.h"
#include "pagoda/structured/constraint.h"

namespace pagoda {

using TopLogprobs = std::vector<TokenLogprob>;

struct StepOutput {
  std::vector<TokenId> sampled;          // [plan.num_sampling()], plan order
  std::vector<TopLogprobs> logprobs;     // parallel to sampled; empty entries when not requested
  // Prompt-logprob entries that became available this step, per sequence (positions in order).
  std::unordered_map<SeqId, std::vector<TopLogprobs>> prompt_logprobs;
  // Sequences that could not be sampled as asked this step, and why: their output constraint gave up
  // (ConstraintMatcher::error(): a grammar too ambiguous to follow), or the request's masks (allowed_token_ids,
  // bad_words, the constraint's) left no token. Their text is not what the request asked for.
  std::unordered_map<SeqId, std::string> sampling_failures;
  int graph_batch_size = 0;  // padded batch size of the CUDA graph replayed for this step; 0: ran eagerly
};

// A launched step. Its output is complete unless its tokens are still being sampled on the device.
struct InFlightStep {
  StepOutput output;
  std::optional<PendingSample> device_sample;  // set: output.sampled comes from the device in collect()
};

class ModelRunner {
 public:
  // `num_host_blocks` > 0: host memory for that many blocks (the host KV tier's slots). `fallback`: the same
  // model with other weights (--fallback-quantization), which a step may run on instead; both share the KV cache.
  ModelRunner(const LlamaModel& model, Ops& ops, const KvCacheSpec& kv_spec, int num_host_blocks = 0,
              const LlamaModel* fallback = nullptr);
  ~ModelRunner();
  ModelRunner(const ModelRunner&) = delete;
  ModelRunner& operator=(const ModelRunner&) = delete;

  // Per-request sampling state, from admission until the request is gone.
  void add_request(SeqId seq_id, const SamplingParams& params, uint64_t seed, int num_prompt_tokens);
  void remove_request(SeqId seq_id);

  // Runs host-tier block copies (the plan's; launch() runs them first itself). The work stays ordered after
  // the previous step and before the next.
  void copy_kv_blocks(const KvTransfers& transfers);
  // Starts the step: runs its host-tier copies, lays out its batch, enqueues the forward and, when every row can be drawn on the
  // device, the sampling; otherwise samples on the host before returning. A chunk whose last input is a
  // placeholder takes it from the previous launched step's samples, so call launch() in plan order.
  // The plan's sequences are read here only, never in collect(). `weights`: which model computes the step (the
  // fallback only when the runner has one).
  InFlightStep launch(const StepPlan& plan, WeightSet weights = WeightSet::kPrimary);
  // Waits for the step's tokens (a no-op when they were sampled on the host).
  StepOutput collect(InFlightStep& step);
  // Whether collect() would return at once. Does not wait.
  bool ready(const InFlightStep& step) const { return !step.device_sample || ops_.sample_ready(*step.device_sample); }
  // launch + collect.
  StepOutput execute(const StepPlan& plan, WeightSet weights = WeightSet::kPrimary);
  bool has_fallback() const { return fallback_ != nullptr; }

  // True while some request needs the host to see every earlier token before its next one is sampled
  // (penalties) or reports logprobs: its steps then run one at a time, none planned ahead.
  bool needs_synchronous_steps() const { return num_synchronous_requests_ > 0; }

  // Runs one forward of `num_tokens` tokens (capped by the KV pool) so that threads start, the workspace
  // grows to its largest size and caches warm before the first request, then lets the backend prepare
  // its decode steps (CUDA graphs); leaves no state behind. With a fallback model, for both.
  void warm_up(int num_tokens);
  // The largest step this runner can be asked for: `num_tokens` tokens with logits for every row, and the
  // largest decode step; no graphs. Run with a small KV cache to measure the peak memory of the backend.
  // With a fallback model, for both.
  void profile_run(int num_tokens);

  const KvCacheSpec& kv_spec() const { return kv_cache_.spec; }

 private:
  void forget_kv_calibration();
  struct RequestState {
    SamplingParams params;
    SamplerRng rng;
    uint64_t device_seed = 0;  // the request's seed for device sampling
    int num_prompt_tokens = 0;
    int next_prompt_logprob = 1;  // first prompt position whose entry is still owed (entry 0 is null)
    std::unique_ptr<structured::ConstraintMatcher> matcher;  // where the output is in its constraint's grammar
    bool failure_logged = false;
  };

  // Where the previous launched step's sampled tokens are: each sampling sequence's row, and the ids
  // themselves when they were sampled on the host.
  struct PreviousSamples {
    std::unordered_map<SeqId, int> row_of;
    std::vector<TokenId> host_ids;  // [rows] when sampled on the host; empty when on the device
    bool on_device = false;
  };

  // One forward of `num_tokens` zero tokens in a single sequence over blocks 0, 1, ...
  void run_filler_step(const LlamaModel& model, int num_tokens, LogitsWanted logits);
  // The models a step may run on: the primary, then the fallback when there is one.
  std::vector<std::pair<const LlamaModel*, WeightSet>> models() const;
  ForwardFn forward_of(const LlamaModel& model);
  // Whether every sampling row of a step can be drawn on the device (no penalties, no logprobs).
  bool can_sample_on_device(const StepPlan& plan) const;
  void sample_on_device(const StepPlan& plan, Tensor logits, InFlightStep& step);
  void sample_on_host(const StepPlan& plan, Tensor logits, const std::vector<int>& first_row, InFlightStep& step);

  const LlamaModel& model_;
  const LlamaModel* fallback_;
  Ops& ops_;
  KvCache kv_cache_;
  KvHostStore kv_host_;  // the host tier's slots (empty without one)
  BatchBuilder builder_;
  std::unordered_map<SeqId, RequestState> requests_;
  int num_synchronous_requests_ = 0;
  PreviousSamples previous_samples_;
  std::vector<SequenceChunk> chunks_;
  std::vector<float> host_logits_;
  std::vector<float> row_;
  std::vector<DeviceSamplingRow> device_rows_;
};

}  // namespace pagoda
