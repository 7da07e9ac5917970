// BpeTokenizer: the one Tokenizer implementation. A BpeTokenizerSpec says how text flows through it
// (added-token split -> normalizer -> pre-tokenizer -> BpeModel -> post-processor, and the decoder);
// the HF tokenizer.json loader and the GGUF vocabulary factory each only fill in a spec.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "pagoda/tokenizer/added_tokens.h"
#include "pagoda/tokenizer/bpe_model.h"
#include "pagoda/tokenizer/decoder.h"
#include "pagoda/tokenizer/regex_splitter.h"
#include "pagoda/tokenizer/tokenizer.h"

namespace pagoda {

struct NormalizerStep {
  enum class Kind { kPrepend, kReplace };
  Kind kind;
  std::string text;         // kPrepend: prepended to non-empty text; kReplace: the pattern
  std::string replacement;  // kReplace
};

struct PreTokenizerStep {
  enum class Kind { kSplit, kByteLevel, kMetaspace };
  enum class Prepend { kAlways, kFirst, kNever };  // kMetaspace: when to prepend the replacement
  Kind kind;
  std::shared_ptr<const RegexSplitter> regex = nullptr;  // kSplit always; kByteLevel when it splits too
  bool add_prefix_space = false;                         // kByteLevel
  std::string replacement = "\u2581";                    // kMetaspace: stands for ' '
  Prepend prepend = Prepend::kAlways;                    // kMetaspace
  bool split = false;                                    // kMetaspace: a new piece at every replacement
};

struct BpeTokenizerSpec {
  std::string kind;                 // for summary(): "byte-level BPE", "SentencePiece BPE", ...
  std::vector<std::string> tokens;  // id -> stored text, including added tokens (holes are "")
  std::vector<AddedToken> added_tokens;
  std::vector<NormalizerStep> normalizer;
  std::vector<PreTokenizerStep> pre_tokenizer;
  bool byte_level_input = false;  // spell each pre-token in the byte-level alphabet before BPE
  std::vector<DecoderStep> decoder;
  std::vector<TokenId> prefix_ids, suffix_ids;  // what add_special_tokens adds around the text
  std::optional<TokenId> bos_id;
  std::vector<TokenId> eos_ids;
};

class BpeTokenizer final : public Tokenizer {
 public:
  BpeTokenizer(BpeTokenizerSpec spec, std::unique_ptr<BpeModel> model);

  std::vector<TokenId> encode(std::string_view text, const EncodeOptions& options) const override;
  std::string decode(std::span<const TokenId> ids, bool skip_special_tokens) const override;
  std::string decode_bytes(std::span<const TokenId> ids) const override;
  int vocab_size() const override { return static_cast<int>(spec_.tokens.size()); }
  std::optional<TokenId> bos_token_id() const override { return spec_.bos_id; }
  std::vector<TokenId> eos_token_ids() const override { return spec_.eos_ids; }
  bool is_special(TokenId id) const override;
  std::string_view token_string(TokenId id) const override;
  std::string summary() const override;

 private:
  // `at_start`: the segment begins the input (Metaspace prepend_scheme "first").
  void encode_segment(std::string_view text, bool at_start, std::vector<TokenId>& out) const;

  BpeTokenizerSpec spec_;
  std::unique_ptr<BpeModel> model_;
  AddedTokenMatcher added_;
  std::vector<bool> special_;  // [vocab_size]
  size_t num_special_ = 0;
};

}  // namespace pagoda
