// The engine thread: drain submissions and cancellations, schedule and launch a step, collect the previous
// one (async scheduling) or this one, update, emit events.
#include "pagoda/engine/engine.h"

#include <algorithm>
#include <future>
#include <utility>

#include "pagoda/core/error.h"
#include "pagoda/core/logging.h"

namespace pagoda {
namespace {

BlockManagerOptions kv_options(const EngineOptions& o) {
  return BlockManagerOptions{.num_blocks = o.num_kv_blocks, .block_size = o.block_size,
                             .enable_prefix_caching = o.enable_prefix_caching, .eviction_policy = o.kv_eviction,
                             .lru_k = o.lru_k, .num_host_blocks = o.num_host_kv_blocks, .prefetch = o.kv_prefetch};
}

// What the step-time model sees of a step.
StepShape shape_of(const StepRecord& r) { return {r.prefill_tokens, r.decode_seqs, r.decode_kv_tokens, r.prefill_pairs}; }

// How often late planning looks whether the step in flight is done already (Engine::run).
constexpr std::chrono::microseconds kLatePlanPoll{500};

bool contains(const std::vector<TokenId>& ids, TokenId id) { return std::find(ids.begin(), ids.end(), id) != ids.end(); }

double seconds_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// A one-token chunk past the prompt is a decode; anything else (prompt chunks, recomputation after a
// preemption) is prefill work.
bool is_decode(const ScheduledSequence& s) { return s.num_tokens == 1 && s.start_position >= s.seq->num_prompt_tokens; }

KvCacheSpec engine_kv_spec(const LlamaModel& model, const Ops& ops, const EngineOptions& options) {
  KvCacheSpec spec = model.kv_cache_spec(options.num_kv_blocks, options.block_size,
                                         options.kv_dtype.value_or(ops.activation_dtype()));
  spec.fp8_scales = options.fp8_kv_scales;
  return spec;
}

}  // namespace

Engine::Engine(const LlamaModel& model, Ops& ops, const EngineOptions& options, const LlamaModel* fallback_model)
    : model_(model),
      options_(options),
      scheduler_(options.scheduler, kv_options(options)),
      runner_(model, ops, engine_kv_spec(model, ops, options), options.num_host_kv_blocks, fallback_model),
      seed_rng_(options.seed != 0 ? options.seed : std::random_device{}()) {
  if (options.slo) controller_.emplace(*options.slo, options.scheduler.max_num_batched_tokens);
  if (fallback_model) fallback_.emplace(options.fallback);
  // The loader may have run kernels on this thread; the steps run on thread_, which warms up first, so that what
  // a backend keeps per thread (the CPU kernels' scratch, the sampler's) is the steps' own
  // before the first request: on 2 vCPUs, a first 256-token prompt of stories260K ran 10-38 ms when the engine's
  // OpenMP workers started with it, against 5.3-5.7 ms a prompt after (docs/PERFORMANCE.md). A warm-up failure
  // (out of memory) is rethrown here.
  ops.release_calling_thread();
  std::promise<void> warmed;
  std::future<void> warm_up_done = warmed.get_future();
  thread_ = std::thread([this, warmed = std::move(warmed)]() mutable {  // the thread owns the promise it sets
    try {
      if (options_.fail_warm_up) throw Error("injected failure of the warm-up (EngineOptions::fail_warm_up)");
      runner_.warm_up(std::min(options_.warm_up_tokens, options_.scheduler.max_num_batched_tokens));
      publish_stats();
    } catch (...) {
      warmed.set_exception(std::current_exception());
      return;
    }
    warmed.set_value();
    run();
  });
  try {
    warm_up_done.get();
  } catch (...) {
    thread_.join();
    throw;
  }
}

Engine::~Engine() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

RequestId Engine::submit(GenerateRequest request, EventCallback on_event) {
  std::vector<Submission> one;
  one.push_back({std::move(request), std::move(on_event)});
  return submit_all(std::move(one)).front();
}

std::vector<RequestId> Engine::submit_all(std::vector<Submission> submissions) {
  std::vector<RequestId> ids;
  ids.reserve(submissions.size());
  {
    std::lock_guard lock(mutex_);
    const Clock::time_point now = Clock::now();
    for (Submission& s : submissions) {
      ids.push_back(next_id_.fetch_add(1));
      inbox_.push_back(Pending{ids.back(), std::move(s.request), std::move(s.on_event), now});
    }
  }
  wake_.notify_one();
  return ids;
}

void Engine::cancel(RequestId id) {
  {
    std::lock_guard lock(mutex_);
    cancels_.push_back(id);
  }
  wake_.notify_one();
}

EngineStats Engine::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void Engine::set_step_observer(StepObserver fn) {
  std::lock_guard lock(mutex_);
  step_observer_ = std::move(fn);
}

void Engine::pin_weights(std::optional<WeightSet> weights) {
  if (weights == WeightSet::kFallback && !fallback_) throw Error("no fallback weight set to pin (--fallback-quantization)");
  std::lock_guard lock(mutex_);
  pinned_weights_ = weights;
}

// A prompt of the recent mean length admitted now: the steps its chunks take at the latest step's decode load,
// as the step-time model predicts them; 0 until the model can tell.
double Engine::first_token_estimate() const {
  const StepTimeModel& model = current_step_model();
  const double prompt = arrival_rates_.mean_prompt_tokens();
  if (model.snapshot().num_steps < BatchController::kMinModelSteps || prompt <= 0) return 0;
  const int64_t budget = std::max<int64_t>(1, options_.scheduler.max_num_batched_tokens - last_step_.decode_seqs);
  const int64_t tokens = static_cast<int64_t>(prompt);
  const int64_t steps = (tokens + budget - 1) / budget;
  const int64_t chunk = std::min(tokens, budget);
  const double step = model.predict(StepShape{chunk, last_step_.decode_seqs, last_step_.decode_kv_tokens, chunk * (chunk + 1) / 2});
  return static_cast<double>(steps) * std::max(step, 0.0);
}

std::optional<Engine::Clock::time_point> Engine::late_plan_time() const {
  // Only a step still on the device is worth waiting for (one sampled on the host was done when its launch returned).
  if (!options_.late_planning || !in_flight_ || !in_flight_->run.device_sample) return std::nullopt;
  const StepRecord& r = in_flight_->record;
  const StepTimeModel& model = step_model(r.weights);
  const StepTimeModel::Snapshot snap = model.snapshot();
  if (snap.num_steps < BatchController::kMinModelSteps) return std::nullopt;
  const std::optional<double> after = LatePlanning::plan_after(
      {.predicted_seconds = model.predict(shape_of(r)),
       .relative_error = snap.relative_error,
       .plan_launch_seconds = plan_launch_time_.seconds()});
  if (!after) return std::nullopt;
  // It started on the device when the step before it was done (or when launched, if that was later).
  const Clock::time_point started = std::max(in_flight_->launched_at, last_step_done_);
  return started + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(*after));
}

