// FairShare: the fair scheduling policy's bookkeeping (`--scheduling-policy fair`): how much of the engine each
// tenant has had, in tokens divided by its weight, and each tenant's waiting sequences.
//
// The rule (a weighted Virtual Token Counter, after Sheng et al., "Fairness in Serving Large Language
// Models", OSDI 2024): every token a step computes for a sequence (prompt chunk, recomputed tokens after a
// preemption, decode input) adds 1 / weight to its tenant's service; cached prompt tokens add nothing. Prompt
// work goes first to the tenant whose service would be least once its next chunk is computed (service +
// chunk / weight: weighted fair queueing's finish tag), so tenants get computed tokens in proportion to their
// weights while all of them have work waiting, and a tenant that asks for little is served as soon as it
// asks, ahead of a flood's long chunks. A tenant without unfinished sequences has its service raised, when a sequence
// of it is added, to the least service among tenants with unfinished sequences (or, when there are none, to
// where the last of them left off): idle time banks no credit. Requests without a tenant share the tenant "".
//
// Tenant names are the configured tenants' (bounded); entries are never removed.
#pragma once

#include <set>
#include <string>
#include <unordered_map>

#include "pagoda/sched/policy.h"
#include "pagoda/sched/sequence.h"

namespace pagoda {

class FairShare {
 public:
  // The waiting sequences of a tenant in policy order (rank, then arrival).
  using Queue = std::set<Sequence*, PolicyOrder>;

  explicit FairShare(SchedulingPolicy order) : order_(order) {}

  // A sequence was added (before it is enqueued): raises its tenant's service if the tenant was idle.
  void added(const Sequence& seq);
  // A sequence finished or was aborted.
  void finished(const Sequence& seq);
  void enqueue(Sequence* seq);  // the sequence is waiting (new or preempted)
  void dequeue(Sequence* seq);  // it no longer waits (admitted or finished)
  // A step computes num_tokens tokens of the sequence.
  void charge(const Sequence& seq, int num_tokens);

  // Tokens / weight computed for the tenant so far, after raises (0 for a tenant not seen).
  double service(const std::string& tenant) const;
  const Queue* waiting(const std::string& tenant) const;  // null when the tenant has none waiting
  // f(name, queue) for each tenant with waiting sequences (only those are walked).
  template <typename F>
  void for_each_waiting_tenant(F&& f) const {
    for (const std::string& name : waiting_tenants_) f(name, tenants_.at(name).waiting);
  }

 private:
  struct Tenant {
    explicit Tenant(SchedulingPolicy order) : waiting(PolicyOrder{order}) {}
    double service = 0;
    int unfinished = 0;
    Queue waiting;
  };
  Tenant& tenant(const std::string& name);

  SchedulingPolicy order_;
  std::unordered_map<std::string, Tenant> tenants_;
  std::set<std::string> waiting_tenants_;  // names of the tenants whose queue is not empty
  int num_active_ = 0;    // tenants with unfinished sequences
  double idle_floor_ = 0;  // the service of the last tenant to go idle when none was left active
};

}  // namespace pagoda
