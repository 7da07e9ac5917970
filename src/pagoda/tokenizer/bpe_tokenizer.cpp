// BpeTokenizer: the encode/decode pipeline over a BpeTokenizerSpec (see bpe_tokenizer.h).
#include "pagoda/tokenizer/bpe_tokenizer.h"

#include <fmt/format.h>

#include <deque>

#include "pagoda/tokenizer/byte_level.h"
#include "pagoda/tokenizer/replace_all.h"
#include "pagoda/tokenizer/utf8.h"

namespace pagoda {

namespace {
// HF Metaspace pre-tokenizer: spaces become the replacement character, which is also prepended (always,
// or only to the start of the input); with `split`, every replacement character starts a new piece.
void metaspace(const PreTokenizerStep& step, bool at_start, std::deque<std::string>& owned,
               const std::vector<std::string_view>& pieces, std::vector<std::string_view>& out) {
  const std::string& rep = step.replacement;
  for (size_t i = 0; i < pieces.size(); ++i) {
    std::string& text = owned.emplace_back(pieces[i]);
    replace_all(text, " ", rep);
    bool prepend = step.prepend == PreTokenizerStep::Prepend::kAlways ||
                   (step.prepend == PreTokenizerStep::Prepend::kFirst && at_start && i == 0);
    if (prepend && !text.starts_with(rep)) text.insert(0, rep);
    if (!step.split) {
      out.push_back(text);
      continue;
    }
    size_t begin = 0;
    for (size_t pos = text.find(rep, 1); pos != std::string::npos; pos = text.find(rep, pos + rep.size())) {
      if (pos > begin) out.push_back(std::string_view(text).substr(begin, pos - begin));
      begin = pos;
    }
    if (begin < text.size()) out.push_back(std::string_view(text).substr(begin));
  }
}
}  // namespace

BpeTokenizer::BpeTokenizer(BpeTokenizerSpec spec, std::unique_ptr<BpeModel> model)
    : spec_(std::move(spec)), model_(std::move(model)), added_(spec_.added_tokens) {
  special_.assign(spec_.tokens.size(), false);
  for (const AddedToken& t : spec_.added_tokens) {
    if (t.special && t.id >= 0 && static_cast<size_t>(t.id) < special_.size() && !special_[t.id]) {
      special_[t.id] = true;
      ++num_special_;
    }
  }
}

std::vector<TokenId> BpeTokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  // Text from clients may hold broken UTF-8; HF only ever sees valid strings, so repair it first.
  std::string repaired;
  if (!utf8::is_valid(text)) {
    repaired = utf8::repair(text);
    text = repaired;
  }
  std::vector<TokenId> ids;
  ids.reserve(text.size() / 3 + 4);
  if (options.add_special_tokens) ids.insert(ids.end(), spec_.prefix_ids.begin(), spec_.prefix_ids.end());
  std::vector<TextSegment> segments;
  added_.split(text, options.parse_special, segments);
  for (const TextSegment& segment : segments) {
    if (segment.id >= 0) ids.push_back(segment.id);
    else encode_segment(segment.text, segment.text.data() == text.data(), ids);
  }
  if (options.add_special_tokens) ids.insert(ids.end(), spec_.suffix_ids.begin(), spec_.suffix_ids.end());
  return ids;
}

void BpeTokenizer::encode_segment(std::string_view text, bool at_start, std::vector<TokenId>& out) const {
  if (text.empty()) return;
  std::string normalized(text);
  for (const NormalizerStep& step : spec_.normalizer) {
    if (step.kind == NormalizerStep::Kind::kPrepend) {
      if (!normalized.empty()) normalized.insert(0, step.text);
    } else {
      replace_all(normalized, step.text, step.replacement);
    }
  }

  // Pre-tokenizer steps each refine the current pieces; a prefix space creates new text, so pieces own
  // their storage only when a step had to change them.
  std::deque<std::string> owned;  // a deque so that views into earlier elements stay valid
  std::vector<std::string_view> pieces{normalized};
  std::vector<std::string_view> next;
  for (const PreTokenizerStep& step : spec_.pre_tokenizer) {
    next.clear();
    if (step.kind == PreTokenizerStep::Kind::kByteLevel && step.add_prefix_space) {
      for (auto& piece : pieces) {
        if (piece.empty() || piece[0] == ' ') continue;
        std::string& prefixed = owned.emplace_back(1, ' ');
        prefixed.append(piece);
        piece = prefixed;
      }
    }
    if (step.kind == PreTokenizerStep::Kind::kMetaspace) {
      metaspace(step, at_start, owned, pieces, next);
      pieces.swap(next);
      continue;
    }
    if (step.regex == nullptr) continue;
    for (std::string_view piece : pieces) step.regex->split(piece, next);
    pieces.swap(next);
  }

  std::string word;
  for (std::string_view piece : pieces) {
    if (spec_.byte_level_input) {
      word.clear();
      byte_level::encode_append(piece, word);
      model_->encode_word(word, out);
    } else {
      model_->encode_word(piece, out);
    }
  }
}

std::string BpeTokenizer::decode(std::span<const TokenId> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (TokenId id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= spec_.tokens.size()) continue;  // HF skips unknown ids too
    if (skip_special_tokens && special_[id]) continue;
    tokens.push_back(spec_.tokens[id]);
  }
  return run_decoder(spec_.decoder, std::move(tokens));
}

std::string BpeTokenizer::decode_bytes(std::span<const TokenId> ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (TokenId id : ids)
    if (id >= 0 && static_cast<size_t>(id) < spec_.tokens.size()) tokens.push_back(spec_.tokens[id]);
  return run_decoder(spec_.decoder, std::move(tokens), /*keep_invalid_bytes=*/true);
}

bool BpeTokenizer::is_special(TokenId id) const {
  return id >= 0 && static_cast<size_t>(id) < special_.size() && special_[id];
}

std::string_view BpeTokenizer::token_string(TokenId id) const {
  if (id < 0 || static_cast<size_t>(id) >= spec_.tokens.size()) return {};
  return spec_.tokens[id];
}

std::string BpeTokenizer::summary() const {
  return fmt::format("{}, {} tokens, {} special", spec_.kind, spec_.tokens.size(), num_special_);
}

}  // namespace pagoda