StepTimeModel& Engine::step_model(WeightSet weights) {
  return weights == WeightSet::kFallback ? fallback_step_time_model_ : step_time_model_;
}

const StepTimeModel& Engine::step_model(WeightSet weights) const {
  return weights == WeightSet::kFallback ? fallback_step_time_model_ : step_time_model_;
}

const StepTimeModel& Engine::current_step_model() const { return step_model(next_weights_); }

void Engine::run() {
  while (true) {
    std::deque<Pending> inbox;
    std::vector<RequestId> cancels;
    {
      std::unique_lock lock(mutex_);
      const auto news = [&] { return stopping_ || !inbox_.empty() || !cancels_.empty(); };
      if (held_until_ && !in_flight_) {  // only requests held in the batching window: until it ends or more arrive
        wake_.wait_until(lock, *held_until_, news);
      } else if (const std::optional<Clock::time_point> plan_at = late_plan_time()) {
        // Arrivals meanwhile join the next step. The wait ends early when the step in flight is done (a prediction
        // that was too long must not leave the device idle): it looks every kLatePlanPoll.
        while (!stopping_ && Clock::now() < *plan_at && !runner_.ready(in_flight_->run))
          wake_.wait_until(lock, std::min(*plan_at, Clock::now() + kLatePlanPoll), [&] { return stopping_; });
      } else {
        wake_.wait(lock, [&] { return news() || scheduler_.has_unfinished() || in_flight_; });
      }
      if (stopping_) break;
      inbox.swap(inbox_);
      cancels.swap(cancels_);
    }
    for (Pending& p : inbox) admit(std::move(p));
    for (RequestId id : cancels) {
      const Sequence* seq = scheduler_.find(id);
      if (seq == nullptr || !active_.count(id)) continue;
      const Usage usage = usage_of(*seq);
      (void)scheduler_.abort(id);
      finish(id, FinishReason::kAborted, ErrorKind::kNone, "", usage);
    }
    if (scheduler_.has_unfinished() || in_flight_) step();
    publish_stats();
  }
  // Shutting down: the step in flight is waited for (the device may still use the KV cache); its tokens
  // are dropped, since every request left ends with "abort" below.
  if (in_flight_) {
    try {
      (void)runner_.collect(in_flight_->run);
    } catch (const std::exception& e) {
      spdlog::error("step failed: {}", e.what());
    }
    in_flight_.reset();
  }
  // Shutting down: every unfinished request is told, including those never admitted.
  std::deque<Pending> never_admitted;
  {
    std::lock_guard lock(mutex_);
    never_admitted.swap(inbox_);
  }
  for (Pending& p : never_admitted)
    p.on_event(final_event(p.id, FinishReason::kAborted, ErrorKind::kNone, "",
                           Usage{.prompt_tokens = static_cast<int>(p.request.prompt_ids.size())}, RequestTimes{.queued = p.submitted_at}));
  std::vector<RequestId> ids;
  for (const auto& [id, active] : active_) ids.push_back(id);
  for (RequestId id : ids) {
    const Sequence* seq = scheduler_.find(id);
    const Usage usage = seq ? usage_of(*seq) : Usage{};
    (void)scheduler_.abort(id);
    finish(id, FinishReason::kAborted, ErrorKind::kNone, "", usage);
  }
}

