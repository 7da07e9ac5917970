// One step: plan -> ForwardBatch -> forward -> per-request sampling.
#include "pagoda/runner/model_runner.h"

#include <spdlog/spdlog.h>

#include <limits>

#include "pagoda/core/check.h"

namespace pagoda {

ModelRunner::ModelRunner(const LlamaModel& model, Ops& ops, const KvCacheSpec& kv_spec, int num_host_blocks,
                         const LlamaModel* fallback)
    : model_(model), fallback_(fallback), ops_(ops), kv_cache_(ops.allocate_kv_cache(kv_spec)) {
  try {
    kv_host_ = ops.allocate_kv_host_store(kv_spec, num_host_blocks);
  } catch (...) {
    ops_.free_kv_cache(kv_cache_);
    throw;
  }
}

ModelRunner::~ModelRunner() {
  ops_.free_kv_host_store(kv_host_);
  ops_.free_kv_cache(kv_cache_);
}

void ModelRunner::copy_kv_blocks(const KvTransfers& transfers) {
  if (!transfers.empty()) ops_.copy_kv_blocks(kv_cache_, kv_host_, transfers);
}

namespace {

bool has_penalties(const SamplingParams& p) {
  return p.repetition_penalty != 1.0 || p.presence_penalty != 0.0 || p.frequency_penalty != 0.0;
}

// Penalties read every earlier output token on the host, logprobs come from host logits, and the device
// sampler has no logit bias or token masks; a constraint's mask follows the previous token. Such requests are sampled on
// the host and their steps are never planned ahead of the previous step's results.
bool needs_host_sampling(const SamplingParams& p) {
  return p.logprobs >= 0 || p.prompt_logprobs >= 0 || has_penalties(p) || !p.logit_bias.empty() ||
         p.token_masks != nullptr || p.constraint;
}

}  // namespace

void ModelRunner::add_request(SeqId seq_id, const SamplingParams& params, uint64_t seed, int num_prompt_tokens) {
  RequestState state;
  state.params = params;
  state.device_seed = params.seed ? *params.seed : seed;
  state.rng.seed(state.device_seed);
  state.num_prompt_tokens = num_prompt_tokens;
  if (params.constraint) state.matcher = std::make_unique<structured::ConstraintMatcher>(params.constraint);
  remove_request(seq_id);
  num_synchronous_requests_ += needs_host_sampling(params) ? 1 : 0;
  requests_[seq_id] = std::move(state);
}

void ModelRunner::remove_request(SeqId seq_id) {
  const auto it = requests_.find(seq_id);
  if (it == requests_.end()) return;
  num_synchronous_requests_ -= needs_host_sampling(it->second.params) ? 1 : 0;
  requests_.erase(it);
}

std::vector<std::pair<const LlamaModel*, WeightSet>> ModelRunner::models() const {
  std::vector<std::pair<const LlamaModel*, WeightSet>> out = {{&model_, WeightSet::kPrimary}};
  if (fallback_) out.emplace_back(fallback_, WeightSet::kFallback);
  return out;
}

ForwardFn ModelRunner::forward_of(const LlamaModel& model) {
  return [this, &model](const ForwardBatch& b) { return model.forward(ops_, b, kv_cache_); };
}

void ModelRunner::warm_up(int num_tokens) {
  for (const auto& [model, set] : models()) {
    run_filler_step(*model, num_tokens, LogitsWanted::kLast);
    ops_.warm_up_decode(forward_of(*model), /*capture_graphs=*/true, static_cast<int>(set));
  }
  forget_kv_calibration();
}

void ModelRunner::profile_run(int num_tokens) {
  for (const auto& [model, set] : models()) {
    run_filler_step(*model, num_tokens, LogitsWanted::kAll);
    ops_.warm_up_decode(forward_of(*model), /*capture_graphs=*/false, static_cast<int>(set));
  }
  forget_kv_calibration();
}

// Per-layer FP8 KV scales (--calculate-kv-scales) come from the first real batch, not the filler tokens.
void ModelRunner::forget_kv_calibration() {
  kv_cache_.k_layer_exp.clear();
  kv_cache_.v_layer_exp.clear();
}

void ModelRunner::run_filler_step(const LlamaModel& model, int num_tokens, LogitsWanted logits) {
  const int bs = kv_cache_.spec.block_size;
  const int n = std::max(1, std::min(num_tokens, kv_cache_.spec.num_blocks * bs));
  std::vector<TokenId> tokens(static_cast<size_t>(n), 0);
  std::vector<int32_t> blocks(static_cast<size_t>((n + bs - 1) / bs));
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<int32_t>(i);
  // The KV written here lands in blocks no sequence holds yet; they are overwritten before being read.
  SequenceChunk chunk{tokens, 0, blocks, logits};
  ops_.run_step(builder_.build(std::span(&chunk, 1), bs), forward_of(model));
}

bool ModelRunner::can_sample_on_device(const StepPlan& plan) const {
  if (!ops_.can_sample()) return false;
  for (const ScheduledSequence& s : plan.seqs)
    if (needs_host_sampling(requests_.at(s.seq_id).params)) return false;
  return true;
}

StepOutput ModelRunner::execute(const StepPlan& plan, WeightSet weights) {
  InFlightStep step = launch(plan, weights);
  return collect(step);
}

StepOutput ModelRunner::collect(InFlightStep& step) {
  if (step.device_sample) {
    step.output.sampled.resize(static_cast<size_t>(step.device_sample->num_rows));
    ops_.wait_sample(*step.device_sample, step.output.sampled);
    step.output.logprobs.resize(step.output.sampled.size());
    step.device_sample.reset();
  }
  return std::move(step.output);
}

InFlightStep ModelRunner::launch(const StepPlan& plan, WeightSet weights) {
  PAGODA_CHECK(weights == WeightSet::kPrimary || fallback_, "a step on the fallback weights, which this runner lacks");
  const LlamaModel& model = weights == WeightSet::kFallback ? *fallback_ : model_;
  InFlightStep step;
  copy_kv_blocks(plan.kv_transfers);
  if (plan.empty()) return step;

  // Which logits rows each sequence needs: all rows of a prompt chunk that still owes prompt logprobs,
  // else the last row when it samples.
  chunks_.clear();
  std::vector<int> first_row(plan.seqs.size());
  int num_rows = 0;
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const ScheduledSequence& s = plan.seqs[i];
    RequestState& st = requests_.at(s.seq_id);
    const bool owes_prompt_logprobs = st.params.prompt_logprobs >= 0 &&
                                      st.next_prompt_logprob < st.num_prompt_tokens &&
                                      s.start_position + s.num_tokens >= st.next_prompt_logprob;
    const LogitsWanted wanted = owes_prompt_logprobs ? LogitsWanted::kAll
                                : s.samples          ? LogitsWanted::kLast
                                                     : LogitsWanted::kNone;
    int prev_sample_row = -1;
    if (s.num_placeholder_inputs > 0) {  // sampled by the previous launched step
      const auto row = previous_samples_.row_of.find(s.seq_id);
      PAGODA_CHECK(row != previous_samples_.row_of.end(), "sequence {}: its placeholder was not sampled by the previous step",
                   s.seq_id);
      PAGODA_CHECK(!has_penalties(st.params), "sequence {}: penalties need its previous token on the host", s.seq_id);
      prev_sample_row = row->second;
    }
    chunks_.push_back({s.known_tokens(), s.start_position, s.seq->block_table(), wanted, prev_sample_row});
    first_row[i] = num_rows;
    num_rows += wanted == LogitsWanted::kAll ? s.num_tokens : wanted == LogitsWanted::kLast ? 1 : 0;
  }
  const ForwardBatch* batch = &builder_.build(chunks_, kv_cache_.spec.block_size);
  if (batch->num_tokens_from_prev_sample > 0 && !previous_samples_.on_device)
    batch = &builder_.resolve_on_host(previous_samples_.host_ids);
  Tensor logits = ops_.run_step(*batch, forward_of(model), static_cast<int>(weights));
  step.output.graph_batch_size = ops_.last_graph_batch_size();
  PAGODA_CHECK(logits.dim(0) == num_rows);

