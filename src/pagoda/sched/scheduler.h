// Scheduler: owns every unfinished Sequence and the BlockManager, and decides each step which tokens
// of which sequences run (vLLM v1's one rule: num_computed_tokens catches up with num_tokens under a
// token budget). Chunked prefill, prefix-cache hits and preemption by recompute all follow from it.
// A step may be planned before the previous step's results are applied (async scheduling): a token
// the previous step samples is then a placeholder, computed as the next input and appended by update().
// Single-threaded: the engine thread alone calls it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "pagoda/kv/block_manager.h"
#include "pagoda/sched/batch_controller.h"
#include "pagoda/sched/fair_share.h"
#include "pagoda/sched/policy.h"
#include "pagoda/sched/scheduler_config.h"
#include "pagoda/sched/sequence.h"
#include "pagoda/sched/step_plan.h"
#include "pagoda/sched/token_budget.h"

namespace pagoda {

class Scheduler {
 public:
  // Called by update() after a token is appended to `seq` (seq.token_ids.back()) and the length
  // limits did not already finish it; true finishes the sequence with FinishReason::kStop. The caller
  // owns EOS / stop-token / min_tokens semantics (they live in its sampling parameters).
  using StopCheck = std::function<bool(const Sequence& seq)>;

  // Seconds, non-decreasing: prefetch timing, and the slo policy's times (submission when the request has
  // none, first token, the victim choice's now).
  using Clock = std::function<double()>;
  static double steady_seconds();

  // Throws pagoda::Error for an invalid config.
  Scheduler(const SchedulerConfig& config, const BlockManagerOptions& kv_options, Clock clock = &Scheduler::steady_seconds);

  // Queues a new sequence. Throws pagoda::InvalidRequest (the message names the numbers) when check() does, or
  // for a seq_id already in use.
  void add(SequenceRequest request);
  // Throws pagoda::InvalidRequest when the request can never run, whatever else is queued: empty prompt,
  // max_tokens < 1, prompt + 1 > max_model_len, more KV blocks than the pool holds or than its tenant's kv_cap.
  // Reads only the configuration and the pool's size, so any thread may call it (the server does, before a
  // stream's 200).
  void check(int64_t num_prompt_tokens, int max_tokens, const TenantKv& tenant) const;
  // The most tokens (prompt and completion) a sequence of `tenant` may reach and still pass check(): max_model_len,
  // or fewer where the pool or the tenant's kv_cap holds fewer (the last token needs no KV slot). Any thread.
  int64_t max_sequence_tokens(const TenantKv& tenant) const;
  // Throws pagoda::Error when the tenant's kv_share holds more of this pool than its kv_cap lets it hold (a fraction
  // against a token count: comparable only once the pool's size is known). Any thread.
  void check_tenant(const TenantKv& tenant) const;
  // Finishes a waiting or running sequence at once and frees its blocks (its length is not recorded in
  // output_lengths()). False for an unknown id.
  // Allowed while its steps are in flight: they keep writing blocks freed now, which is safe because any
  // later step that reuses them runs after them (one stream); update() drops their tokens.
  bool abort(SeqId seq_id);

  // Plans one step. Running sequences first (policy order): each gets its uncomputed tokens
  // (placeholders included), as far as the token budget allows; if its blocks cannot grow, running
  // sequences are preempted (the policy's victim among it and those after it, possibly itself: the last in
  // policy order for fcfs and priority; slo and fair: policy.h). A sequence whose
  // placeholders already reach max_tokens or max_model_len is left out. Then, if nothing was preempted,
  // waiting sequences are admitted in policy order while the budget, max_num_seqs and free blocks allow,
  // each starting after its prefix-cache hit. Admission stops at the first that does not fit (no
  // skipping ahead). The fair policy plans the running sequences' decodes so, then shares the rest of the
  // budget among prompt work (schedule_fair). Planned tokens count as computed from now on, and each sampling
  // entry adds a placeholder. Call it with at most one earlier plan not yet passed to update().
  StepPlan schedule();
  // The same with this step's token budget instead of max_num_batched_tokens (the batch controller's).
  StepPlan schedule(int token_budget);

  // What the engine holds now, for the batch controller: the sequences that decode this step, the KV they read,
  // and for those past their first token what their TPOT has left to spend (batch_controller.h).
  // Blocks one step may bring back from the host tier ahead of requests (prefetch): 32 MiB of Llama-3-8B
  // bf16 KV, about a millisecond of PCIe.
  static constexpr int kMaxPrefetchBlocksPerStep = 256;
  struct Load {
    int64_t decode_seqs = 0;
    int64_t decode_kv_tokens = 0;
    std::vector<DecodingRequest> decoding;
  };
  Load load() const;
  // The waiting sequences in the order admission takes them (admission_order: by deadline under the slo policy).
  std::vector<SeqId> waiting_order() const;