namespace {

SequenceRequest sequence_request(RequestId id, const GenerateRequest& r, double submitted_s) {
  return SequenceRequest{.seq_id = id, .prompt_token_ids = r.prompt_ids, .max_tokens = r.params.max_tokens,
                         .priority = r.priority, .cache_salt = r.cache_salt, .tenant = r.tenant,
                         .reads_prefix_cache = r.params.prompt_logprobs < 0, .submitted_s = submitted_s};
}

}  // namespace

void Engine::check(const GenerateRequest& request) const {
  const int vocab = model_.config().vocab_size;
  for (TokenId t : request.prompt_ids)
    if (t < 0 || t >= vocab) throw InvalidRequest(fmt::format("token id {} is outside the vocabulary ({})", t, vocab));
  for (const auto& [t, bias] : request.params.logit_bias)
    if (t < 0 || t >= vocab)
      throw InvalidRequest(fmt::format("logit_bias: token id {} is outside the vocabulary ({})", t, vocab));
  if (const TokenMasks* masks = request.params.token_masks.get()) {
    const std::vector<TokenId>& allowed = masks->allowed;
    for (size_t i = 0; i < allowed.size(); ++i) {
      if (allowed[i] < 0 || allowed[i] >= vocab)
        throw InvalidRequest(fmt::format("allowed_token_ids: token id {} is outside the vocabulary ({})", allowed[i], vocab));
      if (i > 0 && allowed[i] <= allowed[i - 1]) throw InvalidRequest("allowed_token_ids: ids must ascend, each once");
    }
    for (const std::vector<TokenId>& word : masks->bad_words)
      for (TokenId t : word)
        if (t < 0 || t >= vocab)
          throw InvalidRequest(fmt::format("bad_words: token id {} is outside the vocabulary ({})", t, vocab));
  }
  scheduler_.check(std::ssize(request.prompt_ids), request.params.max_tokens, request.tenant);
}