  previous_samples_.row_of.clear();
  int row = 0;
  for (const ScheduledSequence& s : plan.seqs)
    if (s.samples) previous_samples_.row_of[s.seq_id] = row++;
  if (can_sample_on_device(plan)) {
    sample_on_device(plan, logits, step);
  } else {
    sample_on_host(plan, logits, first_row, step);
  }
  return step;
}

void ModelRunner::sample_on_device(const StepPlan& plan, Tensor logits, InFlightStep& step) {
  // Every row is a plain draw: sample where the logits are.
  device_rows_.clear();
  for (const ScheduledSequence& s : plan.seqs) {
    if (!s.samples) continue;
    const RequestState& st = requests_.at(s.seq_id);
    // The draw is keyed by the token's index among the outputs, placeholders before it included.
    const int output_index = s.start_position + s.num_tokens - s.seq->num_prompt_tokens;
    device_rows_.push_back({.temperature = static_cast<float>(st.params.temperature),
                            .top_k = st.params.top_k,
                            .top_p = static_cast<float>(st.params.top_p),
                            .min_p = static_cast<float>(st.params.min_p),
                            .seed = st.device_seed,
                            .offset = static_cast<uint64_t>(output_index)});
  }
  previous_samples_.host_ids.clear();
  previous_samples_.on_device = !device_rows_.empty();
  // With no rows this marks the step's end, which collect() waits for: the engine then knows when it ran.
  step.device_sample = ops_.enqueue_sample(logits, device_rows_);
}

