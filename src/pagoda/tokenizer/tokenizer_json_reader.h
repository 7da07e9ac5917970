// Reading tokenizer.json quickly: one SAX pass that stores model.vocab and model.merges (most of the
// file: 128k + 280k entries for Llama-3) as plain vectors and builds a JSON DOM only for the rest.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "pagoda/core/types.h"

namespace pagoda {

struct TokenizerJson {
  nlohmann::json root;  // everything except model.vocab and model.merges
  bool has_vocab = false;
  std::vector<std::pair<std::string, TokenId>> vocab;      // model.vocab, in file order
  std::vector<std::pair<std::string, std::string>> merges;  // model.merges ("a b" or ["a", "b"])
};

// Throws LoadError naming `path` when the file cannot be read, is not JSON, or has a malformed
// vocab/merges section.
TokenizerJson read_tokenizer_json(const std::string& path);

// The whole file as a DOM (tokenizer_config.json and other small files).
nlohmann::json read_json_file(const std::string& path);

}  // namespace pagoda