int64_t Engine::max_sequence_tokens(const TenantKv& tenant) const { return scheduler_.max_sequence_tokens(tenant); }

void Engine::admit(Pending p) {
  const int num_prompt = static_cast<int>(p.request.prompt_ids.size());
  try {
    check(p.request);  // (add() repeats the scheduler's part of it: a few comparisons)
    // The submission time on the scheduler's clock (Scheduler::steady_seconds): the slo policy's TTFT counts
    // the time in the inbox too.
    scheduler_.add(sequence_request(p.id, p.request, std::chrono::duration<double>(p.submitted_at.time_since_epoch()).count()));
  } catch (const Error& e) {
    p.on_event(final_event(p.id, FinishReason::kError, ErrorKind::kInvalidRequest, e.what(),
                           Usage{.prompt_tokens = num_prompt}, RequestTimes{.queued = p.submitted_at}));
    return;
  }
  runner_.add_request(p.id, p.request.params, seed_rng_(), num_prompt);
  arrival_rates_.arrive(seconds_between(started_at_, p.submitted_at), p.request.tenant.name, num_prompt);
  prompt_tokens_ += static_cast<uint64_t>(num_prompt);
  Active a;
  a.request = std::move(p.request);
  a.on_event = std::move(p.on_event);
  a.submitted_at = p.submitted_at;
  a.times.queued = p.submitted_at;
  active_.emplace(p.id, std::move(a));
}

void Engine::step() {
  const bool overlap = options_.async_scheduling && !runner_.needs_synchronous_steps();
  std::optional<LaunchedStep> previous = std::exchange(in_flight_, std::nullopt);
  if (!overlap && previous) {  // the next plan must see every token
    complete(*previous);
    previous.reset();
  }
  std::optional<LaunchedStep> next = launch_next();
  if (next && previous) next->record.overlapped = true;
  if (previous) complete(*previous);  // while `next` runs on the device
  if (!next) return;
  if (overlap) {
    in_flight_ = std::move(next);
  } else {
    complete(*next);
  }
}

// The batch controller's budget for the step planned now (sched/batch_controller.h has the rule).
int Engine::controlled_budget() {
  Scheduler::Load load = scheduler_.load();
  ControllerInputs in{.decode_seqs = load.decode_seqs,
                      .decode_kv_tokens = load.decode_kv_tokens,
                      .decoding = std::move(load.decoding)};
  last_decision_ = controller_->decide(current_step_model(), in);
  return last_decision_.token_budget;
}

