// run_serve_benchmark: `pagoda bench serve`, a load generator for any OpenAI-compatible server with the
// semantics of `vllm bench serve`: build the prompts (set-up calls: /v1/models, /tokenize, /detokenize),
// send one test request, then release the requests on the arrival process (--request-rate,
// --burstiness), at most --max-concurrency in flight, every one streamed and timed. The multi-tenant
// dataset (multi_tenant.h) sends each request with its tenant's key.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "pagoda/bench/arrivals.h"
#include "pagoda/bench/dataset.h"
#include "pagoda/bench/multi_tenant.h"
#include "pagoda/bench/request_record.h"

namespace pagoda::bench {

struct ServeBenchmarkOptions {
  std::string base_url = "http://127.0.0.1:8000";
  std::string endpoint = "/v1/completions";  // or /v1/chat/completions
  std::string model;                         // "": the first model of GET /v1/models
  std::string api_key;                       // sent as "Authorization: Bearer KEY" (multi-tenant: set-up calls
                                             // only; "": the first tenant's key)
  double request_rate = std::numeric_limits<double>::infinity();
  double burstiness = 1;
  std::vector<RatePhase> rate_schedule;      // non-empty: piecewise rates instead of request_rate
  int max_concurrency = 0;                   // 0: no limit
  uint64_t seed = 0;
  std::string dataset = "random";            // random, prefix, jsonl, multi-tenant
  SyntheticOptions synthetic;                // num_prompts, lengths, prefix groups (seed is copied from `seed`)
  MultiTenantOptions multi_tenant;           // multi-tenant
  std::string dataset_path;                  // jsonl
  int random_vocab_size = 0;                 // > 0: draw ids from [min(300, N - 1), N) instead of /tokenize
  bool ignore_eos = false;
  double temperature = 0;
  nlohmann::json extra_body = nlohmann::json::object();
  double timeout_s = 600;                    // the longest wait for a connection or the next bytes
  bool progress = true;

  bool chat() const { return endpoint.find("chat") != std::string::npos; }
  // Throws pagoda::InvalidRequest for contradictory or out-of-range settings.
  void validate() const;
};

struct ServeBenchmarkRun {
  std::string model;
  std::vector<RequestRecord> records;  // one per prompt, in prompt order (= arrival order)
  std::vector<BenchTenant> tenants;    // multi-tenant: the tenants (RequestRecord::tenant names one)
  double duration = 0;                 // the first request sent to the last finished, seconds
  int connections_opened = 0;
};

// Throws pagoda::Error when the server cannot be reached, the set-up calls fail or the test request fails.
ServeBenchmarkRun run_serve_benchmark(const ServeBenchmarkOptions& options);

}  // namespace pagoda::bench
