// Engine: the engine thread. It owns the scheduler (and through it the block manager and every
// sequence) and the model runner; other threads only submit, cancel and read stats. Events are
// delivered on the engine thread through each request's callback, which must not block. With async
// scheduling one step stays in flight: step N+1 is planned and launched before step N's tokens are
// collected and applied, so the host's work overlaps the device's.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "pagoda/engine/request.h"
#include "pagoda/model/llama_model.h"
#include "pagoda/runner/model_runner.h"
#include "pagoda/sched/scheduler.h"
#include "pagoda/sched/arrival_rate.h"
#include "pagoda/sched/batch_controller.h"
#include "pagoda/sched/late_planning.h"
#include "pagoda/sched/precision_fallback.h"
#include "pagoda/sched/step_time_model.h"

namespace pagoda {

struct EngineOptions {
  SchedulerConfig scheduler;
  int block_size = 16;
  int num_kv_blocks = 0;  // the KV pool, in blocks of block_size tokens
  std::optional<DType> kv_dtype{};  // the cache's dtype; unset: the backend's activation dtype
  Fp8KvScales fp8_kv_scales = Fp8KvScales::kPerRow;  // with an FP8 cache (kv/kv_cache.h)
  bool enable_prefix_caching = true;
  // Which cached block a full pool gives up (BlockManagerOptions); lru_k is read for kLruK only.
  EvictionPolicyKind kv_eviction = EvictionPolicyKind::kLru;
  LruKOptions lru_k{};
  int num_host_kv_blocks = 0;  // > 0: a host KV tier of this many blocks (kv/host_tier.h)
  PrefetchOptions kv_prefetch{};  // with a host tier: periodic prefixes brought back ahead (kv/prefix_history.h)
  std::vector<TokenId> eos_token_ids;  // stop unless ignore_eos
  uint64_t seed = 0;                   // for requests without a seed; 0: from std::random_device
  // Tokens in the start-up forward (threads, workspace, page cache). Small on the CPU, where a forward of
  // max_num_batched_tokens would take seconds on a 1B model; the GPU warms up at the largest shape.
  int warm_up_tokens = 16;
  // Plan and launch each step before collecting the previous one's tokens (outputs are the same; see
  // docs/ARCHITECTURE.md). Steps of requests with penalties or logprobs run one at a time regardless.
  bool async_scheduling = true;
  // Under async scheduling, plan the next step shortly before the step in flight is predicted to end instead of
  // as soon as it is launched (sched/late_planning.h), so that requests arriving meanwhile join the next step.
  // LLM turns it off with PAGODA_LATE_PLANNING=0 (a measurement knob).
  bool late_planning = true;
  // Fault injection for the reliability tests: every Nth step fails as if its forward had thrown (0: off;
  // LLM sets it from the environment variable PAGODA_INJECT_STEP_FAILURE).
  int fail_every_nth_step = 0;
  // Fault injection for the tests: the warm-up fails as an out-of-memory at start-up would (the constructor rethrows
  // it after the engine thread has ended).
  bool fail_warm_up = false;
  // The SLO-aware batch controller (sched/batch_controller.h): set, each step's token budget is its choice
  // within scheduler.max_num_batched_tokens; unset, the budget is max_num_batched_tokens. (The slo scheduling
  // policy reads its own copy, scheduler.slo.)
  std::optional<SloTargets> slo{};
  // The precision fallback's rule (sched/precision_fallback.h), used when the engine is given a fallback model.
  FallbackOptions fallback{};
};

// One engine step, as the engine thread saw it: its batch composition and where its time went. Under
// async scheduling a step is launched while the previous one still runs; its execution is counted from
// when that one's results were back, so the execute intervals of successive steps never overlap.
struct StepRecord {
  std::chrono::steady_clock::time_point start;  // schedule() began
  double schedule_seconds = 0;  // planning; the step was launched right after
  double queued_seconds = 0;    // from launch until the previous step's results were back (async scheduling)
  double execute_seconds = 0;   // then until this step's tokens were back: forward and sampling (the device's work)
  double total_seconds = 0;     // from start until its events were sent
  int prefill_tokens = 0;       // tokens of prompt chunks (and of recomputation after preemption)
  int decode_seqs = 0;          // sequences computing one new token
  int64_t decode_kv_tokens = 0; // KV entries the decode sequences' attention reads (their contexts)
  int64_t prefill_pairs = 0;    // (query, key) pairs of the prompt chunks' causal attention
  int num_seqs = 0;             // sequences in the step
  int num_preempted = 0;        // preempted while planning it
  int graph_batch_size = 0;     // padded CUDA graph batch replayed; 0: ran eagerly
  bool overlapped = false;      // launched while the previous step was still in flight (async scheduling)
  WeightSet weights = WeightSet::kPrimary;  // which weight set computed it (--fallback-quantization)
};

struct EngineStats {
  int num_running = 0;
  int num_waiting = 0;
  double kv_cache_usage = 0;  // fraction of blocks in use
  int num_kv_blocks = 0;
  int block_size = 0;
  DType kv_cache_dtype = DType::kF32;  // what the pool's blocks hold (kF8E4M3: kv/kv_fp8.h)
  uint64_t prefix_cache_queries = 0;  // tokens looked up
  uint64_t prefix_cache_hits = 0;     // tokens found
  uint64_t prefix_cache_host_hits = 0;  // of those, tokens copied back from the host tier
  int num_host_kv_blocks = 0;           // the host tier's capacity in blocks (0: none)
  int num_host_kv_blocks_used = 0;
  HostTierStats host_tier;              // its block movements since start-up
  PrefetchStats prefetch;               // blocks it brought back ahead of requests, and those hit
  uint64_t num_preemptions = 0;
  uint64_t batch_window_holds = 0;  // plans that held new requests in the batching window (--batch-wait-ms)
  uint64_t prompt_tokens = 0;      // prompt tokens of admitted requests
  uint64_t generation_tokens = 0;  // tokens sampled
  uint64_t num_steps = 0;
  double execute_seconds = 0;  // sum of StepRecord::execute_seconds: time the backend was busy (at most)
  StepRecord last_step;        // the latest step (all zero before the first)
  StepTimeModel::Snapshot step_time_model;  // what a step costs on this backend, learned from its steps
  // KV blocks held by each named tenant's running requests (Scheduler::blocks_by_tenant).
  std::vector<std::pair<std::string, int>> tenant_kv_blocks;
  // Per named tenant: its cached blocks evicted from the device and prefetched back, and those on the host.
  std::vector<std::pair<std::string, TenantBlockCounts>> tenant_block_counts;
  // Requests per second, an EWMA over about 5 s (sched/arrival_rate.h): all, and per tenant ("" for none).
  double arrival_rate = 0;
  std::map<std::string, double> tenant_arrival_rates;
  // The batch controller's latest decision (its token budget; all zero with the static controller).
  ControllerDecision batch_controller;
  // The precision fallback: whether the engine has a fallback weight set, its state, and the steps run on it.
  bool has_fallback = false;
  FallbackStats fallback;
  uint64_t fallback_steps = 0;
  StepTimeModel::Snapshot fallback_step_time_model;  // what a step costs on the fallback weights
};

class Engine {
 public:
  using EventCallback = std::function<void(const RequestEvent&)>;