std::optional<Engine::LaunchedStep> Engine::launch_next() {
  LaunchedStep step;
  StepRecord& record = step.record;
  record.start = Clock::now();
  {
    std::lock_guard lock(mutex_);
    next_weights_ = pinned_weights_ ? *pinned_weights_ : fallback_ ? fallback_->current() : WeightSet::kPrimary;
  }
  if (scheduler_.uses_first_token_estimate()) scheduler_.set_first_token_estimate(first_token_estimate());
  step.plan = controller_ ? scheduler_.schedule(controlled_budget()) : scheduler_.schedule();
  held_until_.reset();
  if (step.plan.empty()) {
    runner_.copy_kv_blocks(step.plan.kv_transfers);  // a prefetch planned while nothing could run
    if (const std::optional<double> until = scheduler_.held_until())  // the scheduler's clock is steady_clock's
      held_until_ = Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(*until)));
    return std::nullopt;
  }
  ++num_steps_;
  step.number = num_steps_;
  record.weights = next_weights_;
  if (record.weights == WeightSet::kFallback) ++fallback_steps_;
  step.launched_at = Clock::now();
  record.schedule_seconds = seconds_between(record.start, step.launched_at);
  record.num_seqs = static_cast<int>(step.plan.seqs.size());
  record.num_preempted = static_cast<int>(step.plan.preempted.size());
  const bool log_steps = spdlog::should_log(spdlog::level::debug);  // each step's composition, when it completes
  for (const ScheduledSequence& s : step.plan.seqs) {
    Active& a = active_.at(s.seq_id);
    if (a.queue_seconds < 0) {
      a.queue_seconds = seconds_between(a.submitted_at, step.launched_at);
      a.times.scheduled = step.launched_at;
    }
    if (is_decode(s)) {
      ++record.decode_seqs;
      record.decode_kv_tokens += s.start_position + 1;
    } else {
      if (log_steps) step.prompt_chunks += fmt::format("{}{} {}@{}", step.prompt_chunks.empty() ? "" : ", ",
                                                       s.seq->tenant.name.empty() ? "-" : s.seq->tenant.name,
                                                       s.num_tokens, s.start_position);
      record.prefill_tokens += s.num_tokens;
      record.prefill_pairs += static_cast<int64_t>(s.num_tokens) * s.start_position +
                              static_cast<int64_t>(s.num_tokens) * (s.num_tokens + 1) / 2;
    }
  }
  for (SeqId id : step.plan.preempted) {
    auto it = active_.find(id);
    if (it != active_.end()) ++it->second.times.num_preemptions;
  }
  try {
    if (options_.fail_every_nth_step > 0 && ++num_launched_ % options_.fail_every_nth_step == 0)
      throw Error(fmt::format("injected failure of step {} (PAGODA_INJECT_STEP_FAILURE)", num_launched_));
    step.run = runner_.launch(step.plan, record.weights);
    step.launch_returned_at = Clock::now();
    plan_launch_time_.observe(seconds_between(record.start, step.launch_returned_at));
  } catch (const std::exception& e) {
    fail_step(step.plan, e);
    record.execute_seconds = record.total_seconds = seconds_between(step.launched_at, Clock::now());
    record_step(record);
    return std::nullopt;
  }
  return step;
}

void Engine::fail_step(const StepPlan& plan, const std::exception& e) {
  spdlog::error("step failed: {}", e.what());
  for (const ScheduledSequence& s : plan.seqs) {
    const Sequence* seq = scheduler_.find(s.seq_id);
    if (seq == nullptr) continue;  // finished or aborted since planned
    const Usage usage = usage_of(*seq);
    (void)scheduler_.abort(s.seq_id);
    finish(s.seq_id, FinishReason::kError, ErrorKind::kInternal, std::string("internal error: ") + e.what(), usage);
  }
  // Blocks published for this step were never computed: forget every cached block not in use.
  scheduler_.block_manager().reset_prefix_cache();
}

