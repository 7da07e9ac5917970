// `pagoda eval perplexity`: the perplexity of a model on a text file in llama.cpp's `llama-perplexity`
// convention (eval/perplexity.h): every chunk runs through the engine as one request whose prompt logprobs
// give each scored token's log-probability.
#include <nlohmann/json.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>

#include "pagoda/cli/commands.h"
#include "pagoda/cli/engine_options.h"
#include "pagoda/cli/number_checks.h"
#include "pagoda/core/error.h"
#include "pagoda/core/text_file.h"
#include "pagoda/eval/perplexity.h"
#include "pagoda/loader/progress_bar.h"

namespace pagoda::cli {
namespace {

struct PerplexityOptions {
  EngineCliOptions engine;
  std::string text_file;
  int ctx_size = 512;
  int chunks = 0;  // 0: all
  bool no_special = false;
  bool json = false;
};

// The request that scores one chunk. Its prompt is the chunk without its last token: the prompt logprobs
// score tokens 1 .. ctx-2, and the one generated token's logprobs, over the whole vocabulary, score the last
// token. (A prompt of the whole chunk plus a generated token would not fit a model whose context is ctx.)
GenerateRequest chunk_request(const std::vector<TokenId>& chunk, int vocab_size) {
  GenerateRequest r;
  r.prompt_ids.assign(chunk.begin(), chunk.end() - 1);
  r.params.temperature = 0.0;
  r.params.max_tokens = 1;
  r.params.ignore_eos = true;
  r.params.prompt_logprobs = 0;  // the prompt token's own logprob is always included
  r.params.logprobs = vocab_size;
  return r;
}

float logprob_of(const TopLogprobs& entries, TokenId id, int position) {
  for (const TokenLogprob& e : entries)
    if (e.id == id) return e.logprob;
  throw Error(fmt::format("the engine returned no logprob for token {} at position {}", id, position));
}

// The negative log-likelihoods of the chunk's scored tokens, in position order.
std::vector<double> chunk_nlls(const std::vector<TokenId>& chunk, const CompletionOutput& out) {
  const int ctx = static_cast<int>(chunk.size());
  if (out.finish_reason == FinishReason::kError) throw InvalidRequest(out.error);
  PAGODA_CHECK(static_cast<int>(out.prompt_logprobs.size()) == ctx - 1 && out.logprobs.size() == 1,
               "chunk of {}: {} prompt logprobs, {} generated", ctx, out.prompt_logprobs.size(), out.logprobs.size());
  std::vector<double> nlls;
  nlls.reserve(static_cast<size_t>(tokens_scored_per_chunk(ctx)));
  for (int pos = first_scored_position(ctx); pos < ctx; ++pos) {
    const TopLogprobs& entries = pos < ctx - 1 ? out.prompt_logprobs[static_cast<size_t>(pos)] : out.logprobs[0];
    nlls.push_back(-static_cast<double>(logprob_of(entries, chunk[static_cast<size_t>(pos)], pos)));
  }
  return nlls;
}

// Runs every chunk at once through the engine (continuous batching), counting finished ones on `progress`;
// returns each chunk's NLLs, in chunk order.
std::vector<std::vector<double>> score_chunks(LLM& llm, const std::vector<std::vector<TokenId>>& chunks,
                                              ProgressBar& progress) {
  const int vocab = static_cast<int>(llm.model().config.vocab_size);
  std::vector<CompletionOutput> outputs(chunks.size());
  std::vector<std::vector<double>> nlls(chunks.size());
  std::vector<std::string> errors(chunks.size());
  std::mutex mutex;
  std::condition_variable changed;
  size_t num_done = 0;
  std::vector<Engine::Submission> submissions;
  submissions.reserve(chunks.size());
  for (size_t i = 0; i < chunks.size(); ++i) {
    submissions.push_back({chunk_request(chunks[i], vocab), [&, i](const RequestEvent& e) {  // the engine thread
                             append_event(outputs[i], e);
                             if (!e.finished) return;
                             // Scored as each chunk finishes, so that only the chunks in flight hold their
                             // vocabulary-sized logprobs; a failure is reported by the waiting thread, not thrown on
                             // the engine's.
                             try {
                               nlls[i] = chunk_nlls(chunks[i], outputs[i]);
                             } catch (const std::exception& ex) {
                               errors[i] = ex.what();
                             }
                             outputs[i] = CompletionOutput{};
                             std::lock_guard lock(mutex);
                             ++num_done;
                             changed.notify_one();
                           }});
  }
  llm.engine().submit_all(std::move(submissions));  // at once: the same steps, so the same figure, every run
  for (size_t seen = 0; seen < chunks.size();) {
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return num_done > seen; });
    progress.advance(static_cast<int64_t>(num_done - seen));
    seen = num_done;
  }
  progress.finish();
  for (const std::string& error : errors)
    if (!error.empty()) throw Error(error);
  return nlls;
}

