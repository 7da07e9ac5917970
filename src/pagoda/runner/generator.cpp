// One request, start to finish: prefill in chunks, sample, decode until a stop condition.
#include "pagoda/runner/generator.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "pagoda/core/error.h"

namespace pagoda {

std::string_view finish_reason_name(FinishReason reason) {
  return reason == FinishReason::kStop ? "stop" : "length";
}

Generator::Generator(const LlamaModel& model, Ops& ops, const GeneratorOptions& options)
    : model_(model), ops_(ops), options_(options) {
  max_model_len_ = options.max_model_len > 0 ? options.max_model_len : model.config().max_position_embeddings;
}

void Generator::ensure_cache(int num_tokens) {
  const int bs = options_.block_size;
  const int needed = (num_tokens + bs - 1) / bs;
  if (static_cast<int>(block_table_.size()) >= needed) return;
  // Called between requests only: a new pool discards the previous request's KV.
  // One sequence owns the whole pool: blocks 0..n-1 in order.
  cache_ = ops_.allocate_kv_cache(model_.kv_cache_spec(needed, bs, ops_.activation_dtype()));
  block_table_.resize(static_cast<size_t>(needed));
  std::iota(block_table_.begin(), block_table_.end(), 0);
}

GenerationOutput Generator::generate(std::span<const TokenId> prompt_ids, const SamplingParams& params,
                                     std::span<const TokenId> eos_token_ids,
                                     const std::function<void(TokenId)>& on_token) {
  const int num_prompt = static_cast<int>(prompt_ids.size());
  if (num_prompt == 0) throw InvalidRequest("the prompt is empty");
  if (num_prompt >= max_model_len_)
    throw InvalidRequest(fmt::format("the prompt has {} tokens but the model's context is {} (max_model_len)",
                                     num_prompt, max_model_len_));
  const int vocab = model_.config().vocab_size;
  for (TokenId id : prompt_ids)
    if (id < 0 || id >= vocab) throw InvalidRequest(fmt::format("token id {} is outside the vocabulary ({})", id, vocab));

  const int budget = std::min(max_model_len_, num_prompt + std::max(params.max_tokens, 0));
  ensure_cache(budget);

  SamplerRng rng(params.seed ? *params.seed : std::random_device{}());
  GenerationOutput out;
  std::vector<TokenId> all_ids(prompt_ids.begin(), prompt_ids.end());
  std::vector<float> row(static_cast<size_t>(vocab));
  std::vector<float> raw_row;
  const bool want_prompt_logprobs = params.prompt_logprobs >= 0;
  if (want_prompt_logprobs) out.prompt_logprobs.emplace_back();

  // Returns the host logits of the last row of the step; records prompt logprobs on the way.
  auto run_step = [&](std::span<const TokenId> tokens, int start, LogitsWanted wanted) {
    SequenceChunk chunk{tokens, start, block_table_, wanted};
    const ForwardBatch& batch = builder_.build(std::span(&chunk, 1), options_.block_size);
    Tensor logits = model_.forward(ops_, batch, cache_);
    const int64_t rows = logits.dim(0);
    if (wanted == LogitsWanted::kAll) {
      std::vector<float> host(static_cast<size_t>(rows * vocab));
      ops_.download_f32(Tensor(host.data(), DType::kF32, {rows, vocab}), logits);
      // Row r predicts prompt token start + r + 1.
      for (int64_t r = 0; r < rows && start + r + 1 < num_prompt; ++r) {
        const int next = start + static_cast<int>(r) + 1;
        out.prompt_logprobs.push_back(top_logprobs(std::span(host).subspan(r * vocab, vocab),
                                                   params.prompt_logprobs, prompt_ids[next]));
      }
      std::copy_n(host.begin() + (rows - 1) * vocab, vocab, row.begin());
    } else {
      ops_.download_f32(Tensor(row.data(), DType::kF32, {1, vocab}), logits.rows(rows - 1, 1));
    }
  };

  // Prefill, chunk by chunk; only the last chunk's last row is sampled (all rows for prompt logprobs).
  for (int start = 0; start < num_prompt; start += options_.prefill_chunk) {
    const int n = std::min(options_.prefill_chunk, num_prompt - start);
    const bool last = start + n == num_prompt;
    run_step(prompt_ids.subspan(start, n), start,
             want_prompt_logprobs ? LogitsWanted::kAll : (last ? LogitsWanted::kLast : LogitsWanted::kNone));
  }

  const auto is_stop = [&](TokenId id) {
    if (!params.ignore_eos && std::find(eos_token_ids.begin(), eos_token_ids.end(), id) != eos_token_ids.end())
      return true;
    return std::find(params.stop_token_ids.begin(), params.stop_token_ids.end(), id) != params.stop_token_ids.end();
  };

  while (true) {
    if (static_cast<int>(out.output_ids.size()) >= params.max_tokens) {
      out.finish_reason = FinishReason::kLength;
      break;
    }
    if (params.logprobs >= 0) raw_row = row;  // logprobs report the raw model distribution
    const TokenId id = sample_token(row, params, prompt_ids, out.output_ids, rng);
    if (params.logprobs >= 0) out.logprobs.push_back(top_logprobs(raw_row, params.logprobs, id));
    out.output_ids.push_back(id);
    all_ids.push_back(id);
    if (on_token) on_token(id);
    if (is_stop(id)) {
      out.finish_reason = FinishReason::kStop;
      break;
    }
    const int seq_len = static_cast<int>(all_ids.size());
    if (static_cast<int>(out.output_ids.size()) >= params.max_tokens || seq_len >= max_model_len_) {
      out.finish_reason = FinishReason::kLength;
      break;
    }
    run_step(std::span(&all_ids.back(), 1), seq_len - 1, LogitsWanted::kLast);
  }
  return out;
}

}  // namespace pagoda