void Engine::complete(LaunchedStep& step) {
  StepRecord& record = step.record;
  const bool sampling_on_device = step.run.device_sample.has_value();
  StepOutput out;
  try {
    out = runner_.collect(step.run);
  } catch (const std::exception& e) {
    fail_step(step.plan, e);
    last_step_done_ = Clock::now();
    record.execute_seconds = record.total_seconds = seconds_between(step.launched_at, last_step_done_);
    record_step(record);
    return;
  }
  const Clock::time_point collected_at = Clock::now();
  // The backend finished the step when its tokens were back, or within launch() when it sampled on the
  // host. It ran after the previous step: its execution starts when that one was done.
  const Clock::time_point done_at = sampling_on_device ? collected_at : step.launch_returned_at;
  const Clock::time_point device_start = std::min(std::max(step.launched_at, last_step_done_), done_at);
  last_step_done_ = done_at;
  record.queued_seconds = seconds_between(step.launched_at, device_start);
  record.execute_seconds = seconds_between(device_start, done_at);
  record.graph_batch_size = out.graph_batch_size;
  execute_seconds_ += record.execute_seconds;
  step_model(record.weights).update(shape_of(record), record.execute_seconds);
  for (auto& [id, entries] : out.prompt_logprobs) {
    const auto it = active_.find(id);
    if (it == active_.end()) continue;
    auto& dst = it->second.prompt_logprobs;
    if (dst.empty()) dst.emplace_back();  // entry 0: nothing predicts the first prompt token
    for (auto& e : entries) dst.push_back(std::move(e));
  }

  const auto stop = [&](const Sequence& seq) {
    const SamplingParams& p = active_.at(seq.seq_id).request.params;
    const TokenId t = seq.token_ids.back();
    return (!p.ignore_eos && contains(options_.eos_token_ids, t)) || contains(p.stop_token_ids, t);
  };
  // Tokens of requests that finished or were cancelled since this step was planned are dropped here.
  const std::vector<SequenceOutput> outputs = scheduler_.update(step.plan, out.sampled, stop);
  generation_tokens_ += outputs.size();

  // For the precision fallback, each output token after a request's first: on the primary weights its request's time
  // per output token so far (the SLO's measure: a step longer than the target that the request's earlier steps left
  // time for, as the batch controller grants, is no miss), on the fallback its own inter-token latency (judged as the
  // primary would have served it); and first-token latencies.
  std::vector<double> latencies, first_tokens;
  for (const SequenceOutput& o : outputs) {
    Active& a = active_.at(o.seq_id);
    if (o.num_output_tokens >= 2 && fallback_) {
      latencies.push_back(record.weights == WeightSet::kPrimary
                              ? seconds_between(a.times.prefill_done, collected_at) / (o.num_output_tokens - 1)
                              : seconds_between(a.last_token_at, collected_at));
    }
    if (o.num_output_tokens == 1 && fallback_) first_tokens.push_back(seconds_between(a.submitted_at, collected_at));
    a.last_token_at = collected_at;
    if (record.weights == WeightSet::kFallback) ++a.times.fallback_tokens;
  }
  if (fallback_) update_fallback(record, latencies, first_tokens, collected_at);

  // Stats first, so that a client woken by its final event sees the engine as it is after this step.
  publish_stats();
  for (const SequenceOutput& o : outputs) {
    auto it = active_.find(o.seq_id);
    Active& a = it->second;
    RequestEvent event;
    event.request_id = o.seq_id;
    event.new_token_ids.push_back(o.token);
    if (a.request.params.logprobs >= 0) event.logprobs.push_back(std::move(out.logprobs[o.sample_index]));
    if (a.request.params.prompt_logprobs >= 0 && !a.prompt_logprobs_sent) {
      if (a.prompt_logprobs.empty()) a.prompt_logprobs.emplace_back();  // a one-token prompt
      event.prompt_logprobs = std::move(a.prompt_logprobs);
      a.prompt_logprobs_sent = true;
    }
    event.usage = Usage{o.num_prompt_tokens, o.num_output_tokens, o.num_cached_tokens};
    if (o.num_output_tokens == 1) a.times.prefill_done = collected_at;
    event.time = collected_at;
    event.times = a.times;
    if (!a.queue_time_sent) {
      event.queue_seconds = a.queue_seconds;
      a.queue_time_sent = true;
    }
    // A request that could not be sampled as asked (ModelRunner: too ambiguous a grammar, or masks that leave no
    // token) ends as an error: the text so far is not what was asked for, and "stop" would present it as if it were.
    const auto failed = out.sampling_failures.find(o.seq_id);
    if (o.finish_reason == FinishReason::kNone && failed == out.sampling_failures.end()) {
      a.on_event(event);
      continue;
    }
    event.finished = true;
    event.finish_reason = o.finish_reason;
    if (failed != out.sampling_failures.end()) {
      if (o.finish_reason == FinishReason::kNone) (void)scheduler_.abort(o.seq_id);
      event.finish_reason = FinishReason::kError;
      event.error_kind = ErrorKind::kInvalidRequest;
      event.error = failed->second;
    }
    const EventCallback on_event = std::move(a.on_event);
    runner_.remove_request(o.seq_id);
    active_.erase(it);
    on_event(event);
  }
  record.total_seconds = seconds_between(record.start, Clock::now());
  record_step(record);
  if (spdlog::should_log(spdlog::level::debug))  // a scheduling trace: prompt chunks as tenant tokens@start
    spdlog::debug("step {}: planned in {:.2f} ms, launched in {:.2f} ms, {:.1f} ms before it ran, ran {:.1f} ms; {} decodes, "
                  "{} prompt tokens [{}]", step.number, record.schedule_seconds * 1e3,
                  seconds_between(step.launched_at, step.launch_returned_at) * 1e3, record.queued_seconds * 1e3,
                  record.execute_seconds * 1e3, record.decode_seqs, record.prefill_tokens, step.prompt_chunks);
}

