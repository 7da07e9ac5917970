// Scheduler: admission checks, step planning (capacity decision + token-budget packing), preemption
// by recompute, and applying a step's results.
#include "pagoda/sched/scheduler.h"

#include <chrono>

#include <algorithm>
#include <limits>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <fmt/format.h>

#include "pagoda/core/check.h"
#include "pagoda/core/error.h"

namespace pagoda {

void validate(const SchedulerConfig& config) {
  if (config.max_num_seqs < 1) throw Error(fmt::format("max_num_seqs must be >= 1, got {}", config.max_num_seqs));
  if (config.max_model_len < 2) throw Error(fmt::format("max_model_len must be >= 2, got {}", config.max_model_len));
  if (config.max_num_batched_tokens < config.max_num_seqs) {
    throw Error(fmt::format("max_num_batched_tokens ({}) must be >= max_num_seqs ({})", config.max_num_batched_tokens,
                            config.max_num_seqs));
  }
  if (config.long_prefill_token_threshold < 0)
    throw Error(fmt::format("long_prefill_token_threshold must be >= 0, got {}", config.long_prefill_token_threshold));
  if (config.max_long_partial_prefills < 0)
    throw Error(fmt::format("max_long_partial_prefills must be >= 0, got {}", config.max_long_partial_prefills));
  if (config.max_long_partial_prefills > 0 && config.long_prefill_token_threshold == 0)
    throw Error("max_long_partial_prefills needs long_prefill_token_threshold (what makes a prefill long)");
  for (const double seconds : {config.batch_wait_seconds, config.batch_wait_ttft_seconds})
    if (!(seconds >= 0 && seconds <= 3600))
      throw Error(fmt::format("the batching window and its TTFT bound must be 0 to 3600 seconds, got {}", seconds));
}

namespace {
BlockManagerOptions checked(const SchedulerConfig& config, const BlockManagerOptions& kv_options) {
  validate(config);
  if (kv_options.num_blocks < 1 || kv_options.block_size < 1) {
    throw Error(fmt::format("KV cache needs >= 1 block of >= 1 token, got {} blocks of {}", kv_options.num_blocks,
                            kv_options.block_size));
  }
  return kv_options;
}
}  // namespace

Scheduler::Scheduler(const SchedulerConfig& config, const BlockManagerOptions& kv_options, Clock clock)
    : config_(config), block_manager_(checked(config, kv_options)), clock_(std::move(clock)), waiting_(PolicyOrder{config.policy}) {
  if (config.policy == SchedulingPolicy::kFair) fair_.emplace(config.policy);
}

double Scheduler::steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void Scheduler::check(int64_t num_prompt, int max_tokens, const TenantKv& tenant) const {
  if (num_prompt == 0) throw InvalidRequest("the prompt is empty");
  if (max_tokens < 1) throw InvalidRequest(fmt::format("max_tokens must be >= 1, got {}", max_tokens));
  if (num_prompt + 1 > config_.max_model_len) {
    throw InvalidRequest(fmt::format("the prompt has {} tokens; with one generated token that exceeds max_model_len {}",
                                     num_prompt, config_.max_model_len));
  }
  // The last generated token is sampled, never computed, so it needs no KV slot. A sequence that could
  // outgrow the whole pool would preempt itself forever: reject it now.
  const int64_t max_len = std::min<int64_t>(num_prompt + max_tokens, config_.max_model_len);
  const int num_blocks_needed = block_manager_.num_blocks_for(static_cast<int>(max_len - 1));
  if (num_blocks_needed > block_manager_.num_blocks()) {
    throw InvalidRequest(fmt::format(
        "the request needs up to {} KV blocks ({} prompt + up to {} new tokens, {} tokens per block) but the "
        "cache holds {} blocks ({} tokens)",
        num_blocks_needed, num_prompt, max_len - num_prompt, block_manager_.block_size(), block_manager_.num_blocks(),
        static_cast<int64_t>(block_manager_.num_blocks()) * block_manager_.block_size()));
  }
  if (tenant.kv_cap > 0 && num_blocks_needed > quota_blocks(tenant.kv_cap)) {
    throw InvalidRequest(fmt::format("the request needs up to {} KV blocks but tenant '{}' may hold {} (kv_cap)",
                                     num_blocks_needed, tenant.name, quota_blocks(tenant.kv_cap)));
  }
}

int64_t Scheduler::max_sequence_tokens(const TenantKv& tenant) const {
  int64_t blocks = block_manager_.num_blocks();
  if (tenant.kv_cap > 0) blocks = std::min<int64_t>(blocks, quota_blocks(tenant.kv_cap));
  return std::min<int64_t>(config_.max_model_len, blocks * block_manager_.block_size() + 1);
}

void Scheduler::check_tenant(const TenantKv& tenant) const {
  if (!(tenant.kv_share > 0 && tenant.kv_cap > 0)) return;
  const int share = quota_blocks(tenant.kv_share), cap = quota_blocks(tenant.kv_cap);
  if (share > cap)
    throw Error(fmt::format("tenant '{}': kv_share ({}) is {} KV blocks of this pool, more than its kv_cap ({}, {} blocks)",
                            tenant.name, tenant.kv_share, share, tenant.kv_cap, cap));
}

void Scheduler::add(SequenceRequest request) {
  check(std::ssize(request.prompt_token_ids), request.max_tokens, request.tenant);
  if (seqs_.contains(request.seq_id)) throw InvalidRequest(fmt::format("sequence id {} is already in use", request.seq_id));
  tenant_quotas_ = tenant_quotas_ || request.tenant.has_quota();

  const SeqId seq_id = request.seq_id;
  if (!request.submitted_s) request.submitted_s = clock_();
  auto seq = std::make_unique<Sequence>(std::move(request), next_arrival_index_++);
  if (!seq->tenant.name.empty()) {
    const auto [it, added] = tenant_index_.emplace(seq->tenant.name, static_cast<int>(tenant_names_.size()));
    if (added) tenant_names_.push_back(seq->tenant.name);
    seq->blocks.set_tenant(it->second);
  }
  if (fair_) fair_->added(*seq);
  enqueue(seq.get());
  seqs_.emplace(seq_id, std::move(seq));
}

bool Scheduler::abort(SeqId seq_id) {
  const auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return false;
  finish(*it->second, FinishReason::kAborted);
  return true;
}

const Sequence* Scheduler::find(SeqId seq_id) const {
  const auto it = seqs_.find(seq_id);
  return it == seqs_.end() ? nullptr : it->second.get();
}

StepPlan Scheduler::schedule() { return schedule(config_.max_num_batched_tokens); }

Scheduler::Load Scheduler::load() const {
  Load l;
  const double now = clock_();
  for (const Sequence* s : running_) {
    if (s->num_prompt_tokens > s->num_computed_tokens) continue;  // a prompt's chunk, not a decode
    ++l.decode_seqs;
    l.decode_kv_tokens += s->num_computed_tokens;
    if (!s->first_token_s) continue;  // its prompt's last chunk is in flight
    l.decoding.push_back(DecodingRequest{
        .elapsed_s = now - *s->first_token_s,
        .intervals_done = std::max(0, s->num_output_tokens_with_placeholders() - 1),
        .ttft_s = *s->first_token_s - s->submitted_s});
  }
  return l;
}

std::vector<SeqId> Scheduler::waiting_order() const {
  std::vector<SeqId> ids;
  for (const Sequence* s : admission_order(clock_())) ids.push_back(s->seq_id);
  return ids;
}

StepPlan Scheduler::schedule(int token_budget) {
  PAGODA_CHECK(token_budget > 0, "a step's token budget must be positive, not {}", token_budget);
  StepPlan plan;
  plan.finished = std::move(finished_since_plan_);
  finished_since_plan_.clear();
  TokenBudget budget(std::min(token_budget, config_.max_num_batched_tokens), config_.long_prefill_token_threshold,
                     config_.max_long_partial_prefills);
  held_until_.reset();
  const size_t reclaimed = static_cast<size_t>(reclaim_for_share(budget, plan));
  if (fair_) {
    schedule_fair(budget, plan, reclaimed);
  } else {
    schedule_running(budget, plan);
    // Blocks ran short this step: admitting more would only preempt again (vLLM's rule). Preemptions made for a
    // tenant's share were made to admit its request.
    if (plan.preempted.size() == reclaimed && !hold_new_requests(budget, plan)) admit_waiting(budget, plan);
  }
  share_claimant_ = nullptr;
  plan.num_scheduled_tokens = budget.num_used();
  // Periodic prefixes due soon come back from the host tier after this step's own blocks are taken.
  block_manager_.prefetch(clock_(), kMaxPrefetchBlocksPerStep);
  plan.kv_transfers = block_manager_.take_transfers();
  return plan;
}

void Scheduler::schedule_running(TokenBudget& budget, StepPlan& plan, std::vector<Sequence*>* prompts) {
  const std::vector<Sequence*> order(running_);  // preemptions change running_
  for (size_t k = 0; k < order.size() && !budget.exhausted(); ++k) {
    Sequence& seq = *order[k];
    // Preempted earlier in this step, or about to finish (update() finishes it when its last token arrives).
    if (seq.status != SeqStatus::kRunning || placeholders_reach_length_limit(seq, config_.max_model_len)) continue;
    const int pending = seq.num_tokens_with_placeholders() - seq.num_computed_tokens;
    PAGODA_CHECK(pending > 0, "running sequence {} has nothing to compute", seq.seq_id);
    if (prompts != nullptr && pending > 1) {
      prompts->push_back(&seq);
      continue;
    }
    const int num_new = budget.chunk_for(pending, &seq.tenant);
    if (num_new == 0) continue;  // a long prefill past the step's limit, or its tenant's prompt tokens are spent
    const std::span<Sequence* const> set_aside = prompts != nullptr ? std::span<Sequence* const>(*prompts) : std::span<Sequence* const>{};
    if (!reserve_blocks(seq, seq.num_computed_tokens + num_new, plan, std::span(order).subspan(k + 1), set_aside)) {
      // It preempted itself. Under fcfs and priority the sequences after it would have been victims first,
      // so none is left (or, past its tenant's cap, they wait for the next step); the slo and fair policies'
      // victim may come before others, which go on.
      if (config_.policy == SchedulingPolicy::kFcfs || config_.policy == SchedulingPolicy::kPriority) break;
      continue;
    }
    add_to_plan(plan, seq, num_new);
    budget.take(num_new, pending, &seq.tenant);
  }
  if (prompts != nullptr) std::erase_if(*prompts, [](const Sequence* s) { return s->status != SeqStatus::kRunning; });
}

bool Scheduler::reserve_blocks(Sequence& seq, int num_tokens, StepPlan& plan, std::span<Sequence* const> unplanned,
                               std::span<Sequence* const> more_unplanned) {
  // Only sequences not yet planned this step are candidates; under fcfs and priority the victim is the last
  // of them in policy order (of its tenant, or of the tenants above their share), `seq` itself when nothing
  // else is left.
  const auto candidates = [&] {  // seq, then the others still running
    std::vector<Sequence*> out{&seq};
    for (const std::span<Sequence* const> group : {unplanned, more_unplanned})
      for (Sequence* s : group)
        if (s != &seq && s->status == SeqStatus::kRunning) out.push_back(s);
    return out;
  };
  while (over_tenant_cap(seq, num_tokens)) {
    std::vector<Sequence*> own;  // the tenant's candidates, seq among them
    for (Sequence* s : candidates())
      if (s->tenant.name == seq.tenant.name) own.push_back(s);
    Sequence& victim = *own[policy_victim(own)];
    preempt(victim, plan);
    if (&victim == &seq) return false;
  }
  while (!block_manager_.allocate(seq.blocks, num_tokens)) {
    const std::vector<Sequence*> among = candidates();
    Sequence& victim = *among[pick_victim(among)];
    preempt(victim, plan);
    if (&victim == &seq) return false;
  }
  return true;
}

void Scheduler::schedule_fair(TokenBudget& budget, StepPlan& plan, size_t reclaimed) {
  // Decodes, in policy order; running sequences with prompt (or recomputed) tokens left wait for the second part.
  std::vector<Sequence*> prompts;  // set aside, in policy order; removed once planned or preempted
  schedule_running(budget, plan, &prompts);
  const auto still_running = [](const Sequence* s) { return s->status == SeqStatus::kRunning; };

  // Prompt work, tenant by tenant in order of (priority, finish tag, arrival) of each tenant's next sequence.
  // (reclaim_for_share's preemptions were made to admit a tenant below its share: they stop nothing)
  const bool window_holds = prompts.empty() && plan.preempted.size() == reclaimed && hold_new_requests(budget, plan);
  bool admitting = !window_holds;
  std::unordered_set<std::string> capped;  // tenants at their KV cap: their waiting sequences wait for the next step
  std::unordered_map<std::string, Sequence*> heads;  // per tenant its next sequence, rebuilt for each pick
  while (!budget.exhausted()) {
    admitting = admitting && plan.preempted.size() == reclaimed && num_running() < config_.max_num_seqs;
    // Each tenant's next sequence: its first running prompt (policy order), or its first waiting one.
    heads.clear();
    const auto offer = [&](const std::string& tenant, Sequence* seq) {
      auto [it, added] = heads.try_emplace(tenant, seq);
      if (!added && schedules_before(config_.policy, *seq, *it->second)) it->second = seq;
    };
    for (Sequence* seq : prompts)  // (but a long prefill past the step's limit; admit() tells a waiting one)
      if (budget.chunk_for(seq->num_tokens_with_placeholders() - seq->num_computed_tokens, &seq->tenant) > 0)
        offer(seq->tenant.name, seq);
    if (admitting) {
      fair_->for_each_waiting_tenant([&](const std::string& tenant, const FairShare::Queue& queue) {
        if (!capped.contains(tenant)) offer(tenant, *queue.begin());
      });
    }
    // Weighted fair queueing's finish tag: the tenant's service once this chunk is computed.
    Sequence* next = nullptr;
    const auto key = [&](const Sequence* s) {
      const int chunk = budget.chunk_for(s->num_tokens_with_placeholders() - s->num_computed_tokens, &s->tenant);
      return std::make_tuple(s->rank(), fair_->service(s->tenant.name) + chunk / static_cast<double>(s->tenant.weight),
                             s->arrival_index);
    };
    for (const auto& [tenant, seq] : heads)
      if (!next || key(seq) < key(next)) next = seq;
    if (!next) break;
    Sequence& seq = *next;
    if (seq.status == SeqStatus::kRunning) {
      std::erase(prompts, &seq);
      const int pending = seq.num_tokens_with_placeholders() - seq.num_computed_tokens;
      const int num_new = budget.chunk_for(pending, &seq.tenant);
      const bool reserved = reserve_blocks(seq, seq.num_computed_tokens + num_new, plan, prompts);
      std::erase_if(prompts, [&](const Sequence* s) { return !still_running(s); });
      if (!reserved) continue;
      add_to_plan(plan, seq, num_new);
      budget.take(num_new, pending, &seq.tenant);
      continue;
    }
    switch (admit(seq, budget, plan)) {
      case Admission::kAdmitted: break;
      case Admission::kSkipped: capped.insert(seq.tenant.name); break;
      case Admission::kWaitsForStep: capped.insert(seq.tenant.name); break;  // its tenant's next step
      case Admission::kNoBlocks: admitting = false; break;
    }
  }
}

int Scheduler::quota_blocks(double amount) const {
  return tenant_quota_blocks(amount, block_manager_.num_blocks(), block_manager_.block_size());
}

std::vector<std::pair<std::string, int>> Scheduler::blocks_by_tenant() const {
  std::vector<std::pair<std::string, int>> out;
  for (const Sequence* s : running_) {
    if (s->tenant.name.empty()) continue;
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& e) { return e.first == s->tenant.name; });
    if (it == out.end()) it = out.insert(out.end(), {s->tenant.name, 0});
    it->second += s->blocks.num_blocks();
  }
  return out;
}

