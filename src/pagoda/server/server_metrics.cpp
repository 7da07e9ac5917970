// The pagoda:* metric families.
#include "pagoda/server/server_metrics.h"

#include <map>

namespace pagoda::server {
namespace {

const std::vector<double> kTtftBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
                                          0.75,  1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0};
const std::vector<double> kItlBuckets = {0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05,
                                         0.075, 0.1,    0.15,  0.2,  0.3,   0.4,  0.5,   0.75, 1.0,  2.5};
const std::vector<double> kLatencyBuckets = {0.01, 0.025, 0.05, 0.1, 0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,
                                             5.0,  10.0,  15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0};

const std::vector<double> kTpotBuckets = {0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05,
                                          0.075, 0.1,    0.15,  0.2,    0.3,  0.4,   0.5,  0.75, 1.0,  2.5};
const std::vector<double> kStepBuckets = {1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 7.5e-3, 0.01, 0.015, 0.02, 0.03,
                                          0.05, 0.075,  0.1,  0.25, 0.5,    1.0,  2.5};

// "F32" -> "float32", "BF16" -> "bfloat16", as vLLM names cache dtypes.
std::string lower_dtype_name(DType d) {
  switch (d) {
    case DType::kF32: return "float32";
    case DType::kBF16: return "bfloat16";
    case DType::kF16: return "float16";
    default: return std::string(dtype_name(d));
  }
}

}  // namespace

