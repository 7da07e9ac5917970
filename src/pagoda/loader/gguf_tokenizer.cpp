// Reads the tokenizer.ggml.* keys of a GGUF file into a GgufVocab (the Tokenizer itself is built by
// make_gguf_tokenizer in the tokenizer module).
#include "pagoda/loader/gguf_tokenizer.h"

#include <fmt/format.h>

#include "pagoda/core/error.h"

namespace pagoda {

namespace {
std::optional<TokenId> read_id(const GgufFile& file, const std::string& key, size_t num_tokens) {
  auto v = file.get_int(key);
  if (!v) return std::nullopt;
  // llama.cpp writes -1 (or a huge unsigned) for "no such token".
  if (*v < 0 || static_cast<uint64_t>(*v) >= num_tokens) return std::nullopt;
  return static_cast<TokenId>(*v);
}
}  // namespace

GgufVocab read_gguf_vocab(const GgufFile& file) {
  GgufVocab vocab;
  auto model = file.get_string("tokenizer.ggml.model");
  if (!model) throw LoadError(file.path(), "no tokenizer (tokenizer.ggml.model missing)");
  vocab.model = *model;
  vocab.pre = file.get_string("tokenizer.ggml.pre").value_or("");
  auto tokens = file.get_strings("tokenizer.ggml.tokens");
  if (!tokens || tokens->empty()) throw LoadError(file.path(), "tokenizer.ggml.tokens missing or empty");
  vocab.tokens = std::move(*tokens);
  const size_t n = vocab.tokens.size();

  if (auto scores = file.get_floats("tokenizer.ggml.scores")) {
    vocab.scores.assign(scores->begin(), scores->end());
  }
  if (auto types = file.get_ints("tokenizer.ggml.token_type")) {
    vocab.token_types.reserve(types->size());
    for (int64_t t : *types) {
      if (t < 0 || t > static_cast<int64_t>(GgufTokenType::kByte)) {
        throw LoadError(file.path(), fmt::format("tokenizer.ggml.token_type holds unknown type {}", t));
      }
      vocab.token_types.push_back(static_cast<GgufTokenType>(t));
    }
  }
  if (auto merges = file.get_strings("tokenizer.ggml.merges")) vocab.merges = std::move(*merges);

  vocab.bos_token_id = read_id(file, "tokenizer.ggml.bos_token_id", n);
  vocab.eos_token_id = read_id(file, "tokenizer.ggml.eos_token_id", n);
  vocab.unk_token_id = read_id(file, "tokenizer.ggml.unknown_token_id", n);
  vocab.pad_token_id = read_id(file, "tokenizer.ggml.padding_token_id", n);
  vocab.eot_token_id = read_id(file, "tokenizer.ggml.eot_token_id", n);
  vocab.add_bos_token = file.get_bool("tokenizer.ggml.add_bos_token");
  vocab.add_eos_token = file.get_bool("tokenizer.ggml.add_eos_token");
  vocab.add_space_prefix = file.get_bool("tokenizer.ggml.add_space_prefix");
  return vocab;
}

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const GgufFile& file) {
  return make_gguf_tokenizer(read_gguf_vocab(file), file.path());
}

}  // namespace pagoda