int Scheduler::tenant_blocks(const std::string& tenant) const {
  int n = 0;
  for (const Sequence* s : running_)
    if (s->tenant.name == tenant) n += s->blocks.num_blocks();
  return n;
}

bool Scheduler::over_tenant_cap(const Sequence& seq, int num_tokens) const {
  if (seq.tenant.kv_cap <= 0 || seq.tenant.name.empty()) return false;
  const int more = std::max(0, block_manager_.num_blocks_for(num_tokens) - seq.blocks.num_blocks());
  return more > 0 && tenant_blocks(seq.tenant.name) + more > quota_blocks(seq.tenant.kv_cap);
}

size_t Scheduler::policy_victim(std::span<Sequence* const> candidates) const {
  if (fair_) return pick_preemption_victim(config_.policy, candidates, PreemptionContext{.fair_share = &*fair_});
  if (config_.policy != SchedulingPolicy::kSlo) return pick_preemption_victim(config_.policy, candidates);
  return pick_preemption_victim(config_.policy, candidates,
                                PreemptionContext{.output_lengths = &output_lengths_, .slo = config_.slo,
                                                  .now = clock_(), .max_model_len = config_.max_model_len});
}

size_t Scheduler::pick_victim(std::span<Sequence* const> candidates) const {
  if (!tenant_quotas_) return policy_victim(candidates);
  // Sequences whose tenant holds more than its share (no share: any block is more).
  std::vector<Sequence*> above;
  std::vector<size_t> where;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const TenantKv& t = candidates[i]->tenant;
    if (above_share(t, tenant_blocks(t.name))) {
      above.push_back(candidates[i]);
      where.push_back(i);
    }
  }
  if (above.empty()) return policy_victim(candidates);
  return where[policy_victim(above)];
}