void Engine::update_fallback(const StepRecord& record, const std::vector<double>& latencies,
                             const std::vector<double>& first_tokens, Clock::time_point now) {
  const double now_s = seconds_between(started_at_, now);
  // What the step would have taken on the primary weights, relative to the fallback's (a latency on the
  // fallback is judged as the primary set would have served it); 0 until both models can tell.
  // The primary model's prediction for a step on the fallback also feeds the measured check (observe_step).
  double on_primary = 0, primary_ratio = 0;
  if (record.weights == WeightSet::kFallback && step_time_model_.snapshot().num_steps >= BatchController::kMinModelSteps) {
    const StepShape shape{record.prefill_tokens, record.decode_seqs, record.decode_kv_tokens, record.prefill_pairs};
    on_primary = std::max(step_time_model_.predict(shape), 0.0);
    if (fallback_step_time_model_.snapshot().num_steps >= BatchController::kMinModelSteps) {
      const double on_fallback = fallback_step_time_model_.predict(shape);
      if (on_fallback > 0) primary_ratio = on_primary / on_fallback;
    }
  }
  for (double latency : latencies) fallback_->observe(now_s, record.weights, latency, primary_ratio);
  for (double latency : first_tokens) fallback_->observe_first_token(now_s, record.weights, latency);
  fallback_->observe_load(predicted_prompt_load(step_time_model_, arrival_rates_, now_s, shape_of(record),
                                                options_.scheduler.max_num_batched_tokens,
                                                fallback_->options().tpot_target_s, BatchController::kMinModelSteps));
  fallback_->observe_step(record.weights, record.execute_seconds, on_primary);
  {
    std::lock_guard lock(mutex_);
    if (pinned_weights_) return;  // the rule is not applied while a set is pinned
  }
  const uint64_t declined = fallback_->stats().switches_declined;
  if (!fallback_->update(now_s)) return;
  const FallbackStats f = fallback_->stats();
  if (f.switches_declined > declined) {
    spdlog::warn("precision fallback: the fallback weights' steps took {:.0f}% of the time the primary's step-time "
                 "model predicts for them (not faster): steps run on the primary weights, and stay there for {:.0f} s",
                 f.fallback_speedup > 0 ? 100 / f.fallback_speedup : 0.0, f.cooldown_until_s - now_s);
  } else if (f.current == WeightSet::kFallback && f.first_tokens_switched) {
    spdlog::warn("precision fallback: P99 time to first token {:.1f} ms over {} requests is above --slo-ttft-ms {:.1f} "
                 "(primary prompt load {:.2f}); steps now run on the fallback weights",
                 1e3 * f.first_token_p99_s, f.first_token_count, 1e3 * fallback_->options().ttft_target_s,
                 f.primary_load);
  } else if (f.current == WeightSet::kFallback) {
    spdlog::warn("precision fallback: P99 inter-token latency {:.1f} ms over {} tokens is above --slo-tpot-ms {:.1f}; "
                 "steps now run on the fallback weights",
                 1e3 * f.window_p99_s, f.window_count, 1e3 * fallback_->options().tpot_target_s);
  } else {
    spdlog::info("precision fallback: the primary weights are predicted at P99 {:.1f} ms over {} tokens, within {:.0f}% "
                 "of --slo-tpot-ms {:.1f} (prompt load {:.2f}); steps run on the primary weights again",
                 1e3 * f.window_p99_s, f.window_count, 100 * PrecisionFallback::kRecoverFraction,
                 1e3 * fallback_->options().tpot_target_s, f.primary_load);
  }
}

