// `pagoda tokenize` and `pagoda detokenize`: the model's tokenizer on the command line, one text or a
// JSON-lines stream ({"text": ...} <-> {"ids": [...]}).
#include <nlohmann/json.hpp>

#include <iostream>
#include <string>

#include "pagoda/cli/commands.h"
#include "pagoda/cli/model_options.h"
#include "pagoda/cli/token_list.h"
#include "pagoda/core/error.h"

namespace pagoda::cli {
namespace {

struct TokenizeOptions {
  ModelOptions model;
  std::string text;
  std::string ids;
  bool add_special_tokens = false;
  bool skip_special_tokens = false;
  bool jsonl = false;
};

// Calls `fn(object, line_no)` for each non-empty stdin line, which must be a JSON object with a `key`
// of the JSON type `is_type` checks; anything else is an InvalidRequest naming the line.
template <typename Check, typename Fn>
void for_each_jsonl_object(const char* key, Check is_type, const char* expected, Fn fn) {
  std::string line;
  for (int line_no = 1; std::getline(std::cin, line); ++line_no) {
    if (line.empty()) continue;
    const nlohmann::json in = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!in.is_object() || !in.contains(key) || !is_type(in[key]))
      throw InvalidRequest("stdin line " + std::to_string(line_no) + ": expected " + expected);
    fn(in, line_no);
  }
}

std::unique_ptr<Tokenizer> load_tokenizer_only(const ModelOptions& model) {
  LoadedModel loaded = load_model(model.load_options());
  if (!loaded.tokenizer) throw Error(loaded.source + ": the model has no tokenizer");
  return std::move(loaded.tokenizer);
}

void run_tokenize(const TokenizeOptions& o) {
  const auto tokenizer = load_tokenizer_only(o.model);
  EncodeOptions enc;
  enc.add_special_tokens = o.add_special_tokens;
  if (!o.jsonl) {
    std::cout << nlohmann::json(tokenizer->encode(o.text, enc)).dump() << "\n";
    return;
  }
  for_each_jsonl_object("text", [](const nlohmann::json& v) { return v.is_string(); }, "{\"text\": \"...\"}",
                        [&](const nlohmann::json& in, int) {
                          std::cout << nlohmann::json{{"ids", tokenizer->encode(in["text"].get<std::string>(), enc)}}.dump()
                                    << "\n";
                        });
}

void run_detokenize(const TokenizeOptions& o) {
  const auto tokenizer = load_tokenizer_only(o.model);
  const auto decode = [&](const std::vector<TokenId>& ids) {
    for (TokenId id : ids)
      if (id < 0 || id >= tokenizer->vocab_size())
        throw InvalidRequest("token id " + std::to_string(id) + " is outside the vocabulary");
    return tokenizer->decode(ids, o.skip_special_tokens);
  };
  const auto dump = [](const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); };
  if (!o.jsonl) {
    std::cout << decode(parse_token_list(o.ids, "ids")) << "\n";
    return;
  }
  for_each_jsonl_object("ids", [](const nlohmann::json& v) { return v.is_array(); }, "{\"ids\": [...]}",
                        [&](const nlohmann::json& in, int line_no) {
                          std::vector<TokenId> ids;
                          for (const auto& v : in["ids"]) {
                            if (!v.is_number_integer())
                              throw InvalidRequest("stdin line " + std::to_string(line_no) + ": ids must be integers");
                            ids.push_back(v.get<TokenId>());
                          }
                          std::cout << dump(nlohmann::json{{"text", decode(ids)}}) << "\n";
                        });
}

}  // namespace

void add_tokenize_commands(CLI::App& app) {
  auto tok = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Text to token ids (one text, or --jsonl on stdin)");
  tok->model.add_to(*cmd);
  cmd->add_option("text", tok->text, "the text to tokenize");
  cmd->add_flag("--add-special-tokens", tok->add_special_tokens, "add BOS etc. as the tokenizer's post-processor does");
  cmd->add_flag("--jsonl", tok->jsonl, "read {\"text\": ...} lines on stdin, write {\"ids\": [...]} lines");
  cmd->callback([tok] { run_tokenize(*tok); });

  auto detok = std::make_shared<TokenizeOptions>();
  CLI::App* dcmd = app.add_subcommand("detokenize", "Token ids to text (one list, or --jsonl on stdin)");
  detok->model.add_to(*dcmd);
  dcmd->add_option("ids", detok->ids, "token ids, e.g. 1,2,3");
  dcmd->add_flag("--skip-special-tokens", detok->skip_special_tokens, "drop special tokens from the text");
  dcmd->add_flag("--jsonl", detok->jsonl, "read {\"ids\": [...]} lines on stdin, write {\"text\": ...} lines");
  dcmd->callback([detok] { run_detokenize(*detok); });
}

}  // namespace pagoda::cli