bool Scheduler::deadline_first() const {
  return config_.policy == SchedulingPolicy::kSlo && (config_.slo.ttft_seconds > 0 || config_.slo.tpot_seconds > 0);
}

std::vector<Sequence*> Scheduler::admission_order(double now) const {
  if (!deadline_first()) return {waiting_.begin(), waiting_.end()};
  std::vector<std::pair<bool, Sequence*>> keyed;  // (late, sequence)
  keyed.reserve(waiting_.size());
  for (Sequence* s : waiting_) {
    const bool late = s->num_output_tokens() == 0
                          ? config_.slo.ttft_seconds > 0 && now - s->submitted_s + first_token_estimate_ > config_.slo.ttft_seconds
                          : past_slo(*s, config_.slo, now);
    keyed.emplace_back(late, s);
  }
  // Within a priority: those in time first, then the late ones oldest first. While some are late (the queue
  // outgrows what the engine serves in time), those in time go newest first: the oldest of them are the next to
  // miss, while a request served as it arrives makes it. Otherwise in arrival order.
  const bool overloaded = std::any_of(keyed.begin(), keyed.end(), [](const auto& k) { return k.first; });
  const auto key = [&](const std::pair<bool, Sequence*>& k) {
    const auto arrival = static_cast<int64_t>(k.second->arrival_index);
    return std::make_tuple(k.second->rank(), k.first, k.first || !overloaded ? arrival : -arrival);
  };
  std::sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) { return key(a) < key(b); });
  std::vector<Sequence*> order;
  order.reserve(keyed.size());
  for (const auto& [late, seq] : keyed) order.push_back(seq);
  return order;
}