  // Whether admission reorders the waiting queue by deadline (admission_order): the slo policy with a TTFT or
  // TPOT target.
  bool deadline_first() const;
  // How long a prompt admitted now takes to its first token (the engine's estimate from its step-time model;
  // 0 until it has one): a waiting request that has waited longer than the TTFT target minus this cannot make it,
  // and the TTL batching window holds no request past that point.
  void set_first_token_estimate(double seconds) { first_token_estimate_ = seconds; }
  // Whether the engine should keep the first-token estimate up to date (deadline_first() or a batching window).
  bool uses_first_token_estimate() const { return deadline_first() || config_.batch_wait_seconds > 0; }
  // When the last schedule() held new requests in the batching window (hold_new_requests): the time, on the
  // scheduler's clock, at which they go even if no more arrive. Unset when it held none.
  std::optional<double> held_until() const { return held_until_; }
  uint64_t num_held_steps() const { return num_held_steps_; }  // steps planned while requests were held

  // Applies a step, plans in the order they were made: replaces the oldest placeholder of the i-th
  // sampling entry of `plan` with `sampled[i]` (sampled.size() == plan.num_sampling(), in plan order: the
  // order of the runner's logits rows), checks max_tokens / max_model_len, then `stop`, and frees finished
  // sequences, recording their output lengths (output_lengths()); a sequence's first token's time is
  // taken from the clock. Returns one output per applied token. Entries of sequences that finished or were aborted
  // since schedule() are dropped; a sequence preempted since then still gets its token.
  std::vector<SequenceOutput> update(const StepPlan& plan, std::span<const TokenId> sampled,
                                     const StopCheck& stop = {});

  const Sequence* find(SeqId seq_id) const;
  int num_waiting() const { return static_cast<int>(waiting_.size()); }
  int num_running() const { return static_cast<int>(running_.size()); }
  // Blocks held by the running sequences of each named tenant (tenant_kv.h), in first-seen order.
  std::vector<std::pair<std::string, int>> blocks_by_tenant() const;
  // The names of the tenants seen so far, by the index their cached blocks are counted under
  // (CachedBlockInfo::tenant, BlockManager::tenant_block_counts).
  const std::vector<std::string>& tenant_names() const { return tenant_names_; }
  bool has_unfinished() const { return !seqs_.empty(); }
  // Output lengths of the sequences finished by length or stop, per tenant (the slo policy's estimate).
  const OutputLengthStats& output_lengths() const { return output_lengths_; }
  // The fair policy's tenant service and queues; null under the other policies.
  const FairShare* fair_share() const { return fair_ ? &*fair_ : nullptr; }
  uint64_t num_preemptions() const { return num_preemptions_; }
  const SchedulerConfig& config() const { return config_; }
  const BlockManager& block_manager() const { return block_manager_; }
  BlockManager& block_manager() { return block_manager_; }

  // Consistency check for tests: queues agree with statuses, running is in policy order and within
  // max_num_seqs, waiting sequences hold no blocks, block tables cover computed tokens, and the block
  // manager's invariants hold. "" when consistent, otherwise the first violation.
  std::string check_invariants() const;

