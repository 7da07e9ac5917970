// LLM: the offline convenience API (as vLLM's LLM class): load a model, start an engine, run a list of
// requests to completion, get the outputs back in input order.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pagoda/backend/cpu/cpu_ops.h"
#include "pagoda/engine/engine.h"
#include "pagoda/loader/model_loader.h"

namespace pagoda {

struct LlmOptions {
  LoadOptions load;
  int num_threads = 0;
  int max_num_seqs = 256;
  int max_num_batched_tokens = 2048;
  int max_model_len = 0;           // 0: the model's context
  int block_size = 16;
  int64_t kv_cache_memory = 0;     // bytes; 0: enough for max_num_seqs full sequences, at most 25% of free RAM
  bool enable_prefix_caching = true;
  SchedulingPolicy policy = SchedulingPolicy::kFcfs;
  uint64_t seed = 0;
  // false (default): copy the weights out of the file mapping into process memory (huge pages where
  // possible): a private copy is not reclaimed from under the decode loop (docs/PERFORMANCE.md has the
  // measurement). true: compute straight from the mapping (less memory).
  bool use_mmap = false;
};

struct CompletionOutput {
  std::vector<TokenId> prompt_ids;
  std::vector<TokenId> output_ids;
  std::string finish_reason;  // "stop", "length", "abort", "error"
  std::string error;
  std::vector<TopLogprobs> logprobs;
  std::vector<TopLogprobs> prompt_logprobs;
  Usage usage;
};

class LLM {
 public:
  explicit LLM(const LlmOptions& options);
  ~LLM();

  const LoadedModel& model() const { return loaded_; }
  const Tokenizer* tokenizer() const { return loaded_.tokenizer.get(); }
  Engine& engine() { return *engine_; }
  int max_model_len() const { return max_model_len_; }
  int num_kv_tokens() const { return num_kv_blocks_ * block_size_; }

  // Submits every request at once and waits for all of them; outputs are in input order.
  std::vector<CompletionOutput> generate(const std::vector<GenerateRequest>& requests);

 private:
  LoadedModel loaded_;
  std::unique_ptr<CpuOps> ops_;
  std::unique_ptr<LlamaModel> model_;
  std::unique_ptr<Engine> engine_;
  int max_model_len_ = 0;
  int num_kv_blocks_ = 0;
  int block_size_ = 16;
};

// Folds one engine event into the request's output (tokens, logprobs, usage, finish reason).
void append_event(CompletionOutput& out, const RequestEvent& event);

// The EOS ids a model stops on: generation_config.json's, else config.json's, else the tokenizer's.
std::vector<TokenId> model_eos_token_ids(const LoadedModel& model);

}  // namespace pagoda