bool Scheduler::hold_new_requests(const TokenBudget& budget, const StepPlan& plan) {
  held_until_.reset();
  if (config_.batch_wait_seconds <= 0 || waiting_.empty() || num_waiting() >= config_.max_num_seqs - num_running())
    return false;
  for (const ScheduledSequence& s : plan.seqs)  // the step prefills already: new prompts join it at no cost
    if (s.num_tokens > 1 || s.start_position < s.seq->num_prompt_tokens) return false;
  double oldest = std::numeric_limits<double>::infinity();
  int64_t prompt_tokens = 0;
  for (const Sequence* s : waiting_) {  // at most max_num_seqs of them (checked above)
    if (s->num_preemptions > 0) return false;  // a preempted request is never held back
    oldest = std::min(oldest, s->submitted_s);
    prompt_tokens += s->num_tokens();
  }
  if (prompt_tokens >= budget.num_left()) return false;
  double wait = config_.batch_wait_seconds;
  if (config_.batch_wait_ttft_seconds > 0) wait = std::min(wait, config_.batch_wait_ttft_seconds - first_token_estimate_);
  const double until = oldest + wait;
  if (clock_() >= until) return false;
  held_until_ = until;
  ++num_held_steps_;
  return true;
}

int Scheduler::reclaim_for_share(const TokenBudget& budget, StepPlan& plan) {
  share_claimant_ = nullptr;
  if (!tenant_quotas_) return 0;
  struct Held {
    int blocks = 0;
    const TenantKv* tenant = nullptr;
  };
  std::unordered_map<std::string, Held> held;  // by tenant, counted once (the waiting queue may be long)
  for (const Sequence* s : running_) {
    Held& h = held[s->tenant.name];
    h.blocks += s->blocks.num_blocks();
    h.tenant = &s->tenant;
  }
  const auto blocks_of = [&](const std::string& name) {
    const auto it = held.find(name);
    return it == held.end() ? 0 : it->second.blocks;
  };
  const auto below_share = [&](const TenantKv& t) {
    return t.kv_share > 0 && !t.name.empty() && blocks_of(t.name) < quota_blocks(t.kv_share);
  };
  for (Sequence* s : waiting_) {
    if (below_share(s->tenant) && !over_tenant_cap(*s, 1)) {
      share_claimant_ = s;
      break;
    }
  }
  if (share_claimant_ == nullptr) return 0;
  const TenantKv& claim = share_claimant_->tenant;
  const int chunk = budget.chunk_for(share_claimant_->num_tokens());  // before any prefix hit: a bound
  const int need = std::min(block_manager_.num_blocks_for(chunk), quota_blocks(claim.kv_share) - blocks_of(claim.name));
  if (block_manager_.num_free_blocks() >= need) return 0;
  // Victims: other tenants' sequences while their tenant is above its share (pick_victim's rule). What those tenants
  // could give without going below their shares: nothing is preempted for a claim they cannot meet.
  const auto victim = [&](const TenantKv& t) { return t.name != claim.name && above_share(t, blocks_of(t.name)); };
  int reclaimable = 0;
  for (const auto& [name, h] : held)
    if (victim(*h.tenant)) reclaimable += h.blocks - (h.tenant->kv_share > 0 ? quota_blocks(h.tenant->kv_share) : 0);
  if (block_manager_.num_free_blocks() + reclaimable < need) return 0;
  int preempted = 0;
  while (block_manager_.num_free_blocks() < need) {
    std::vector<Sequence*> victims;
    for (Sequence* s : running_)
      if (victim(s->tenant)) victims.push_back(s);
    if (victims.empty()) break;
    Sequence& v = *victims[policy_victim(victims)];
    held[v.tenant.name].blocks -= v.blocks.num_blocks();
    preempt(v, plan);
    ++preempted;
  }
  return preempted;
}