  // `fallback_model`: the same model with quantized weights (--fallback-quantization); steps switch to it and
  // back by options.fallback's rule.
  Engine(const LlamaModel& model, Ops& ops, const EngineOptions& options, const LlamaModel* fallback_model = nullptr);
  ~Engine();  // stops the thread; unfinished requests get an "abort" event
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Thread-safe. A request that can never run is answered with an "error" event (on the engine thread).
  RequestId submit(GenerateRequest request, EventCallback on_event);
  // Thread-safe: submit() for each, at once. The engine sees them together, so an offline run plans the same steps
  // every time (as vLLM's LLM.generate, which adds every request before its first step); one at a time, the first
  // steps take however many had arrived, and on the GPU, whose kernels are not batch-invariant, near-ties of greedy
  // decoding then came out differently from run to run.
  struct Submission {
    GenerateRequest request;
    EventCallback on_event;
  };
  std::vector<RequestId> submit_all(std::vector<Submission> submissions);
  // Thread-safe. Throws pagoda::InvalidRequest for a request submit() would answer with an "error" event whatever
  // else runs (token ids outside the vocabulary, a prompt or max_tokens beyond the context, the KV pool or the
  // tenant's kv_cap): a server calls it before it commits to a response.
  void check(const GenerateRequest& request) const;
  // Thread-safe: Scheduler::max_sequence_tokens, what a request of this tenant may reach (a chat request's default
  // max_tokens is what is left of it after the prompt).
  int64_t max_sequence_tokens(const TenantKv& tenant) const;
  // Thread-safe: Scheduler::check_tenant (a kv_share larger than the kv_cap once both are blocks of this pool).
  void check_tenant(const TenantKv& tenant) const { scheduler_.check_tenant(tenant); }
  // Thread-safe; unknown or finished ids are ignored. The request ends with an "abort" event.
  void cancel(RequestId id);
  EngineStats stats() const;
  // Thread-safe. `fn` runs on the engine thread after every step (it must not block); empty: none.
  using StepObserver = std::function<void(const StepRecord&)>;
  void set_step_observer(StepObserver fn);
  // Thread-safe. Runs every step launched from now on the given weight set, whatever the fallback rule says
  // (tests and benchmarks); nullopt gives the choice back to the rule. kFallback needs a fallback model.
  void pin_weights(std::optional<WeightSet> weights);

