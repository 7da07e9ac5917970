// make_gguf_tokenizer: turns a GGUF vocabulary into a BpeTokenizerSpec with llama.cpp's semantics:
// "llama" = SentencePiece (space prefix, spaces as ▁, score-ordered merges, <0xXX> byte fallback) and
// "gpt2" = byte-level BPE with ranked merges and a regex pre-tokenizer chosen by tokenizer.ggml.pre.
#include "pagoda/tokenizer/gguf_vocab.h"

#include <cmath>

#include <fmt/format.h>

#include "pagoda/core/error.h"
#include "pagoda/tokenizer/bpe_tokenizer.h"

namespace pagoda {

namespace {
// Pre-tokenizer names llama.cpp maps to its Llama-3 regex (and for which it ignores merges).
bool is_llama3_pre(const std::string& pre) {
  return pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe" || pre == "falcon3" || pre == "pixtral";
}

void add_token_roles(const GgufVocab& vocab, BpeTokenizerSpec& spec) {
  for (size_t id = 0; id < vocab.token_types.size(); ++id) {
    GgufTokenType type = vocab.token_types[id];
    bool special = type == GgufTokenType::kControl || type == GgufTokenType::kUnknown;
    if (!special && type != GgufTokenType::kUserDefined) continue;
    // Control/unknown tokens are matched in text only with parse_special; user-defined ones always.
    spec.added_tokens.push_back({.id = static_cast<TokenId>(id), .content = vocab.tokens[id], .special = special});
  }
  if (vocab.token_types.empty()) {  // no types: at least the named tokens are special
    for (auto id : {vocab.bos_token_id, vocab.eos_token_id, vocab.eot_token_id, vocab.pad_token_id}) {
      if (id) spec.added_tokens.push_back({.id = *id, .content = vocab.tokens[*id], .special = true});
    }
  }
}

void check_consistent(const GgufVocab& vocab, const std::string& path) {
  const size_t n = vocab.tokens.size();
  if (n == 0) throw LoadError(path, "tokenizer has no tokens");
  if (!vocab.scores.empty() && vocab.scores.size() != n) {
    throw LoadError(path, fmt::format("tokenizer has {} scores for {} tokens", vocab.scores.size(), n));
  }
  if (!vocab.token_types.empty() && vocab.token_types.size() != n) {
    throw LoadError(path, fmt::format("tokenizer has {} token types for {} tokens", vocab.token_types.size(), n));
  }
  // SentencePiece merges in score order: a NaN compares false both ways, and the merges then came out in no order
  // at all (a corrupted-file sweep's scores tokenized into garbage).
  for (size_t i = 0; i < vocab.scores.size(); ++i)
    if (!std::isfinite(vocab.scores[i]))
      throw LoadError(path, fmt::format("tokenizer score of token {} is {}", i, vocab.scores[i]));
  // Byte-level BPE without its merges splits every word not in the vocabulary into single bytes (a llama
  // vocabulary relabelled gpt2 loaded and tokenized into garbage); llama.cpp refuses such a file too.
  if (vocab.model == "gpt2" && vocab.merges.empty())
    throw LoadError(path, "tokenizer.ggml.merges is missing or empty: a gpt2 (byte-level BPE) tokenizer needs them");
  for (auto id : {vocab.bos_token_id, vocab.eos_token_id, vocab.unk_token_id, vocab.pad_token_id, vocab.eot_token_id}) {
    if (id && (*id < 0 || static_cast<size_t>(*id) >= n)) {
      throw LoadError(path, fmt::format("special token id {} outside the {}-token vocabulary", *id, n));
    }
  }
}
}  // namespace

std::unique_ptr<Tokenizer> make_gguf_tokenizer(const GgufVocab& vocab, const std::string& source_path) {
  check_consistent(vocab, source_path);
  BpeTokenizerSpec spec;
  spec.tokens = vocab.tokens;
  add_token_roles(vocab, spec);
  std::unique_ptr<BpeModel> model;
  bool add_bos_default;

  if (vocab.model == "llama") {
    BpeOptions options{.byte_fallback = true, .unk_id = vocab.unk_token_id, .fuse_unk = false};
    model = std::make_unique<BpeModel>(vocab.tokens, options);
    model->set_scores(vocab.scores.empty() ? std::vector<float>(vocab.tokens.size(), 0.0f) : vocab.scores);
    const bool space_prefix = vocab.add_space_prefix.value_or(true);
    if (space_prefix) spec.normalizer.push_back({NormalizerStep::Kind::kPrepend, "\u2581", {}});
    spec.normalizer.push_back({NormalizerStep::Kind::kReplace, " ", "\u2581"});
    using Kind = DecoderStep::Kind;
    spec.decoder = {{.kind = Kind::kReplace, .pattern = "\u2581", .content = " "},
                    {.kind = Kind::kByteFallback},
                    {.kind = Kind::kFuse}};
    if (space_prefix) spec.decoder.push_back({.kind = Kind::kStrip, .content = " ", .start = 1});
    spec.kind = "SentencePiece BPE (GGUF llama)";
    add_bos_default = true;
  } else if (vocab.model == "gpt2") {
    const bool llama3 = is_llama3_pre(vocab.pre);
    model = std::make_unique<BpeModel>(vocab.tokens, BpeOptions{.unk_id = vocab.unk_token_id, .ignore_merges = llama3});
    for (const std::string& merge : vocab.merges) {
      size_t space = merge.find(' ', 1);
      bool ok = space != std::string::npos &&
                model->add_merge(std::string_view(merge).substr(0, space), std::string_view(merge).substr(space + 1));
      if (!ok) throw LoadError(source_path, fmt::format("tokenizer merge '{}' is not over vocabulary tokens", merge));
    }
    auto regex = std::make_shared<RegexSplitter>(llama3 ? kLlama3Pattern : kGpt2Pattern);
    spec.pre_tokenizer.push_back({PreTokenizerStep::Kind::kByteLevel, std::move(regex), false});
    spec.byte_level_input = true;
    spec.decoder = {{.kind = DecoderStep::Kind::kByteLevel}};
    spec.kind = fmt::format("byte-level BPE (GGUF gpt2, pre '{}')", vocab.pre.empty() ? "default" : vocab.pre);
    add_bos_default = llama3;
  } else {
    throw LoadError(source_path, fmt::format("unsupported tokenizer model '{}' (only llama, gpt2)", vocab.model));
  }

  if (vocab.add_bos_token.value_or(add_bos_default) && vocab.bos_token_id) spec.prefix_ids.push_back(*vocab.bos_token_id);
  if (vocab.add_eos_token.value_or(false) && vocab.eos_token_id) spec.suffix_ids.push_back(*vocab.eos_token_id);
  spec.bos_id = vocab.bos_token_id;
  if (vocab.eos_token_id) spec.eos_ids.push_back(*vocab.eos_token_id);
  if (vocab.eot_token_id && vocab.eot_token_id != vocab.eos_token_id) spec.eos_ids.push_back(*vocab.eot_token_id);
  return std::make_unique<BpeTokenizer>(std::move(spec), std::move(model));
}

}  // namespace pagoda