void Scheduler::admit_waiting(TokenBudget& budget, StepPlan& plan) {
  const auto room = [&] { return !budget.exhausted() && num_running() < config_.max_num_seqs; };
  // A tenant below its share first (reclaim_for_share made room for it).
  if (share_claimant_ != nullptr && share_claimant_->status != SeqStatus::kRunning && room() &&
      admit(*share_claimant_, budget, plan) == Admission::kNoBlocks)
    return;
  if (deadline_first()) {
    for (Sequence* seq : admission_order(clock_())) {
      if (!room()) break;
      if (admit(*seq, budget, plan) == Admission::kNoBlocks) break;
    }
    return;
  }
  for (auto it = waiting_.begin(); it != waiting_.end() && room();) {
    Sequence& seq = **it;
    ++it;  // admit() erases seq from waiting_
    if (admit(seq, budget, plan) == Admission::kNoBlocks) break;
  }
}

Scheduler::Admission Scheduler::admit(Sequence& seq, TokenBudget& budget, StepPlan& plan) {
  // Preempted in this plan (reclaim_for_share's victims are waiting by now): it waits for the next one. Admitting it
  // again would undo the preemption, and with a step in flight it holds that step's placeholders.
  if (std::find(plan.preempted.begin(), plan.preempted.end(), seq.seq_id) != plan.preempted.end())
    return Admission::kWaitsForStep;
  // Preempted in an earlier plan while its last step was in flight: that step's update() came before this plan.
  PAGODA_CHECK(seq.num_output_placeholders == 0, "waiting sequence {} has placeholders", seq.seq_id);
  const std::span<const TokenId> tokens(seq.token_ids);
  // Never the whole sequence: the last token must be computed to have logits to sample.
  const PrefixHit hit =
      seq.reads_prefix_cache ? block_manager_.match_prefix(tokens.first(tokens.size() - 1), seq.blocks.salt()) : PrefixHit{};
  const int pending = seq.num_tokens() - hit.num_tokens;
  const int num_new = budget.chunk_for(pending, &seq.tenant);
  if (num_new == 0) return Admission::kWaitsForStep;
  // Waits for its tenant's blocks; others go past it.
  if (over_tenant_cap(seq, hit.num_tokens + num_new)) return Admission::kSkipped;
  if (!block_manager_.allocate(seq.blocks, hit.num_tokens + num_new, hit)) return Admission::kNoBlocks;
  if (block_manager_.prefix_caching_enabled() && seq.reads_prefix_cache)
    block_manager_.record_prefix_lookup(seq.num_tokens(), hit.num_tokens, hit.num_host_blocks() * block_manager_.block_size());
  if (seq.status == SeqStatus::kWaiting) {
    seq.num_cached_tokens = hit.num_tokens;
    block_manager_.record_access(tokens, seq.blocks.salt(), hit, clock_());
  }
  seq.num_computed_tokens = hit.num_tokens;
  seq.status = SeqStatus::kRunning;
  dequeue(&seq);
  insert_running(&seq);
  add_to_plan(plan, seq, num_new);
  budget.take(num_new, pending, &seq.tenant);
  return Admission::kAdmitted;
}