ServerMetrics::ServerMetrics(const std::string& model_name) : labels_{{"model_name", model_name}} {
  auto& r = registry_;
  running_ = &r.gauge("pagoda:num_requests_running", "Number of requests in model execution batches.", labels_);
  waiting_ = &r.gauge("pagoda:num_requests_waiting", "Number of requests waiting to be processed.", labels_);
  kv_usage_ = &r.gauge("pagoda:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", labels_);
  prefix_queries_ = &r.counter("pagoda:prefix_cache_queries_total",
                               "Prefix cache queries, in terms of number of queried tokens.", labels_);
  prefix_hits_ = &r.counter("pagoda:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.",
                            labels_);
  host_hits_ = &r.counter("pagoda:prefix_cache_host_hits_total",
                          "Prefix cache hits served from the host KV tier (copied back to the device), in tokens.", labels_);
  host_offloaded_ = &r.counter("pagoda:kv_host_offloaded_blocks_total",
                               "KV blocks copied to the host tier when the device cache evicted them.", labels_);
  host_loaded_ = &r.counter("pagoda:kv_host_loaded_blocks_total", "KV blocks copied back from the host tier.", labels_);
  host_evicted_ = &r.counter("pagoda:kv_host_evicted_blocks_total", "KV blocks the full host tier gave up.", labels_);
  prefetched_ = &r.counter("pagoda:kv_prefetched_blocks_total",
                           "KV blocks brought back from the host tier ahead of a periodic prefix's next request.", labels_);
  prefetch_useful_ = &r.counter("pagoda:kv_prefetch_hits_total",
                                "Prefetched KV blocks that a request hit before the device evicted them again.", labels_);
  host_blocks_ = &r.gauge("pagoda:kv_host_blocks", "Capacity of the host KV tier, in blocks (0: no host tier).", labels_);
  host_blocks_used_ = &r.gauge("pagoda:kv_host_blocks_used", "Blocks the host KV tier holds.", labels_);
  preemptions_ = &r.counter("pagoda:num_preemptions_total", "Cumulative number of preemptions from the engine.", labels_);
  batch_window_holds_ = &r.counter("pagoda:batch_window_holds_total",
                                   "Steps planned while the batching window (--batch-wait-ms) held new requests.", labels_);
  prompt_tokens_ = &r.counter("pagoda:prompt_tokens_total", "Number of prefill tokens processed.", labels_);
  generation_tokens_ = &r.counter("pagoda:generation_tokens_total", "Number of generation tokens processed.", labels_);
  for (const FinishReason reason : {FinishReason::kStop, FinishReason::kLength, FinishReason::kAborted, FinishReason::kError}) {
    metrics::Labels l = labels_;
    l.emplace_back("finished_reason", to_string(reason));
    r.counter("pagoda:request_success_total", "Count of finished requests by finish reason.", l);
  }
  ttft_ = &r.histogram("pagoda:time_to_first_token_seconds", "Histogram of time to first token in seconds.", kTtftBuckets,
                       labels_);
  itl_ = &r.histogram("pagoda:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", kItlBuckets,
                      labels_);
  e2e_ = &r.histogram("pagoda:e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.",
                      kLatencyBuckets, labels_);
  queue_ = &r.histogram("pagoda:request_queue_time_seconds",
                        "Histogram of time spent in WAITING phase for request.",
                        kLatencyBuckets, labels_);
  delivery_ = &r.histogram("pagoda:server_token_delivery_seconds",
                           "Histogram of time from the engine emitting a streamed token to its SSE bytes being written "
                           "to the socket, in seconds (the server's own overhead).",
                           {1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1}, labels_);
  prefill_ = &r.histogram("pagoda:request_prefill_time_seconds",
                          "Histogram of time spent in PREFILL phase for request (first scheduled to first token).",
                          kLatencyBuckets, labels_);
  decode_ = &r.histogram("pagoda:request_decode_time_seconds",
                         "Histogram of time spent in DECODE phase for request (first token to finished).",
                         kLatencyBuckets, labels_);
  inference_ = &r.histogram("pagoda:request_inference_time_seconds",
                            "Histogram of time spent in RUNNING phase for request (first scheduled to finished).",
                            kLatencyBuckets, labels_);
  request_tpot_ = &r.histogram("pagoda:request_time_per_output_token_seconds",
                               "Histogram of time_per_output_token_seconds per request (decode time / (tokens - 1)).",
                               kTpotBuckets, labels_);
  steps_ = &r.counter("pagoda:engine_steps_total", "Engine steps run.", labels_);
  busy_ = &r.counter("pagoda:engine_busy_seconds_total",
                     "Seconds the engine spent in forward passes and sampling; its rate is the busy fraction.", labels_);
  step_duration_ = &r.histogram("pagoda:engine_step_duration_seconds",
                                "Histogram of engine step time (forward and sampling) in seconds.", kStepBuckets, labels_);
  step_prefill_tokens_ = &r.gauge("pagoda:engine_step_prefill_tokens", "Prefill tokens in the latest engine step.", labels_);
  step_decode_seqs_ = &r.gauge("pagoda:engine_step_decode_seqs", "Decoding sequences in the latest engine step.", labels_);
  step_seconds_ = &r.gauge("pagoda:engine_step_seconds", "Forward and sampling time of the latest engine step.", labels_);
  step_graph_batch_ = &r.gauge("pagoda:engine_step_graph_batch_size",
                               "Padded CUDA graph batch size of the latest engine step (0: eager).", labels_);
  static constexpr const char* kTerms[StepTimeModel::kTerms] = {"base", "prefill_token", "decode_sequence",
                                                                 "decode_kv_token", "prefill_attention_pair"};
  for (int i = 0; i < StepTimeModel::kTerms; ++i) {
    metrics::Labels l = labels_;
    l.emplace_back("term", kTerms[i]);
    step_model_terms_[i] = &r.gauge("pagoda:step_time_model_seconds",
                                    "Learned engine step time per unit of each term: the base cost of a step, per "
                                    "prefill token, per decode sequence, per KV token decodes read, per prefill "
                                    "(query, key) pair.", l);
  }
  step_model_error_ = &r.gauge("pagoda:step_time_model_relative_error",
                               "Moving average of |predicted - measured| / measured step time, before each step was learned.",
                               labels_);
  step_model_steps_ = &r.gauge("pagoda:step_time_model_steps", "Engine steps the step-time model learned from.", labels_);
  arrival_rate_ = &r.gauge("pagoda:arrival_rate", "Requests arriving per second (an EWMA over about 5 s).", labels_);
  token_budget_ = &r.gauge("pagoda:batch_token_budget",
                           "The adaptive batch controller's latest token budget (0 with --batch-controller static).",
                           labels_);
  fallback_active_ = &r.gauge("pagoda:precision_fallback_active",
                              "1 while engine steps run on the fallback weights (--fallback-quantization), else 0.", labels_);
  fallback_p99_ = &r.gauge("pagoda:precision_fallback_window_p99_seconds",
                           "The P99 time per output token the precision fallback judges: measured on the served weights, "
                           "predicted for them while on the fallback weights.", labels_);
  fallback_first_token_p99_ = &r.gauge("pagoda:precision_fallback_first_token_p99_seconds",
                                       "The P99 time to first token the precision fallback judges on the served weights "
                                       "(with --slo-ttft-ms).", labels_);
  fallback_prompt_load_ = &r.gauge("pagoda:precision_fallback_primary_prompt_load",
                                   "Prompt tokens arriving per second times the served weights' time per prompt token, "
                                   "over the share of a step at the --slo-tpot-ms pace the decodes leave (above 1: "
                                   "prompts arrive faster than the served weights take them); -1 until known.", labels_);
  const auto direction = [&](const char* d) {
    metrics::Labels l = labels_;
    l.emplace_back("direction", d);
    return l;
  };
  static constexpr const char* kSwitchHelp = "Switches of the precision fallback, by direction.";
  fallback_to_ = &r.counter("pagoda:precision_fallback_switches_total", kSwitchHelp, direction("to_fallback"));
  fallback_back_ = &r.counter("pagoda:precision_fallback_switches_total", kSwitchHelp, direction("to_primary"));
  // Of the switches to_primary, those made by the measured check (sched/precision_fallback.h): its own name, so
  // that summing the switches over their direction counts each once.
  fallback_declined_ = &r.counter("pagoda:precision_fallback_declined_total",
                                  "Switches back to the primary weights because the fallback's steps measured no faster.",
                                  labels_);
  fallback_steps_ = &r.counter("pagoda:precision_fallback_steps_total", "Engine steps run on the fallback weights.", labels_);
}