void run_perplexity(PerplexityOptions& o) {
  if (o.ctx_size < 3)
    throw InvalidRequest(fmt::format("--ctx-size must be at least 3 (a chunk of {} has no token in its scored "
                                     "second half)", o.ctx_size));
  const std::string text = read_text_file(o.text_file, "the text");  // before the model loads: fail fast
  LlmOptions lo = o.engine.llm_options();
  lo.enable_prefix_caching = false;  // a repeated chunk must be computed, not served from the cache
  if (lo.max_model_len <= 0) {  // size the KV cache for chunks, not the full context (checked against it below)
    lo.max_model_len = o.ctx_size;
    lo.max_model_len_at_most = true;
  }
  LLM llm(lo);
  if (o.ctx_size > llm.max_model_len())
    throw InvalidRequest(fmt::format("--ctx-size {} is larger than the model's context ({} tokens{})", o.ctx_size,
                                     llm.max_model_len(), o.engine.max_model_len > 0 ? " with --max-model-len" : ""));
  const Tokenizer* tok = llm.tokenizer();
  if (tok == nullptr) throw InvalidRequest("this model has no tokenizer; give one with --tokenizer DIR");

  const auto t0 = std::chrono::steady_clock::now();
  // The file as one string with the tokenizer's special tokens, as llama.cpp tokenizes it (add_bos): the BOS
  // shifts every chunk boundary by one token, and the references (tests/data/refs/quant_refs_part1.json)
  // agree only with it. Each chunk's first token becomes BOS below as well.
  const std::vector<TokenId> tokens = tok->encode(text, EncodeOptions{.add_special_tokens = !o.no_special});
  if (tokens.size() < static_cast<size_t>(o.ctx_size))
    throw InvalidRequest(fmt::format("{}: {} tokens, fewer than one chunk of --ctx-size {}", o.text_file,
                                     tokens.size(), o.ctx_size));
  const std::vector<std::vector<TokenId>> chunks =
      perplexity_chunks(tokens, o.ctx_size, o.chunks, llm.model().config.bos_token_id);
  ProgressBar progress("perplexity", static_cast<int64_t>(chunks.size()), "chunks", /*requested=*/true);
  NllAccumulator acc;
  for (const std::vector<double>& chunk : score_chunks(llm, chunks, progress))
    for (double nll : chunk) acc.add(nll);
  const PerplexityStats s = acc.stats();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  if (o.json) {
    const nlohmann::json j = {{"perplexity", s.perplexity},
                              {"perplexity_stderr", s.perplexity_stderr},
                              {"nll_mean", s.nll_mean},
                              {"nll_stderr", s.nll_stderr},
                              {"tokens_scored", s.tokens_scored},
                              {"text_tokens", tokens.size()},
                              {"chunks", chunks.size()},
                              {"ctx_size", o.ctx_size},
                              {"model", llm.model().source},
                              {"device", o.engine.device},
                              {"seconds", seconds}};
    std::puts(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::printf("perplexity: %.3f +/- %.3f (%lld tokens scored in %zu chunks of %d)\n", s.perplexity,
                s.perplexity_stderr, static_cast<long long>(s.tokens_scored), chunks.size(), o.ctx_size);
  }
}

}  // namespace

void add_eval_perplexity_command(CLI::App& eval) {
  auto opts = std::make_shared<PerplexityOptions>();
  CLI::App* cmd = eval.add_subcommand(
      "perplexity", "Perplexity on a text file, as llama.cpp's llama-perplexity (BOS-led chunks, second half scored)");
  opts->engine.add_to(*cmd);
  cmd->add_option("-f,--text-file", opts->text_file, "the text, tokenized as one string")->required();
  cmd->add_option("-c,--ctx-size", opts->ctx_size, "tokens per chunk (default 512)");
  cmd->add_option("--chunks", opts->chunks, "score at most this many chunks (default: all)")->check(kPositive);
  cmd->add_flag("--no-special-tokens", opts->no_special,
                "tokenize the text without the tokenizer's BOS/special tokens (the chunks still start with BOS)");
  cmd->add_flag("--json", opts->json, "print one JSON object");
  cmd->callback([opts] { run_perplexity(*opts); });
}

}  // namespace pagoda::cli
