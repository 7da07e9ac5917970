// ServerMetrics: the pagoda:* Prometheus metrics (named after vLLM's, with a model_name label). Engine
// gauges and totals are read from EngineStats at scrape time; latencies are observed by the server.
#pragma once

#include <string>

#include "pagoda/engine/engine.h"
#include "pagoda/metrics/metrics.h"

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
  void request_finished(const std::string& finished_reason);

  // Text exposition, with the engine's current state.
  std::string render(const EngineStats& stats);

 private:
  metrics::Registry registry_;
  metrics::Labels labels_;
  metrics::Gauge *running_, *waiting_, *kv_usage_;
  metrics::Counter *prefix_queries_, *prefix_hits_, *preemptions_, *prompt_tokens_, *generation_tokens_;
  metrics::Histogram *ttft_, *itl_, *e2e_, *queue_, *delivery_;
};

}  // namespace pagoda::server
