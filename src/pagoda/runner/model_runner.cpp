// One step: plan -> ForwardBatch -> forward -> per-request sampling.
#include "pagoda/runner/model_runner.h"

#include "pagoda/core/check.h"

namespace pagoda {

ModelRunner::ModelRunner(const LlamaModel& model, Ops& ops, const KvCacheSpec& kv_spec)
    : model_(model), ops_(ops), kv_cache_(ops.allocate_kv_cache(kv_spec)) {}

ModelRunner::~ModelRunner() { ops_.free_kv_cache(kv_cache_); }

void ModelRunner::add_request(SeqId seq_id, const SamplingParams& params, uint64_t seed, int num_prompt_tokens) {
  RequestState state;
  state.params = params;
  state.device_seed = params.seed ? *params.seed : seed;
  state.rng.seed(state.device_seed);
  state.num_prompt_tokens = num_prompt_tokens;
  requests_[seq_id] = std::move(state);
}

void ModelRunner::remove_request(SeqId seq_id) { requests_.erase(seq_id); }

void ModelRunner::warm_up(int num_tokens) {
  const ForwardFn forward = [&](const ForwardBatch& b) { return model_.forward(ops_, b, kv_cache_); };
  run_filler_step(num_tokens, LogitsWanted::kLast);
  ops_.warm_up_decode(forward, /*capture_graphs=*/true);
}

void ModelRunner::profile_run(int num_tokens) {
  const ForwardFn forward = [&](const ForwardBatch& b) { return model_.forward(ops_, b, kv_cache_); };
  run_filler_step(num_tokens, LogitsWanted::kAll);
  ops_.warm_up_decode(forward, /*capture_graphs=*/false);
}

void ModelRunner::run_filler_step(int num_tokens, LogitsWanted logits) {
  const int bs = kv_cache_.spec.block_size;
  const int n = std::max(1, std::min(num_tokens, kv_cache_.spec.num_blocks * bs));
  std::vector<TokenId> tokens(static_cast<size_t>(n), 0);
  std::vector<int32_t> blocks(static_cast<size_t>((n + bs - 1) / bs));
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<int32_t>(i);
  // The KV written here lands in blocks no sequence holds yet; they are overwritten before being read.
  SequenceChunk chunk{tokens, 0, blocks, logits};
  ops_.run_step(builder_.build(std::span(&chunk, 1), bs),
                [&](const ForwardBatch& b) { return model_.forward(ops_, b, kv_cache_); });
}

bool ModelRunner::can_sample_on_device(const StepPlan& plan) const {
  if (!ops_.can_sample()) return false;
  for (const ScheduledSequence& s : plan.seqs) {
    const SamplingParams& p = requests_.at(s.seq_id).params;
    if (p.logprobs >= 0 || p.prompt_logprobs >= 0 || p.repetition_penalty != 1.0 || p.presence_penalty != 0.0 ||
        p.frequency_penalty != 0.0)
      return false;
  }
  return true;
}

StepOutput ModelRunner::execute(const StepPlan& plan) {
  StepOutput out;
  if (plan.empty()) return out;

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
    chunks_.push_back({s.known_tokens(), s.start_position, s.seq->block_table(), wanted});
    first_row[i] = num_rows;
    num_rows += wanted == LogitsWanted::kAll ? s.num_tokens : wanted == LogitsWanted::kLast ? 1 : 0;
  }
  const ForwardBatch& batch = builder_.build(chunks_, kv_cache_.spec.block_size);
  Tensor logits = ops_.run_step(batch, [&](const ForwardBatch& b) { return model_.forward(ops_, b, kv_cache_); });
  out.graph_batch_size = ops_.last_graph_batch_size();
  const int64_t vocab = model_.config().vocab_size;
  PAGODA_CHECK(logits.dim(0) == num_rows);

  if (can_sample_on_device(plan)) {  // every row is a plain draw: sample where the logits are
    device_rows_.clear();
    for (const ScheduledSequence& s : plan.seqs) {
      if (!s.samples) continue;
      const RequestState& st = requests_.at(s.seq_id);
      device_rows_.push_back({.temperature = static_cast<float>(st.params.temperature),
                              .top_k = st.params.top_k,
                              .top_p = static_cast<float>(st.params.top_p),
                              .min_p = static_cast<float>(st.params.min_p),
                              .seed = st.device_seed,
                              .offset = s.seq->output_token_ids().size()});
    }
    out.sampled.resize(device_rows_.size());
    if (!device_rows_.empty()) ops_.sample(out.sampled, logits, device_rows_);
    out.logprobs.resize(out.sampled.size());
    return out;
  }
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
    const TokenId token = sample_token(row_, st.params, s.seq->prompt_token_ids(), s.seq->output_token_ids(), st.rng);
    out.sampled.push_back(token);
    out.logprobs.push_back(st.params.logprobs >= 0 ? top_logprobs(last, st.params.logprobs, token) : TopLogprobs{});
  }
  return out;
}

}  // namespace pagoda