void ServerMetrics::observe_trace(const RequestTrace& t) {
  if (auto v = t.prefill_seconds()) prefill_->observe(*v);
  if (auto v = t.decode_seconds()) decode_->observe(*v);
  if (auto v = t.inference_seconds()) inference_->observe(*v);
  if (auto v = t.time_per_output_token()) request_tpot_->observe(*v);
  if (t.tenant.empty() || t.tenant == "-") return;
  const metrics::Labels l = tenant_labels(t.tenant);
  registry_.counter("pagoda:tenant_requests_total", "Finished engine requests, by tenant.", l).inc();
  registry_.counter("pagoda:tenant_prompt_tokens_total", "Prompt tokens of finished requests, by tenant.", l)
      .inc(t.usage.prompt_tokens);
  registry_.counter("pagoda:tenant_prefix_cache_hits_total",
                    "Prompt tokens of finished requests served from the prefix cache, by tenant.", l)
      .inc(t.usage.cached_tokens);
  if (auto q = t.queue_seconds())
    registry_.histogram("pagoda:tenant_request_queue_time_seconds", "Time requests waited to be scheduled, by tenant.",
                        kLatencyBuckets, l).observe(*q);
}

const std::string& ServerMetrics::tenant_label_locked(const std::string& tenant) {
  static const std::string kOther(kOtherTenantsLabel);
  if (tenant_names_.contains(tenant) || tenant_names_.size() < kMaxTenantLabels) return *tenant_names_.insert(tenant).first;
  return kOther;
}

metrics::Labels ServerMetrics::tenant_labels(const std::string& tenant) {
  metrics::Labels l = labels_;
  std::lock_guard lock(tenants_mutex_);
  l.emplace_back("tenant", tenant_label_locked(tenant));
  return l;
}

void ServerMetrics::observe_step(const StepRecord& step) { step_duration_->observe(step.execute_seconds); }

void ServerMetrics::request_finished(FinishReason reason) {
  metrics::Labels l = labels_;
  l.emplace_back("finished_reason", to_string(reason));
  registry_.counter("pagoda:request_success_total", "Count of finished requests by finish reason.", l).inc();
}