void Engine::record_step(const StepRecord& record) {
  last_step_ = record;
  StepObserver observer;
  {
    std::lock_guard lock(mutex_);
    stats_.last_step = record;
    observer = step_observer_;
  }
  if (observer) observer(record);
}

RequestEvent Engine::final_event(RequestId id, FinishReason reason, ErrorKind error_kind, std::string error,
                                 const Usage& usage, const RequestTimes& times) {
  RequestEvent event;
  event.request_id = id;
  event.finished = true;
  event.finish_reason = reason;
  event.error_kind = error_kind;
  event.error = std::move(error);
  event.usage = usage;
  event.time = Clock::now();
  event.times = times;
  return event;
}

void Engine::finish(RequestId id, FinishReason reason, ErrorKind error_kind, std::string error, const Usage& usage) {
  auto it = active_.find(id);
  if (it == active_.end()) return;
  RequestEvent event = final_event(id, reason, error_kind, std::move(error), usage, it->second.times);
  if (!it->second.queue_time_sent) event.queue_seconds = it->second.queue_seconds;
  const EventCallback on_event = std::move(it->second.on_event);
  runner_.remove_request(id);
  active_.erase(it);
  publish_stats();
  on_event(event);
}

Usage Engine::usage_of(const Sequence& seq) const {
  return Usage{seq.num_prompt_tokens, seq.num_output_tokens(), seq.num_cached_tokens};
}

void Engine::publish_stats() {
  const BlockManager& bm = scheduler_.block_manager();
  EngineStats s;
  s.num_running = scheduler_.num_running();
  s.num_waiting = scheduler_.num_waiting();
  s.kv_cache_usage = bm.usage();
  s.num_kv_blocks = bm.num_blocks();
  s.block_size = bm.block_size();
  s.kv_cache_dtype = runner_.kv_spec().dtype;
  s.prefix_cache_queries = bm.prefix_cache_stats().num_queried_tokens;
  s.prefix_cache_hits = bm.prefix_cache_stats().num_hit_tokens;
  s.prefix_cache_host_hits = bm.prefix_cache_stats().num_host_hit_tokens;
  s.num_host_kv_blocks = bm.host_tier().num_slots();
  s.num_host_kv_blocks_used = bm.host_tier().num_used();
  s.host_tier = bm.host_tier().stats();
  s.prefetch = bm.prefetch_stats();
  s.num_preemptions = scheduler_.num_preemptions();
  s.batch_window_holds = scheduler_.num_held_steps();
  s.prompt_tokens = prompt_tokens_;
  s.generation_tokens = generation_tokens_;
  s.num_steps = num_steps_;
  s.execute_seconds = execute_seconds_;
  s.last_step = last_step_;
  s.step_time_model = step_time_model_.snapshot();
  s.tenant_kv_blocks = scheduler_.blocks_by_tenant();
  const std::vector<TenantBlockCounts> counts = bm.tenant_block_counts();
  const std::vector<std::string>& names = scheduler_.tenant_names();
  for (size_t t = 0; t < names.size(); ++t)
    s.tenant_block_counts.emplace_back(names[t], t < counts.size() ? counts[t] : TenantBlockCounts{});
  const double now = seconds_between(started_at_, Clock::now());
  s.arrival_rate = arrival_rates_.rate(now);
  s.tenant_arrival_rates = arrival_rates_.tenant_rates(now);
  s.batch_controller = last_decision_;
  s.has_fallback = fallback_.has_value();
  if (fallback_) s.fallback = fallback_->stats();
  s.fallback_steps = fallback_steps_;
  s.fallback_step_time_model = fallback_step_time_model_.snapshot();
  std::lock_guard lock(mutex_);
  stats_ = s;
}

}  // namespace pagoda