void ModelRunner::sample_on_host(const StepPlan& plan, Tensor logits, const std::vector<int>& first_row,
                                 InFlightStep& step) {
  StepOutput& out = step.output;
  const int64_t vocab = model_.config().vocab_size;
  const int num_rows = static_cast<int>(logits.dim(0));
  host_logits_.resize(static_cast<size_t>(num_rows * vocab));
  if (num_rows > 0) ops_.download_f32(Tensor(host_logits_.data(), DType::kF32, {num_rows, vocab}), logits);

  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const ScheduledSequence& s = plan.seqs[i];
    RequestState& st = requests_.at(s.seq_id);
    const std::span<const float> rows(host_logits_.data() + static_cast<int64_t>(first_row[i]) * vocab,
                                      static_cast<size_t>(chunks_[i].logits == LogitsWanted::kAll ? s.num_tokens : 1) * vocab);
    if (chunks_[i].logits == LogitsWanted::kAll) {
      // Row r predicts the token at position start + r + 1.
      auto& entries = out.prompt_logprobs[s.seq_id];
      for (int r = 0; r < s.num_tokens; ++r) {
        const int target = s.start_position + r + 1;
        if (target != st.next_prompt_logprob || target >= st.num_prompt_tokens) continue;
        entries.push_back(top_logprobs(rows.subspan(static_cast<size_t>(r) * vocab, vocab), st.params.prompt_logprobs,
                                       s.seq->token_ids[target]));
        ++st.next_prompt_logprob;
      }
    }
    if (!s.samples) continue;
    const std::span<const float> last = rows.subspan(rows.size() - vocab, vocab);
    row_.assign(last.begin(), last.end());
    if (st.matcher) st.matcher->mask_logits(row_);
    // Output ids matter only for penalties, whose steps never have placeholders.
    const TokenId token = sample_token(row_, st.params, s.seq->prompt_token_ids(), s.seq->output_token_ids(), st.rng);
    // Masks that leave no token (allowed_token_ids, bad_words and an output constraint with nothing in common, or NaN
    // logits): the sampler falls back to token 0, which no mask allowed. The request ends instead.
    const bool nothing_left = row_[static_cast<size_t>(token)] == -std::numeric_limits<float>::infinity();
    if (nothing_left) {
      out.sampling_failures.emplace(s.seq_id, "no token is left to sample: allowed_token_ids, bad_words and the output "
                                              "constraint together mask every token");
    } else if (st.matcher && !st.matcher->accept(token)) {  // the mask leaves only what it accepts: not expected
      out.sampling_failures.emplace(s.seq_id, fmt::format("sampled token {} is outside its output constraint", token));
    } else if (st.matcher && !st.matcher->error().empty()) {
      out.sampling_failures.emplace(s.seq_id, "the output constraint could not be followed: " + st.matcher->error());
    }
    if (out.sampling_failures.contains(s.seq_id) && !st.failure_logged) {
      spdlog::warn("sequence {}: {}", s.seq_id, out.sampling_failures.at(s.seq_id));
      st.failure_logged = true;
    }
    out.sampled.push_back(token);
    out.logprobs.push_back(st.params.logprobs >= 0 ? top_logprobs(last, st.params.logprobs, token) : TopLogprobs{});
  }
  previous_samples_.host_ids = out.sampled;
  previous_samples_.on_device = false;
}

}  // namespace pagoda