void Scheduler::preempt(Sequence& seq, StepPlan& plan) {
  block_manager_.free(seq.blocks);
  // Recompute from scratch; the generated tokens stay and are re-prefilled with the prompt (their
  // blocks are often still in the prefix cache).
  seq.num_computed_tokens = 0;
  seq.status = SeqStatus::kPreempted;
  ++seq.num_preemptions;
  ++num_preemptions_;
  erase_running(&seq);
  enqueue(&seq);
  plan.preempted.push_back(seq.seq_id);
}

std::vector<SequenceOutput> Scheduler::update(const StepPlan& plan, std::span<const TokenId> sampled,
                                              const StopCheck& stop) {
  PAGODA_CHECK(static_cast<int>(sampled.size()) == plan.num_sampling(), "{} sampled tokens for {} sampling sequences",
               sampled.size(), plan.num_sampling());
  std::vector<SequenceOutput> outputs;
  outputs.reserve(sampled.size());
  size_t next_sample = 0;
  for (const ScheduledSequence& entry : plan.seqs) {
    if (!entry.samples) continue;  // computed tokens were counted when planned
    const TokenId token = sampled[next_sample++];
    const auto it = seqs_.find(entry.seq_id);
    if (it == seqs_.end()) continue;  // finished or aborted since planned: its token is dropped
    Sequence& seq = *it->second;
    PAGODA_CHECK(seq.num_output_placeholders > 0, "sequence {} has no placeholder for its token", seq.seq_id);
    --seq.num_output_placeholders;
    seq.token_ids.push_back(token);
    if (!seq.first_token_s) seq.first_token_s = clock_();
    FinishReason reason = length_finish_reason(seq, config_.max_model_len);
    if (reason == FinishReason::kNone && stop && stop(seq)) reason = FinishReason::kStop;
    outputs.push_back(SequenceOutput{seq.seq_id, token, reason, seq.num_prompt_tokens, seq.num_output_tokens(),
                                     seq.num_cached_tokens, static_cast<int>(next_sample - 1)});
    if (reason != FinishReason::kNone) {
      finish(seq, reason);
    } else if (seq.status == SeqStatus::kRunning) {
      publish_known_blocks(seq);  // a block completed by the placeholder can be shared now
    }
  }
  return outputs;
}