 private:
  // Capacity decision: gives `seq` blocks for num_tokens positions, preempting among it and the sequences of
  // `unplanned` and `more_unplanned` still running (those not yet planned this step) until they fit, by the
  // policy's victim rule (sequences of tenants above their share first; within its tenant's cap by preempting
  // the tenant's own). False when `seq` itself had to be preempted.
  bool reserve_blocks(Sequence& seq, int num_tokens, StepPlan& plan, std::span<Sequence* const> unplanned,
                      std::span<Sequence* const> more_unplanned = {});
  // Tenant quotas (tenant_kv.h), in blocks.
  int quota_blocks(double amount) const;
  int tenant_blocks(const std::string& tenant) const;  // held by the tenant's running sequences
  // Whether `seq` holding blocks for num_tokens positions would take its tenant past its cap.
  bool over_tenant_cap(const Sequence& seq, int num_tokens) const;
  // Whether a tenant holding `held` blocks holds more than its share (one without a share: any block is more).
  bool above_share(const TenantKv& t, int held) const { return t.kv_share <= 0 || held > quota_blocks(t.kv_share); }
  // The index in `candidates` to preempt: among sequences of tenants above their share if there are any.
  size_t pick_victim(std::span<Sequence* const> candidates) const;
  // The running sequences in policy order, each its pending tokens as far as the budget allows. With `prompts`
  // (the fair policy), those with more than one token pending are appended there instead of planned (and stay
  // candidates for preemption); on return it holds those still running.
  void schedule_running(TokenBudget& budget, StepPlan& plan, std::vector<Sequence*>* prompts = nullptr);
  void admit_waiting(TokenBudget& budget, StepPlan& plan);
  // A tenant's kv_share holds for arrivals too: the first waiting sequence, in policy order, of a tenant below its
  // share is its claimant. Before the running sequences are planned, sequences of tenants above their share
  // (pick_victim's rule; never the claimant's tenant) are preempted until the claimant's first chunk, up to its
  // share, finds free blocks; admit_waiting admits the claimant first (the fair policy, when its tenant's turn
  // comes: these preemptions do not stop its admissions). Without this a request of a tenant holding nothing
  // waited behind a flood's decodes and its queued requests (11 s against 0.13 alone). Returns its preemptions.
  int reclaim_for_share(const TokenBudget& budget, StepPlan& plan);
  // The fair policy's step: the running sequences with one token to compute (decodes) in policy order, then,
  // repeatedly, the prompt work (a running sequence's next prompt or recompute chunk, or admitting a waiting
  // sequence) of the tenant whose next sequence has the lowest (priority, finish tag, arrival), where the
  // finish tag is the tenant's service plus the sequence's chunk (as much of its pending tokens as the budget
  // has left; for a waiting sequence, counted before its prefix hit, which is looked up only on admission)
  // divided by the tenant's weight; its service is charged as each chunk is planned, until the budget, the
  // sequence slots or the blocks run out. Within a tenant, sequences go in policy order. Admissions stop once
  // the step preempted or a sequence found no blocks; a tenant at its cap admits nothing more this step.
  void schedule_fair(TokenBudget& budget, StepPlan& plan, size_t reclaimed);
  // The TTL batching window (SchedulerConfig::batch_wait_seconds): true, and held_until_ set, when this step
  // admits no waiting request because the step has no prompt tokens yet and the waiting requests are all new
  // (never run), fewer than the step could take (their prompt tokens short of the budget left, their number
  // short of the free sequence slots), and the oldest is still within the window: its submission plus
  // batch_wait_seconds, or, with a TTFT target, plus that target less the first-token estimate if earlier.
  bool hold_new_requests(const TokenBudget& budget, const StepPlan& plan);
  // kSkipped: its tenant is at its KV cap; kWaitsForStep: a long prefill (after its prefix hit) past the step's
  // limit, its tenant's prompt tokens for the step are spent (TokenBudget), or it was preempted in this plan.
  enum class Admission { kAdmitted, kSkipped, kWaitsForStep, kNoBlocks };
  Admission admit(Sequence& seq, TokenBudget& budget, StepPlan& plan);
  // The waiting sequences in the order they are admitted. Policy order, except under deadline_first(): within
  // each priority, those that can still make their SLO first (newest first while any request is late, else in
  // arrival order), then the late ones, oldest first. A
  // request without a token yet is late once its wait plus the first-token estimate passes the TTFT target; a
  // preempted one, by policy.h's past_slo. Under overload a queue served in arrival order makes every request
  // late; serving first those that can still make their targets, the newest first, keeps as many in time as the
  // engine can serve, and the late ones wait for a lull.
  std::vector<Sequence*> admission_order(double now) const;
  void preempt(Sequence& seq, StepPlan& plan);
  // The policy's victim among `candidates` (pick_preemption_victim with this scheduler's context).
  size_t policy_victim(std::span<Sequence* const> candidates) const;
  void enqueue(Sequence* seq);  // into waiting_ (and the fair policy's tenant queue)
  void dequeue(Sequence* seq);
  // Frees blocks, records the output length (unless aborted), forgets the sequence.
  void finish(Sequence& seq, FinishReason reason);
  void insert_running(Sequence* seq);
  void erase_running(const Sequence* seq);
  void add_to_plan(StepPlan& plan, Sequence& seq, int num_tokens);
  // Publishes the sequence's full blocks whose tokens are known and computed (or being computed).
  void publish_known_blocks(Sequence& seq);

  SchedulerConfig config_;
  BlockManager block_manager_;
  Clock clock_;
  std::unordered_map<SeqId, std::unique_ptr<Sequence>> seqs_;  // every unfinished sequence
  std::vector<Sequence*> running_;                            // in policy order
  double first_token_estimate_ = 0;  // seconds (set_first_token_estimate)
  std::optional<double> held_until_;  // hold_new_requests
  uint64_t num_held_steps_ = 0;
  std::set<Sequence*, PolicyOrder> waiting_;                  // new and preempted, in policy order
  Sequence* share_claimant_ = nullptr;  // this step's (reclaim_for_share), admitted first; null: none
  std::vector<SeqId> finished_since_plan_;
  uint64_t next_arrival_index_ = 0;
  uint64_t num_preemptions_ = 0;
  OutputLengthStats output_lengths_;
  std::optional<FairShare> fair_;  // the fair policy only
  bool tenant_quotas_ = false;  // some request so far had a tenant share or cap
  std::vector<std::string> tenant_names_;              // by tenant index
  std::unordered_map<std::string, int> tenant_index_;  // the configured tenants: bounded
};

}  // namespace pagoda
