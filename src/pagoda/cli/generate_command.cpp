// `pagoda generate`: one prompt through the model, streamed as text or printed as one JSON object.
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <optional>

#include "pagoda/backend/cpu/cpu_ops.h"
#include "pagoda/cli/commands.h"
#include "pagoda/cli/model_options.h"
#include "pagoda/cli/token_list.h"
#include "pagoda/core/error.h"
#include "pagoda/model/llama_model.h"
#include "pagoda/runner/generator.h"
#include "pagoda/tokenizer/incremental_detokenizer.h"

namespace pagoda::cli {
namespace {

struct GenerateOptions {
  ModelOptions model;
  std::optional<std::string> prompt;  // may be "": BOS only
  std::string prompt_ids;
  bool no_special = false;
  SamplingParams sampling;
  std::string stop_token_ids;
  int max_model_len = 0;
  bool json = false;
};

nlohmann::json logprob_entries(const std::vector<TokenLogprob>& entries) {
  nlohmann::json list = nlohmann::json::array();
  for (const TokenLogprob& e : entries) list.push_back({{"id", e.id}, {"logprob", e.logprob}});
  return list;
}

void run_generate(const GenerateOptions& o) {
  if (o.prompt.has_value() == !o.prompt_ids.empty())
    throw InvalidRequest("give exactly one of a prompt (TEXT or --prompt TEXT) and --prompt-ids");
  const LoadedModel loaded = load_model(o.model.load_options());
  if (!loaded.tokenizer && o.prompt_ids.empty())
    throw InvalidRequest("this model has no tokenizer; use --prompt-ids");

  std::vector<TokenId> prompt_ids;
  if (!o.prompt_ids.empty()) {
    prompt_ids = parse_token_list(o.prompt_ids, "--prompt-ids");
  } else {
    EncodeOptions enc;
    enc.add_special_tokens = !o.no_special;
    prompt_ids = loaded.tokenizer->encode(*o.prompt, enc);
  }
  SamplingParams params = o.sampling;
  params.stop_token_ids = parse_token_list(o.stop_token_ids, "--stop-token-ids");
  std::vector<TokenId> eos = loaded.generation.eos_token_ids.empty() ? loaded.config.eos_token_ids
                                                                     : loaded.generation.eos_token_ids;
  if (eos.empty() && loaded.tokenizer) eos = loaded.tokenizer->eos_token_ids();

  CpuOps ops(CpuOpsOptions{.num_threads = o.model.threads});
  LlamaModel model(loaded.config, loaded.weights);
  Generator generator(model, ops, GeneratorOptions{.max_model_len = o.max_model_len});

  std::optional<IncrementalDetokenizer> detok;
  if (loaded.tokenizer) detok.emplace(*loaded.tokenizer, prompt_ids, /*skip_special_tokens=*/true);
  if (!o.json && loaded.tokenizer) {
    std::fputs(o.prompt ? o.prompt->c_str() : loaded.tokenizer->decode(prompt_ids, true).c_str(), stdout);
    std::fflush(stdout);
  }
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  std::optional<Clock::time_point> t_first;
  const GenerationOutput out = generator.generate(prompt_ids, params, eos, [&](TokenId id) {
    if (!t_first) t_first = Clock::now();
    if (!detok) return;
    const std::string piece = detok->push(id);
    if (!o.json && !piece.empty()) {
      std::fputs(piece.c_str(), stdout);
      std::fflush(stdout);
    }
  });
  const auto t_end = Clock::now();
  std::string tail = detok ? detok->finish() : "";
  if (!o.json) std::fputs((tail + "\n").c_str(), stdout);

  const double prompt_s = std::chrono::duration<double>(t_first.value_or(t_end) - t0).count();
  const double gen_s = std::chrono::duration<double>(t_end - t_first.value_or(t_end)).count();
  const size_t decoded = out.output_ids.empty() ? 0 : out.output_ids.size() - 1;  // first token came with prefill
  const double prompt_tps = prompt_s > 0 ? prompt_ids.size() / prompt_s : 0.0;
  const double gen_tps = gen_s > 0 ? decoded / gen_s : 0.0;

  if (o.json) {
    nlohmann::json j;
    j["prompt_ids"] = prompt_ids;
    j["output_ids"] = out.output_ids;
    j["text"] = detok ? detok->text() : "";
    j["finish_reason"] = finish_reason_name(out.finish_reason);
    if (params.logprobs >= 0) {
      j["logprobs"] = nlohmann::json::array();
      for (const auto& e : out.logprobs) j["logprobs"].push_back(logprob_entries(e));
    }
    if (params.prompt_logprobs >= 0) {
      j["prompt_logprobs"] = nlohmann::json::array();
      for (size_t i = 0; i < out.prompt_logprobs.size(); ++i)
        j["prompt_logprobs"].push_back(i == 0 ? nlohmann::json(nullptr) : logprob_entries(out.prompt_logprobs[i]));
    }
    j["timings"] = {{"prompt_seconds", prompt_s}, {"prompt_tokens_per_second", prompt_tps},
                    {"generation_seconds", gen_s}, {"generation_tokens_per_second", gen_tps}};
    std::puts(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::fprintf(stderr, "\nprompt: %zu tokens, %.1f tok/s; generation: %zu tokens, %.1f tok/s; finish: %s\n",
                 prompt_ids.size(), prompt_tps, out.output_ids.size(), gen_tps,
                 std::string(finish_reason_name(out.finish_reason)).c_str());
  }
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto opts = std::make_shared<GenerateOptions>();
  opts->sampling.temperature = 0.0;  // the CLI is deterministic unless asked otherwise
  opts->sampling.max_tokens = 256;
  CLI::App* cmd = app.add_subcommand("generate", "Generate a continuation of one prompt");
  opts->model.add_to(*cmd);
  cmd->add_option("prompt", opts->prompt, "prompt text");
  cmd->add_option("-p,--prompt", opts->prompt, "prompt text");
  cmd->add_option("--prompt-ids", opts->prompt_ids, "prompt as token ids, e.g. 1,2,3");
  cmd->add_flag("--no-special-tokens", opts->no_special, "do not add BOS/special tokens to the prompt");
  SamplingParams& s = opts->sampling;
  cmd->add_option("-n,--max-tokens", s.max_tokens, "tokens to generate (default 256)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--temperature", s.temperature, "0 = greedy (default 0)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-p", s.top_p, "nucleus sampling mass")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--top-k", s.top_k, "keep the k most likely tokens (0 or -1: off)");
  cmd->add_option("--min-p", s.min_p, "drop tokens below min_p * p_max")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--seed", s.seed, "random seed for reproducible sampling");
  cmd->add_option("--repetition-penalty", s.repetition_penalty, "HF repetition penalty (1 = off)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--presence-penalty", s.presence_penalty, "OpenAI presence penalty")->check(CLI::Range(-2.0, 2.0));
  cmd->add_option("--frequency-penalty", s.frequency_penalty, "OpenAI frequency penalty")->check(CLI::Range(-2.0, 2.0));
  cmd->add_option("--stop-token-ids", opts->stop_token_ids, "extra stop token ids, e.g. 13,2");
  cmd->add_flag("--ignore-eos", s.ignore_eos, "keep generating after end-of-sequence tokens");
  cmd->add_option("--logprobs", s.logprobs, "top-K logprobs per generated token (with --json)");
  cmd->add_option("--prompt-logprobs", s.prompt_logprobs, "top-K logprobs per prompt token (with --json)");
  cmd->add_option("--max-model-len", opts->max_model_len, "context length (default: the model's)");
  cmd->add_flag("--json", opts->json, "print one JSON object instead of streaming text");
  cmd->callback([opts] { run_generate(*opts); });
}

}  // namespace pagoda::cli
