// Shared helpers for the tokenizer tests: paths into tests/data, reference-file readers, and tokenizers
// loaded once per process (the Llama-3 vocabulary takes a noticeable fraction of a second).
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "pagoda/tokenizer/tokenizer.h"

namespace pagoda::test {

inline std::string data_path(const std::string& relative) { return std::string(PAGODA_TEST_DATA_DIR "/") + relative; }

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline nlohmann::json read_json(const std::string& path) { return nlohmann::json::parse(read_text(path)); }

inline std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  }
  return rows;
}

inline std::vector<TokenId> ids_of(const nlohmann::json& j) { return j.get<std::vector<TokenId>>(); }

inline const Tokenizer& hf_tokenizer(const std::string& model_dir) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& slot = cache[model_dir];
  if (!slot) {
    std::string dir = data_path("models/" + model_dir + "/");
    slot = load_hf_tokenizer(dir + "tokenizer.json", dir + "tokenizer_config.json");
  }
  return *slot;
}

inline const Tokenizer& llama3_tokenizer() { return hf_tokenizer("tiny-llama3-hf"); }
inline const Tokenizer& mistral_tokenizer() { return hf_tokenizer("tiny-mistral-spm-hf"); }

}  // namespace pagoda::test