std::string ServerMetrics::render(const EngineStats& s) {
  // The pool's shape, as vLLM's cache_config_info: one series whose labels say it (set once; it never changes).
  if (!cache_info_) {
    metrics::Labels l = labels_;
    l.emplace_back("block_size", std::to_string(s.block_size));
    l.emplace_back("cache_dtype", s.kv_cache_dtype == DType::kF8E4M3 ? "fp8_e4m3" : lower_dtype_name(s.kv_cache_dtype));
    l.emplace_back("num_gpu_blocks", std::to_string(s.num_kv_blocks));
    l.emplace_back("num_tokens", std::to_string(static_cast<int64_t>(s.num_kv_blocks) * s.block_size));
    cache_info_ = &registry_.gauge("pagoda:cache_config_info", "Information of the KV cache: its blocks and dtype.", l);
    cache_info_->set(1);
  }
  running_->set(s.num_running);
  waiting_->set(s.num_waiting);
  kv_usage_->set(s.kv_cache_usage);
  prefix_queries_->set_total(static_cast<double>(s.prefix_cache_queries));
  prefix_hits_->set_total(static_cast<double>(s.prefix_cache_hits));
  host_hits_->set_total(static_cast<double>(s.prefix_cache_host_hits));
  host_offloaded_->set_total(static_cast<double>(s.host_tier.offloaded));
  host_loaded_->set_total(static_cast<double>(s.host_tier.loaded));
  host_evicted_->set_total(static_cast<double>(s.host_tier.evicted));
  prefetched_->set_total(static_cast<double>(s.prefetch.issued));
  prefetch_useful_->set_total(static_cast<double>(s.prefetch.useful));
  host_blocks_->set(s.num_host_kv_blocks);
  host_blocks_used_->set(s.num_host_kv_blocks_used);
  preemptions_->set_total(static_cast<double>(s.num_preemptions));
  batch_window_holds_->set_total(static_cast<double>(s.batch_window_holds));
  prompt_tokens_->set_total(static_cast<double>(s.prompt_tokens));
  generation_tokens_->set_total(static_cast<double>(s.generation_tokens));
  steps_->set_total(static_cast<double>(s.num_steps));
  busy_->set_total(s.execute_seconds);
  step_prefill_tokens_->set(s.last_step.prefill_tokens);
  step_decode_seqs_->set(s.last_step.decode_seqs);
  step_seconds_->set(s.last_step.execute_seconds);
  step_graph_batch_->set(s.last_step.graph_batch_size);
  for (int i = 0; i < StepTimeModel::kTerms; ++i) step_model_terms_[i]->set(s.step_time_model.seconds_per_unit[i]);
  step_model_error_->set(s.step_time_model.relative_error);
  step_model_steps_->set(static_cast<double>(s.step_time_model.num_steps));
  arrival_rate_->set(s.arrival_rate);
  token_budget_->set(s.batch_controller.token_budget);
  fallback_active_->set(s.fallback.current == WeightSet::kFallback ? 1 : 0);
  fallback_p99_->set(s.fallback.window_p99_s);
  fallback_first_token_p99_->set(s.fallback.first_token_p99_s);
  fallback_prompt_load_->set(s.fallback.primary_load);
  fallback_to_->set_total(static_cast<double>(s.fallback.switches_to_fallback));
  fallback_back_->set_total(static_cast<double>(s.fallback.switches_to_primary));
  fallback_declined_->set_total(static_cast<double>(s.fallback.switches_declined));
  fallback_steps_->set_total(static_cast<double>(s.fallback_steps));
  // Blocks per tenant now: every labelled tenant's series is rewritten (0 when it holds none).
  std::map<std::string, int> blocks;
  for (const auto& [tenant, n] : s.tenant_kv_blocks) {
    const metrics::Labels l = tenant_labels(tenant);
    blocks[l.back().second] += n;
  }
  std::lock_guard lock(tenants_mutex_);
  for (const auto& [label, n] : blocks) kv_tenants_.insert(label);
  kv_tenants_.insert(tenant_names_.begin(), tenant_names_.end());
  for (const std::string& label : kv_tenants_) {
    metrics::Labels l = labels_;
    l.emplace_back("tenant", label);
    const auto it = blocks.find(label);
    registry_.gauge("pagoda:tenant_kv_cache_blocks", "KV blocks held by the tenant's running requests.", l)
        .set(it == blocks.end() ? 0 : it->second);
  }
  // The tenants' cached blocks: evicted from the device, prefetched back, held on the host.
  std::map<std::string, TenantBlockCounts> cached;
  for (const auto& [tenant, c] : s.tenant_block_counts) {
    TenantBlockCounts& sum = cached[tenant_label_locked(tenant)];
    sum.evicted += c.evicted;
    sum.prefetched += c.prefetched;
    sum.host_blocks += c.host_blocks;
  }
  for (const auto& [tenant, c] : cached) {
    metrics::Labels l = labels_;
    l.emplace_back("tenant", tenant);
    registry_.counter("pagoda:tenant_kv_evicted_blocks_total", "Cached KV blocks of the tenant the device evicted.", l)
        .set_total(static_cast<double>(c.evicted));
    registry_.counter("pagoda:tenant_kv_prefetched_blocks_total",
                      "KV blocks of the tenant brought back from the host tier ahead of a request.", l)
        .set_total(static_cast<double>(c.prefetched));
    registry_.gauge("pagoda:tenant_kv_host_blocks", "KV blocks of the tenant the host tier holds.", l).set(c.host_blocks);
  }
  // Arrival rates of the tenants the server knows (bounded like every tenant series).
  for (const auto& [tenant, rate] : s.tenant_arrival_rates) {
    if (tenant.empty()) continue;
    metrics::Labels l = labels_;
    l.emplace_back("tenant", tenant_label_locked(tenant));
    registry_.gauge("pagoda:tenant_arrival_rate", "Requests arriving per second (an EWMA over about 5 s), by tenant.", l)
        .set(rate);
  }
  return registry_.render();
}

}  // namespace pagoda::server
