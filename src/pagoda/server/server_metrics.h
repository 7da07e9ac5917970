// ServerMetrics: the pagoda:* Prometheus metrics (named after vLLM's, with a model_name label). Engine
// gauges and totals are read from EngineStats at scrape time; latencies are observed by the server.
// Tenants (--api-keys-file, --tenants-file) get pagoda:tenant_* series labelled by name.
#pragma once

#include <array>
#include <mutex>
#include <set>
#include <string>

#include "pagoda/engine/engine.h"
#include "pagoda/metrics/metrics.h"
#include "pagoda/server/api_keys.h"
#include "pagoda/server/request_trace.h"

namespace pagoda::server {

class ServerMetrics {
 public:
  explicit ServerMetrics(const std::string& model_name);

  void observe_time_to_first_token(double seconds) { ttft_->observe(seconds); }
  void observe_inter_token_latency(double seconds) { itl_->observe(seconds); }
  void observe_e2e_latency(double seconds) { e2e_->observe(seconds); }
  void observe_queue_time(double seconds) { queue_->observe(seconds); }
  void observe_stream_delivery(double seconds) { delivery_->observe(seconds); }
  // One per engine request: "stop", "length", "abort" or "error".
  void request_finished(FinishReason reason);
  // A finished engine request's phases: prefill, decode, inference, time per output token.
  void observe_trace(const RequestTrace& trace);
  // Thread-safe; called from the engine's step observer.
  void observe_step(const StepRecord& step);
  // For other metric sources that share the exposition (the GPU sampler).
  metrics::Registry& registry() { return registry_; }
  const metrics::Labels& labels() const { return labels_; }

  // Text exposition, with the engine's current state.
  std::string render(const EngineStats& stats);

 private:
  metrics::Registry registry_;
  metrics::Labels labels_;
  metrics::Gauge *running_, *waiting_, *kv_usage_;
  metrics::Gauge* cache_info_ = nullptr;  // pagoda:cache_config_info, registered at the first render
  metrics::Counter *prefix_queries_, *prefix_hits_, *preemptions_, *batch_window_holds_, *prompt_tokens_, *generation_tokens_;
  // The host KV tier (--kv-offload-memory): hits served from it, blocks moved each way, its occupancy.
  metrics::Counter *host_hits_, *host_offloaded_, *host_loaded_, *host_evicted_, *prefetched_, *prefetch_useful_;
  metrics::Gauge *host_blocks_, *host_blocks_used_;
  metrics::Histogram *ttft_, *itl_, *e2e_, *queue_, *delivery_;
  metrics::Histogram *prefill_, *decode_, *inference_, *request_tpot_, *step_duration_;
  metrics::Counter *steps_, *busy_;
  metrics::Gauge *step_prefill_tokens_, *step_decode_seqs_, *step_seconds_, *step_graph_batch_;
  // The step-time model (sched/step_time_model.h): one series per term, its error, the steps it learned from.
  std::array<metrics::Gauge*, StepTimeModel::kTerms> step_model_terms_{};
  metrics::Gauge *step_model_error_ = nullptr, *step_model_steps_ = nullptr;
  metrics::Gauge *arrival_rate_ = nullptr, *token_budget_ = nullptr;
  // The precision fallback (sched/precision_fallback.h): which weights steps run on, switches each way, its P99.
  metrics::Gauge *fallback_active_ = nullptr, *fallback_p99_ = nullptr, *fallback_first_token_p99_ = nullptr,
                 *fallback_prompt_load_ = nullptr;
  metrics::Counter *fallback_to_ = nullptr, *fallback_back_ = nullptr, *fallback_declined_ = nullptr, *fallback_steps_ = nullptr;

  // Per-tenant series (pagoda:tenant_*): at most kMaxTenantLabels tenants by name, the rest as kOtherTenantsLabel
  // (api_keys.h).
  metrics::Labels tenant_labels(const std::string& tenant);
  // The tenant label value for `tenant` (its name, or "other" past the limit); tenants_mutex_ held.
  const std::string& tenant_label_locked(const std::string& tenant);
  std::mutex tenants_mutex_;
  std::set<std::string> tenant_names_;  // the labelled tenants
  std::set<std::string> kv_tenants_;    // labels with a pagoda:tenant_kv_cache_blocks series
};

}  // namespace pagoda::server
