// What clients hand the engine (GenerateRequest) and what they get back (RequestEvent), as plain data.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "pagoda/core/types.h"
#include "pagoda/runner/sampler.h"
#include "pagoda/runner/sampling_params.h"
#include "pagoda/sched/finish_reason.h"
#include "pagoda/sched/tenant_kv.h"

namespace pagoda {

using RequestId = uint64_t;
using TopLogprobs = std::vector<TokenLogprob>;

struct GenerateRequest {
  std::vector<TokenId> prompt_ids;
  SamplingParams params;
  int priority = 0;        // priority policy: lower runs first
  std::string cache_salt;  // scopes prefix-cache sharing (tenant, request cache_salt)
  TenantKv tenant;         // the tenant's KV share, cap and eviction weight (sched/tenant_kv.h)
};

struct Usage {
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;  // prompt tokens served from the prefix cache
};

// Where a request has been inside the engine (steady clock). A default (epoch) time point: not yet.
struct RequestTimes {
  using TimePoint = std::chrono::steady_clock::time_point;
  TimePoint queued{};        // submit()
  TimePoint scheduled{};     // the first step that scheduled it was planned (its forward starts)
  TimePoint prefill_done{};  // end of the step that computed its last prompt token (and sampled its first token)
  int num_preemptions = 0;
  int fallback_tokens = 0;  // output tokens sampled by steps on the fallback weights (--fallback-quantization)
};

// Why a request failed: the request itself (it can never run: a client's error) or the engine (a step failed).
enum class ErrorKind : uint8_t { kNone, kInvalidRequest, kInternal };

// One event per request per step in which something happened. The last event has finished = true.
struct RequestEvent {
  RequestId request_id = 0;
  std::vector<TokenId> new_token_ids;
  std::vector<TopLogprobs> logprobs;         // one per new token when params.logprobs >= 0
  std::vector<TopLogprobs> prompt_logprobs;  // once, complete, with the first token (entry 0 empty)
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;  // set when finished
  ErrorKind error_kind = ErrorKind::kNone;           // with FinishReason::kError: whose fault
  std::string error;                                 // with FinishReason::kError: what went wrong, one line
  Usage usage;
  // In the request's first event: seconds from submit() to the step that first scheduled it (its time in
  // the waiting queue); -1 in later events and for requests never scheduled.
  double queue_seconds = -1;
  // When the engine emitted this event (the end of its step), and the request's times so far.
  std::chrono::steady_clock::time_point time;
  RequestTimes times;
};

}  // namespace pagoda