 private:
  using Clock = std::chrono::steady_clock;
  struct Pending {
    RequestId id;
    GenerateRequest request;
    EventCallback on_event;
    Clock::time_point submitted_at;
  };
  struct Active {
    GenerateRequest request;
    EventCallback on_event;
    std::vector<TopLogprobs> prompt_logprobs;
    bool prompt_logprobs_sent = false;
    Clock::time_point submitted_at;
    double queue_seconds = -1;  // set when first scheduled, reported once
    bool queue_time_sent = false;
    RequestTimes times;
    Clock::time_point last_token_at;  // when its latest token was collected (inter-token latencies)
  };

  // A launched step whose tokens are not applied yet.
  struct LaunchedStep {
    StepPlan plan;
    InFlightStep run;
    StepRecord record;
    Clock::time_point launched_at;  // planning done, launch began
    Clock::time_point launch_returned_at;
    uint64_t number = 0;            // steps planned before it, this one included
    std::string prompt_chunks;      // with --log-level debug: its prompt chunks, logged when it completes
  };

  void run();
  void admit(Pending pending);
  // One turn of the loop: launch the next step, then complete the one before it (async scheduling), or
  // launch and complete the next step.
  void step();
  // Plans and launches the next step; empty when there is nothing to run or its launch failed.
  std::optional<LaunchedStep> launch_next();
  int controlled_budget();
  // Collects the step's tokens, applies them to the scheduler and sends the events.
  void complete(LaunchedStep& step);
  // The step failed as a whole: its requests that are still alive fail, the engine goes on with the rest.
  void fail_step(const StepPlan& plan, const std::exception& e);
  // Ends an admitted request with its last event.
  void finish(RequestId id, FinishReason reason, ErrorKind error_kind, std::string error, const Usage& usage);
  // A request's last event (finished = true).
  static RequestEvent final_event(RequestId id, FinishReason reason, ErrorKind error_kind, std::string error,
                                  const Usage& usage, const RequestTimes& times);
  Usage usage_of(const Sequence& seq) const;
  void publish_stats();
  void record_step(const StepRecord& record);  // completes the step's stats and tells the observer
  // Feeds the step's inter-token latencies to the precision fallback and applies its rule.
  void update_fallback(const StepRecord& record, const std::vector<double>& latencies,
                       const std::vector<double>& first_tokens, Clock::time_point now);
  // The step-time model of a weight set's steps, and of the set steps run on now.
  StepTimeModel& step_model(WeightSet weights);
  const StepTimeModel& step_model(WeightSet weights) const;
  const StepTimeModel& current_step_model() const;
  // With late planning: when to plan the next step while one is in flight; empty: at once.
  std::optional<Clock::time_point> late_plan_time() const;
  // Seconds from admission to the first token of a prompt of the recent mean length (Scheduler's deadline-first
  // admission).
  double first_token_estimate() const;

  const LlamaModel& model_;
  EngineOptions options_;
  Scheduler scheduler_;
  ModelRunner runner_;
  std::mt19937_64 seed_rng_;
  std::unordered_map<RequestId, Active> active_;  // engine thread only
  std::optional<LaunchedStep> in_flight_;         // engine thread only
  // Set when the last plan was empty because the batching window held new requests: when they go.
  std::optional<Clock::time_point> held_until_;   // engine thread only
  Clock::time_point last_step_done_;              // when the backend finished the latest completed step
  PlanLaunchTime plan_launch_time_;               // from planning's start to the launch returning (late planning's lead)

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Pending> inbox_;
  std::vector<RequestId> cancels_;
  bool stopping_ = false;
  EngineStats stats_;  // published copy, under mutex_
  uint64_t prompt_tokens_ = 0, generation_tokens_ = 0, num_steps_ = 0;
  uint64_t num_launched_ = 0;  // steps launched (fail_every_nth_step counts them)
  double execute_seconds_ = 0;
  StepRecord last_step_;
  StepTimeModel step_time_model_;           // the primary weights'
  StepTimeModel fallback_step_time_model_;  // the fallback weights'
  std::optional<PrecisionFallback> fallback_;  // with a fallback model
  std::optional<WeightSet> pinned_weights_;    // under mutex_ (pin_weights)
  WeightSet next_weights_ = WeightSet::kPrimary;
  uint64_t fallback_steps_ = 0;
  ArrivalRates arrival_rates_;
  std::optional<BatchController> controller_;  // --batch-controller adaptive
  ControllerDecision last_decision_;
  Clock::time_point started_at_ = Clock::now();
  StepObserver step_observer_;  // under mutex_
  std::atomic<RequestId> next_id_{1};
  std::thread thread_;
};

}  // namespace pagoda
