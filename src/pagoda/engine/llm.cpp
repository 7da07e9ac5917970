// LLM: model + CPU backend + engine, and a blocking generate().
#include "pagoda/engine/llm.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>

#include "pagoda/core/error.h"
#include "pagoda/core/logging.h"
#include "pagoda/core/memory_size.h"
#include "pagoda/loader/weight_residency.h"

namespace pagoda {

std::vector<TokenId> model_eos_token_ids(const LoadedModel& m) {
  if (!m.generation.eos_token_ids.empty()) return m.generation.eos_token_ids;
  if (!m.config.eos_token_ids.empty()) return m.config.eos_token_ids;
  return m.tokenizer ? m.tokenizer->eos_token_ids() : std::vector<TokenId>{};
}

void append_event(CompletionOutput& out, const RequestEvent& e) {
  out.output_ids.insert(out.output_ids.end(), e.new_token_ids.begin(), e.new_token_ids.end());
  out.logprobs.insert(out.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
  if (!e.prompt_logprobs.empty()) out.prompt_logprobs = e.prompt_logprobs;
  out.usage = e.usage;
  if (e.finished) {
    out.finish_reason = e.finish_reason;
    out.error = e.error;
  }
}

LLM::LLM(const LlmOptions& o) : loaded_(load_model(o.load)), block_size_(o.block_size) {
  if (!o.use_mmap) copy_weights_into_memory(loaded_);
  const ModelConfig& c = loaded_.config;
  max_model_len_ = o.max_model_len > 0 ? std::min(o.max_model_len, c.max_position_embeddings) : c.max_position_embeddings;
  ops_ = std::make_unique<CpuOps>(CpuOpsOptions{.num_threads = o.num_threads});
  model_ = std::make_unique<LlamaModel>(c, loaded_.weights);

  const int64_t block_bytes = model_->kv_cache_spec(1, o.block_size, ops_->activation_dtype()).bytes_per_block();
  int64_t kv_bytes = o.kv_cache_memory;
  if (kv_bytes <= 0) {
    const int64_t wanted = static_cast<int64_t>(o.max_num_seqs) * ((max_model_len_ + o.block_size - 1) / o.block_size) * block_bytes;
    const int64_t available = host_available_memory();
    kv_bytes = available > 0 ? std::min(wanted, available / 4) : wanted;
  }
  num_kv_blocks_ = static_cast<int>(kv_bytes / block_bytes);
  if (num_kv_blocks_ < 1)
    throw Error(fmt::format("--kv-cache-memory {} holds no KV block ({} per block of {} tokens)",
                            format_memory_size(kv_bytes), format_memory_size(block_bytes), o.block_size));
  spdlog::info("KV cache: {} blocks x {} tokens = {} tokens ({})", num_kv_blocks_, o.block_size,
               static_cast<int64_t>(num_kv_blocks_) * o.block_size, format_memory_size(num_kv_blocks_ * block_bytes));

  EngineOptions eo;
  eo.scheduler = SchedulerConfig{.max_num_seqs = o.max_num_seqs,
                                 .max_num_batched_tokens = std::max(o.max_num_batched_tokens, o.max_num_seqs),
                                 .max_model_len = max_model_len_,
                                 .policy = o.policy};
  eo.block_size = o.block_size;
  eo.num_kv_blocks = num_kv_blocks_;
  eo.enable_prefix_caching = o.enable_prefix_caching;
  eo.eos_token_ids = model_eos_token_ids(loaded_);
  eo.seed = o.seed;
  engine_ = std::make_unique<Engine>(*model_, *ops_, eo);
}

LLM::~LLM() { engine_.reset(); }

std::vector<CompletionOutput> LLM::generate(const std::vector<GenerateRequest>& requests) {
  std::vector<CompletionOutput> outputs(requests.size());
  std::mutex mutex;
  std::condition_variable done;
  size_t num_done = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    outputs[i].prompt_ids = requests[i].prompt_ids;
    engine_->submit(requests[i], [&, i](const RequestEvent& e) {
      append_event(outputs[i], e);  // only the engine thread writes, until it signals done
      if (e.finished) {
        std::lock_guard lock(mutex);
        ++num_done;
        done.notify_one();
      }
    });
  }
  std::unique_lock lock(mutex);
  done.wait(lock, [&] { return num_done == requests.size(); });
  return outputs;
}

}  // namespace pagoda
