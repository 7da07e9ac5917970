// `pagoda generate`: one prompt (streamed as text, or one JSON object), or a JSON-lines file of requests
// run together through the continuous-batching engine (one JSON line out per line in, in input order).
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>

#include "pagoda/cli/commands.h"
#include "pagoda/cli/engine_options.h"
#include "pagoda/cli/number_checks.h"
#include "pagoda/cli/request_json.h"
#include "pagoda/cli/token_list.h"
#include "pagoda/core/error.h"
#include "pagoda/core/text_file.h"
#include "pagoda/structured/choice_grammar.h"
#include "pagoda/structured/constraint.h"
#include "pagoda/structured/json_schema_grammar.h"
#include "pagoda/structured/regex_grammar.h"
#include "pagoda/tokenizer/incremental_detokenizer.h"

namespace pagoda::cli {
namespace {

struct GenerateOptions {
  EngineCliOptions engine;
  std::optional<std::string> prompt;  // may be "": BOS only
  std::string prompt_ids;
  std::string prompts_file;
  bool no_special = false;
  SamplingParams sampling;
  std::string stop_token_ids;
  bool json = false;
  // Constrained decoding (at most one), as llama.cpp's -j / -jf and vLLM's guided_regex / guided_choice.
  std::string json_schema;
  std::string json_schema_file;
  std::string regex;
  std::vector<std::string> choices;
};

// The output constraint the flags ask for, compiled for the model's vocabulary; null when none.
std::shared_ptr<const structured::CompiledConstraint> output_constraint(const GenerateOptions& o, const LLM& llm) {
  const int given = !o.json_schema.empty() + !o.json_schema_file.empty() + !o.regex.empty() + !o.choices.empty();
  if (given == 0) return nullptr;
  if (given > 1) throw InvalidRequest("give at most one of --json-schema, --json-schema-file, --regex, --choice");
  if (llm.tokenizer() == nullptr) throw InvalidRequest("constrained decoding needs the model's tokenizer");
  structured::Grammar grammar;
  std::string kind;
  if (!o.regex.empty()) {
    grammar = structured::regex_grammar(o.regex);
    kind = "regex";
  } else if (!o.choices.empty()) {
    grammar = structured::choice_grammar(o.choices);
    kind = "choice";
  } else {
    const std::string text = o.json_schema.empty() ? read_text_file(o.json_schema_file, "the JSON schema") : o.json_schema;
    const nlohmann::ordered_json schema = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (schema.is_discarded()) throw InvalidRequest("the JSON schema is not valid JSON");
    grammar = structured::json_schema_grammar(schema);
    kind = "json_schema";
  }
  auto vocab = structured::VocabIndex::from_tokenizer(*llm.tokenizer(), static_cast<int>(llm.model().config.vocab_size),
                                                      model_eos_token_ids(llm.model()));
  return structured::compile_constraint(std::move(grammar), std::move(vocab), kind);
}

std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

void run_prompts_file(const GenerateOptions& o, LLM& llm, const GenerateRequest& defaults) {
  std::ifstream in = open_text_file(o.prompts_file, "the prompts file");
  std::vector<GenerateRequest> requests;
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("{}:{}", o.prompts_file, line_no);
    const nlohmann::json object = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (object.is_discarded()) throw InvalidRequest(where + ": not valid JSON");
    requests.push_back(parse_request_json(object, defaults, llm.tokenizer(), !o.no_special, where));
  }
  const std::vector<CompletionOutput> outputs = llm.generate(requests);
  for (size_t i = 0; i < outputs.size(); ++i)
    std::puts(dump(completion_json(outputs[i], completion_text(llm.tokenizer(), outputs[i]), requests[i].params)).c_str());
}

void run_single(const GenerateOptions& o, LLM& llm, GenerateRequest request) {
  const Tokenizer* tok = llm.tokenizer();
  if (o.prompt_ids.empty()) {
    if (tok == nullptr) throw InvalidRequest("this model has no tokenizer; use --prompt-ids");
    request.prompt_ids = tok->encode(*o.prompt, EncodeOptions{.add_special_tokens = !o.no_special});
  } else {
    request.prompt_ids = parse_token_list(o.prompt_ids, "--prompt-ids");
  }
  std::optional<IncrementalDetokenizer> detok;
  if (tok != nullptr) detok.emplace(*tok, request.prompt_ids, /*skip_special_tokens=*/true);
  if (!o.json && tok != nullptr) {
    std::fputs(o.prompt ? o.prompt->c_str() : tok->decode(request.prompt_ids, true).c_str(), stdout);
    std::fflush(stdout);
  }

  using Clock = std::chrono::steady_clock;
  CompletionOutput out;
  out.prompt_ids = request.prompt_ids;
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  std::optional<Clock::time_point> t_first;
  const auto t0 = Clock::now();
  llm.engine().submit(request, [&](const RequestEvent& e) {  // runs on the engine thread
    if (!t_first && !e.new_token_ids.empty()) t_first = Clock::now();
    append_event(out, e);
    if (detok) {
      for (TokenId id : e.new_token_ids) {
        const std::string piece = detok->push(id);
        if (!o.json && !piece.empty()) {
          std::fputs(piece.c_str(), stdout);
          std::fflush(stdout);
        }
      }
    }
    if (e.finished) {
      std::lock_guard lock(mutex);
      done = true;
      done_cv.notify_one();
    }
  });
  {
    std::unique_lock lock(mutex);
    done_cv.wait(lock, [&] { return done; });
  }
  const auto t_end = Clock::now();
  if (out.finish_reason == FinishReason::kError) throw InvalidRequest(out.error);
  const std::string tail = detok ? detok->finish() : "";
  if (!o.json) std::fputs((tail + "\n").c_str(), stdout);

  const double prompt_s = std::chrono::duration<double>(t_first.value_or(t_end) - t0).count();
  const double gen_s = std::chrono::duration<double>(t_end - t_first.value_or(t_end)).count();
  const size_t decoded = out.output_ids.empty() ? 0 : out.output_ids.size() - 1;  // the first came with the prefill
  const double prompt_tps = prompt_s > 0 ? out.prompt_ids.size() / prompt_s : 0.0;
  const double gen_tps = gen_s > 0 ? decoded / gen_s : 0.0;
  if (o.json) {
    nlohmann::json j = completion_json(out, detok ? detok->text() : "", request.params);
    j["timings"] = {{"prompt_seconds", prompt_s}, {"prompt_tokens_per_second", prompt_tps},
                    {"generation_seconds", gen_s}, {"generation_tokens_per_second", gen_tps}};
    std::puts(dump(j).c_str());
  } else {
    std::fprintf(stderr, "\nprompt: %zu tokens, %.1f tok/s; generation: %zu tokens, %.1f tok/s; finish: %s\n",
                 out.prompt_ids.size(), prompt_tps, out.output_ids.size(), gen_tps, to_string(out.finish_reason));
  }
}

void run_generate(GenerateOptions& o) {
  const int sources = (o.prompt ? 1 : 0) + (o.prompt_ids.empty() ? 0 : 1) + (o.prompts_file.empty() ? 0 : 1);
  if (sources != 1) throw InvalidRequest("give exactly one of a prompt (TEXT or --prompt), --prompt-ids, --prompts-file");
  GenerateRequest defaults;
  defaults.params = o.sampling;
  defaults.params.stop_token_ids = parse_token_list(o.stop_token_ids, "--stop-token-ids");
  validate_sampling_params(defaults.params, "options");
  if (o.prompts_file.empty()) o.engine.max_num_seqs = 1;  // one request: size the KV cache for it alone
  LLM llm(o.engine.llm_options());
  defaults.params.constraint = output_constraint(o, llm);
  if (!o.prompts_file.empty()) {
    run_prompts_file(o, llm, defaults);
  } else {
    run_single(o, llm, defaults);
  }
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto opts = std::make_shared<GenerateOptions>();
  opts->sampling.temperature = 0.0;  // the CLI is deterministic unless asked otherwise
  opts->sampling.max_tokens = 256;
  CLI::App* cmd = app.add_subcommand("generate", "Generate continuations of a prompt or of a JSON-lines file of requests");
  opts->engine.add_to(*cmd);
  cmd->add_option("prompt", opts->prompt, "prompt text");
  cmd->add_option("-p,--prompt", opts->prompt, "prompt text");
  cmd->add_option("--prompt-ids", opts->prompt_ids, "prompt as token ids, e.g. 1,2,3");
  cmd->add_option("--prompts-file", opts->prompts_file,
                  "JSON lines of OpenAI completion fields (prompt or prompt_ids, max_tokens, temperature, ...), "
                  "run together; one JSON line out per line in (implies --json)");
  cmd->add_flag("--no-special-tokens", opts->no_special, "do not add BOS/special tokens to prompts");
  SamplingParams& s = opts->sampling;
  cmd->add_option("-n,--max-tokens", s.max_tokens, "tokens to generate (default 256)")->check(kPositive);
  cmd->add_option("--temperature", s.temperature, "0 = greedy (default 0)");
  cmd->add_option("--top-p", s.top_p, "nucleus sampling mass");
  cmd->add_option("--top-k", s.top_k, "keep the k most likely tokens (0 or -1: off)");
  cmd->add_option("--min-p", s.min_p, "drop tokens below min_p * p_max");
  cmd->add_option("--seed", s.seed, "random seed for reproducible sampling");
  cmd->add_option("--repetition-penalty", s.repetition_penalty, "HF repetition penalty (1 = off)");
  cmd->add_option("--presence-penalty", s.presence_penalty, "OpenAI presence penalty");
  cmd->add_option("--frequency-penalty", s.frequency_penalty, "OpenAI frequency penalty");
  cmd->add_option("--stop-token-ids", opts->stop_token_ids, "extra stop token ids, e.g. 13,2");
  cmd->add_flag("--ignore-eos", s.ignore_eos, "keep generating after end-of-sequence tokens");
  cmd->add_option("--logprobs", s.logprobs, "top-K logprobs per generated token (in --json output)");
  cmd->add_option("--prompt-logprobs", s.prompt_logprobs, "top-K logprobs per prompt token (in --json output)");
  cmd->add_flag("--json", opts->json, "print one JSON object instead of streaming text");
  cmd->add_option("-j,--json-schema", opts->json_schema, "constrain the output to JSON valid against this schema (docs/API.md)");
  cmd->add_option("--json-schema-file", opts->json_schema_file, "the same, with the schema read from a file");
  cmd->add_option("--regex", opts->regex, "constrain the output to text matching this regular expression");
  cmd->add_option("--choice", opts->choices, "constrain the output to one of these strings (repeatable)")
      ->allow_extra_args(false);  // one string an occurrence: `--choice a --choice b PROMPT`
  cmd->callback([opts] { run_generate(*opts); });
}

}  // namespace pagoda::cli