void Scheduler::finish(Sequence& seq, FinishReason reason) {
  block_manager_.free(seq.blocks);
  if (reason != FinishReason::kAborted) output_lengths_.record(seq.tenant.name, seq.num_output_tokens());
  if (fair_) fair_->finished(seq);
  if (seq.status == SeqStatus::kRunning) {
    erase_running(&seq);
  } else {
    dequeue(&seq);
  }
  seq.status = SeqStatus::kFinished;
  seq.finish_reason = reason;
  finished_since_plan_.push_back(seq.seq_id);
  seqs_.erase(seq.seq_id);  // destroys seq
}

void Scheduler::enqueue(Sequence* seq) {
  waiting_.insert(seq);
  if (fair_) fair_->enqueue(seq);
}

void Scheduler::dequeue(Sequence* seq) {
  waiting_.erase(seq);
  if (fair_) fair_->dequeue(seq);
}

void Scheduler::insert_running(Sequence* seq) {
  running_.insert(std::upper_bound(running_.begin(), running_.end(), seq, PolicyOrder{config_.policy}), seq);
}

void Scheduler::erase_running(const Sequence* seq) {
  const auto it = std::find(running_.begin(), running_.end(), seq);
  PAGODA_CHECK(it != running_.end());
  running_.erase(it);
}

