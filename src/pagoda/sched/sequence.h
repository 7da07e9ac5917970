// Sequence: one request's state inside the scheduler: its tokens (prompt, then output, then placeholders
// for tokens sampled by launched steps but not known yet), how many of them are in the KV cache, its KV
// blocks, its place in the queues and why it finished. Sampling parameters stay with the caller; the
// scheduler only needs max_tokens.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "pagoda/core/types.h"
#include "pagoda/kv/sequence_blocks.h"
#include "pagoda/sched/finish_reason.h"
#include "pagoda/sched/tenant_kv.h"

namespace pagoda {

using SeqId = uint64_t;

enum class SeqStatus : uint8_t {
  kWaiting,    // never scheduled yet
  kRunning,    // holds KV blocks; scheduled every step that has room
  kPreempted,  // was running; blocks freed, waiting to be recomputed (keeps its output tokens)
  kFinished,
};

// What Scheduler::add() takes.
struct SequenceRequest {
  SeqId seq_id = 0;
  std::vector<TokenId> prompt_token_ids;
  int max_tokens = 16;     // output tokens, >= 1
  int priority = 0;        // priority and slo policies: lower values run first (vLLM semantics); FCFS ignores it
  std::string cache_salt;  // scopes prefix-cache sharing (tenant / request cache_salt)
  TenantKv tenant;         // quotas and eviction weight (tenant_kv.h)
  // False: the prompt is computed whole, never served from the prefix cache (a request asking for prompt logprobs
  // needs the logits of every prompt position, as in vLLM); its blocks still enter the cache for others.
  bool reads_prefix_cache = true;
  // When the request was submitted, in seconds on the scheduler's clock (the engine: steady_clock since its
  // epoch, Scheduler::steady_seconds). Unset: when add() is called.
  std::optional<double> submitted_s{};
};

struct Sequence {
  Sequence(SequenceRequest request, uint64_t arrival_index)
      : seq_id(request.seq_id),
        token_ids(std::move(request.prompt_token_ids)),
        num_prompt_tokens(static_cast<int>(token_ids.size())),
        max_tokens(request.max_tokens),
        priority(request.priority),
        arrival_index(arrival_index),
        submitted_s(request.submitted_s.value_or(0)),
        tenant(std::move(request.tenant)),
        reads_prefix_cache(request.reads_prefix_cache),
        blocks(std::move(request.cache_salt), tenant.weight) {}

  // Tokens whose ids are known (token_ids).
  int num_tokens() const { return static_cast<int>(token_ids.size()); }
  int num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
  // Counting the placeholders: what the sequence will hold once the launched steps are applied.
  int num_tokens_with_placeholders() const { return num_tokens() + num_output_placeholders; }
  int num_output_tokens_with_placeholders() const { return num_output_tokens() + num_output_placeholders; }
  std::span<const TokenId> prompt_token_ids() const { return std::span(token_ids).first(num_prompt_tokens); }
  std::span<const TokenId> output_token_ids() const { return std::span(token_ids).subspan(num_prompt_tokens); }
  std::span<const BlockId> block_table() const { return blocks.block_table(); }
  // The priority policies' order, lower first: the tenant's priority, then the request's own.
  std::pair<int, int> rank() const { return {tenant.priority, priority}; }

  SeqId seq_id;
  std::vector<TokenId> token_ids;  // [num_tokens]: prompt, then output
  int num_prompt_tokens;
  int max_tokens;
  int priority;
  uint64_t arrival_index;        // order of Scheduler::add(); unique
  double submitted_s;            // submission time, seconds on the scheduler's clock
  std::optional<double> first_token_s;  // when update() appended its first output token (same clock)
  TenantKv tenant;
  bool reads_prefix_cache;  // SequenceRequest's
  // Leading tokens whose K/V are in the cache or computed by a launched step (advanced when planned).
  int num_computed_tokens = 0;
  // Tokens sampled by planned steps whose results update() has not applied yet (async scheduling: at
  // most the step in flight and the one being planned). They come after token_ids, in step order.
  int num_output_placeholders = 0;
  int num_cached_tokens = 0;     // prefix-cache hit at first admission (usage: cached prompt tokens)
  int num_preemptions = 0;
  SeqStatus status = SeqStatus::kWaiting;
  FinishReason finish_reason = FinishReason::kNone;
  SequenceBlocks blocks;
};

// The length limits, checked after each appended token: max_tokens outputs, or max_model_len tokens.
inline FinishReason length_finish_reason(const Sequence& seq, int max_model_len) {
  return seq.num_output_tokens() >= seq.max_tokens || seq.num_tokens() >= max_model_len ? FinishReason::kLength
                                                                                       : FinishReason::kNone;
}

// Whether the placeholders alone will end the sequence by length: planning another step for it would
// only compute a token that is thrown away.
inline bool placeholders_reach_length_limit(const Sequence& seq, int max_model_len) {
  return seq.num_output_placeholders > 0 && (seq.num_output_tokens_with_placeholders() >= seq.max_tokens ||
                                             seq.num_tokens_with_placeholders() >= max_model_len);
}

}  // namespace pagoda