void Scheduler::add_to_plan(StepPlan& plan, Sequence& seq, int num_tokens) {
  const int start = seq.num_computed_tokens;
  const int end = start + num_tokens;
  const bool samples = end == seq.num_tokens_with_placeholders();
  const int num_placeholder_inputs = std::max(0, end - seq.num_tokens());
  PAGODA_CHECK(num_placeholder_inputs <= 1, "sequence {}: {} placeholder inputs", seq.seq_id, num_placeholder_inputs);
  seq.num_computed_tokens = end;
  if (samples) ++seq.num_output_placeholders;
  if (fair_) fair_->charge(seq, num_tokens);
  // Publish the blocks this step fills now, not after the step: every layer stores all new K/V before
  // any attention reads them, so a sequence admitted later in this same step may already share them.
  // A block whose last token is a placeholder waits for update(). (A step that fails drops the prefix
  // cache: see Engine.)
  publish_known_blocks(seq);
  plan.seqs.push_back(ScheduledSequence{seq.seq_id, &seq, start, num_tokens, samples, num_placeholder_inputs});
}

void Scheduler::publish_known_blocks(Sequence& seq) {
  block_manager_.publish_full_blocks(seq.blocks, seq.token_ids, std::min(seq.num_computed_tokens, seq.num_tokens()));
}

std::string Scheduler::check_invariants() const {
  if (num_running() > config_.max_num_seqs) return fmt::format("{} running > max_num_seqs", num_running());
  if (running_.size() + waiting_.size() != seqs_.size()) return "a sequence is in no queue or in both";
  const PolicyOrder order{config_.policy};
  if (!std::is_sorted(running_.begin(), running_.end(), order)) return "running sequences are not in policy order";
  const int bs = block_manager_.block_size();
  std::vector<const SequenceBlocks*> tables;
  for (const auto& [seq_id, seq] : seqs_) {
    tables.push_back(&seq->blocks);
    const bool running = seq->status == SeqStatus::kRunning;
    const bool in_running = std::find(running_.begin(), running_.end(), seq.get()) != running_.end();
    const bool in_waiting = waiting_.contains(seq.get());
    if (running != in_running || running == in_waiting) return fmt::format("sequence {}: status disagrees with queues", seq_id);
    if (seq->num_tokens_with_placeholders() > config_.max_model_len)
      return fmt::format("sequence {} is longer than max_model_len", seq_id);
    if (seq->num_output_placeholders < 0) return fmt::format("sequence {} has a negative placeholder count", seq_id);
    if (!running && (seq->num_computed_tokens != 0 || seq->blocks.num_blocks() != 0)) {
      return fmt::format("waiting sequence {} holds computed tokens or blocks", seq_id);
    }
    if (running) {
      if (seq->num_computed_tokens >= seq->num_tokens_with_placeholders())
        return fmt::format("running sequence {} has nothing pending", seq_id);
      if (seq->blocks.num_blocks() * bs < seq->num_computed_tokens) return fmt::format("sequence {}: blocks do not cover computed tokens", seq_id);
      if (seq->blocks.num_blocks() > block_manager_.num_blocks_for(seq->num_tokens_with_placeholders())) {
        return fmt::format("sequence {} holds more blocks than its tokens need", seq_id);
      }
    }
  }
  if (fair_) {
    size_t queued = 0;
    fair_->for_each_waiting_tenant([&](const std::string&, const FairShare::Queue& q) { queued += q.size(); });
    if (queued != waiting_.size()) return fmt::format("{} sequences in tenant queues, {} waiting", queued, waiting_.size());
    for (Sequence* s : waiting_) {
      const FairShare::Queue* q = fair_->waiting(s->tenant.name);
      if (!q || !q->contains(s)) return fmt::format("waiting sequence {} is not in its tenant's queue", s->seq_id);
    }
  }
  for (const auto& [seq_id, seq] : seqs_) {
    const TenantKv& t = seq->tenant;
    if (t.kv_cap > 0 && tenant_blocks(t.name) > quota_blocks(t.kv_cap))
      return fmt::format("tenant '{}' holds {} blocks, over its cap of {}", t.name, tenant_blocks(t.name),
                         quota_blocks(t.kv_cap));
  }
  return block_manager_.check_invariants(tables);
}

}  // namespace pagoda
