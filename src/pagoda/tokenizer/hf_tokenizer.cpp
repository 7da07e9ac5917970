// load_hf_tokenizer: reads an HF tokenizer.json (BPE model; byte-level or SentencePiece-style) and the
// optional tokenizer_config.json into a BpeTokenizerSpec. Unsupported components are load errors rather
// than silently different tokenization.
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "pagoda/core/error.h"
#include "pagoda/tokenizer/bpe_tokenizer.h"
#include "pagoda/tokenizer/tokenizer_json_reader.h"

namespace pagoda {

namespace {
using nlohmann::json;

// A member by reference (json::value copies, which matters for a 128k-entry vocabulary); null if absent.
const json& field(const json& j, const char* key) {
  static const json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

bool flag(const json& j, const char* key, bool fallback) {
  const json& v = field(j, key);
  return v.is_boolean() ? v.get<bool>() : fallback;
}

// Reads one tokenizer.json; all errors name the file.
class HfReader {
 public:
  HfReader(const std::string& path, const json& config) : path_(path), config_(config) {}

  std::unique_ptr<Tokenizer> load(TokenizerJson& file);

 private:
  [[noreturn]] void fail(const std::string& problem) const { throw LoadError(path_, problem); }
  static std::string type_of(const json& j) { return j.is_object() ? j.value("type", std::string()) : ""; }
  std::optional<TokenId> lookup(const std::string& text) const;
  std::string token_name(const json& j) const;  // config values are "text" or {"content": "text"}

  // A token id from the file: an integer in [0, id_limit_), else a LoadError naming `what`.
  TokenId token_id(const json& j, const std::string& what) const;
  // j[key] as a count of characters (Strip's start and stop): absent is 0, else an integer in [0, 2^20].
  int count_field(const json& j, const char* key, const std::string& what) const;

  void read_model(const json& model, TokenizerJson& file);
  void read_added_tokens(const json& added);
  void read_normalizer(const json& j);
  void read_pre_tokenizer(const json& j);
  void read_post_processor(const json& j);
  void read_decoder(const json& j);

  const std::string& path_;
  const json& config_;
  BpeTokenizerSpec spec_;
  std::vector<std::string> model_tokens_;
  TokenIdMap added_ids_;
  std::unique_ptr<BpeModel> model_;
  bool has_template_ = false;
  // Ids must lie below the number of tokens the file defines (vocab entries plus added tokens), so that a
  // hostile id cannot make the token table allocate without bound.
  int64_t id_limit_ = 0;
};

// An added token, else a model token (the model must exist by then).
std::optional<TokenId> HfReader::lookup(const std::string& text) const {
  if (auto it = added_ids_.find(text); it != added_ids_.end()) return it->second;
  return model_ ? model_->token_id(text) : std::nullopt;
}

std::string HfReader::token_name(const json& j) const {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("content") && j["content"].is_string()) return j["content"].get<std::string>();
  return {};
}

TokenId HfReader::token_id(const json& j, const std::string& what) const {
  if (!j.is_number_integer()) fail(fmt::format("{}: the id {} is not an integer", what, j.dump()));
  if (j.is_number_unsigned() ? j.get<uint64_t>() >= static_cast<uint64_t>(id_limit_)
                             : (j.get<int64_t>() < 0 || j.get<int64_t>() >= id_limit_)) {
    fail(fmt::format("{}: the id {} is outside [0, {}), the tokens this file defines", what, j.dump(), id_limit_));
  }
  return static_cast<TokenId>(j.get<int64_t>());
}

int HfReader::count_field(const json& j, const char* key, const std::string& what) const {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return 0;
  if (!it->is_number_integer() || (it->is_number_unsigned() ? it->get<uint64_t>() > (1u << 20)
                                                             : (it->get<int64_t>() < 0 || it->get<int64_t>() > (1 << 20))))
    fail(fmt::format("{}: {} must be an integer in [0, {}], got {}", what, key, 1 << 20, it->dump()));
  return static_cast<int>(it->get<int64_t>());
}

void HfReader::read_model(const json& model, TokenizerJson& file) {
  std::string type = type_of(model);
  if (type.empty() && model.is_object() && model.contains("merges")) type = "BPE";  // older files omit it
  if (type != "BPE") fail(fmt::format("unsupported tokenizer model type '{}' (only BPE)", type));
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty()) {
      fail(fmt::format("unsupported BPE option {}", key));
    }
  }
  if (!file.has_vocab) fail("model.vocab missing");
  for (auto& [text, id] : file.vocab) {
    if (id < 0 || id >= id_limit_) {
      fail(fmt::format("model.vocab: the id {} of '{}' is outside [0, {}), the tokens this file defines", id, text,
                       id_limit_));
    }
    if (static_cast<size_t>(id) >= model_tokens_.size()) model_tokens_.resize(id + 1);
    model_tokens_[id] = std::move(text);
  }
  file.vocab = {};
}

void HfReader::read_added_tokens(const json& added) {
  if (added.is_null()) return;
  if (!added.is_array()) fail("added_tokens is not an array");
  for (const json& t : added) {
    AddedToken token;
    try {
      token.id = token_id(t.at("id"), "added_tokens");
      token.content = t.at("content").get<std::string>();
      token.special = flag(t, "special", false);
      token.lstrip = flag(t, "lstrip", false);
      token.rstrip = flag(t, "rstrip", false);
      token.single_word = flag(t, "single_word", false);
      token.normalized = flag(t, "normalized", !token.special);
    } catch (const json::exception& e) {
      fail(std::string("bad added_tokens entry: ") + e.what());
    }
    added_ids_.insert_or_assign(token.content, token.id);
    spec_.added_tokens.push_back(std::move(token));
  }
}

void HfReader::read_normalizer(const json& j) {
  std::string type = type_of(j);
  if (j.is_null()) return;
  if (type == "Sequence") {
    for (const json& step : field(j, "normalizers")) read_normalizer(step);
  } else if (type == "Prepend") {
    spec_.normalizer.push_back({NormalizerStep::Kind::kPrepend, j.value("prepend", std::string()), {}});
  } else if (type == "Replace") {
    const json& pattern = field(j, "pattern");
    if (!pattern.contains("String")) fail("unsupported Replace normalizer pattern (only String)");
    spec_.normalizer.push_back({NormalizerStep::Kind::kReplace, pattern["String"].get<std::string>(),
                                j.value("content", std::string())});
  } else {
    fail(fmt::format("unsupported normalizer '{}'", type));
  }
}

void HfReader::read_pre_tokenizer(const json& j) {
  std::string type = type_of(j);
  if (j.is_null()) return;
  try {
    if (type == "Sequence") {
      for (const json& step : field(j, "pretokenizers")) read_pre_tokenizer(step);
    } else if (type == "Split") {
      if (j.value("behavior", std::string("Isolated")) != "Isolated" || flag(j, "invert", false)) {
        fail("unsupported Split pre-tokenizer (only behavior Isolated, invert false)");
      }
      const json& pattern = field(j, "pattern");
      std::string regex;
      if (pattern.contains("Regex")) regex = pattern["Regex"].get<std::string>();
      else if (pattern.contains("String")) regex = "\\Q" + pattern["String"].get<std::string>() + "\\E";
      else fail("Split pre-tokenizer without a pattern");
      spec_.pre_tokenizer.push_back({PreTokenizerStep::Kind::kSplit, std::make_shared<RegexSplitter>(regex)});
    } else if (type == "ByteLevel") {
      PreTokenizerStep step{PreTokenizerStep::Kind::kByteLevel, nullptr, flag(j, "add_prefix_space", true)};
      if (flag(j, "use_regex", true)) step.regex = std::make_shared<RegexSplitter>(kGpt2Pattern);
      spec_.pre_tokenizer.push_back(std::move(step));
      spec_.byte_level_input = true;
    } else if (type == "Metaspace") {
      PreTokenizerStep step{.kind = PreTokenizerStep::Kind::kMetaspace};
      step.replacement = j.value("replacement", std::string("\u2581"));
      std::string scheme = j.value("prepend_scheme", std::string(flag(j, "add_prefix_space", true) ? "always" : "never"));
      if (scheme == "first") step.prepend = PreTokenizerStep::Prepend::kFirst;
      else if (scheme == "never") step.prepend = PreTokenizerStep::Prepend::kNever;
      step.split = flag(j, "split", true);
      spec_.pre_tokenizer.push_back(std::move(step));
    } else {
      fail(fmt::format("unsupported pre_tokenizer '{}'", type));
    }
  } catch (const LoadError&) {
    throw;
  } catch (const Error& e) {  // a regex that does not compile
    fail(e.what());
  }
}

void HfReader::read_post_processor(const json& j) {
  std::string type = type_of(j);
  if (j.is_null() || type == "ByteLevel") return;  // ByteLevel only trims offsets
  if (type == "Sequence") {
    for (const json& step : field(j, "processors")) read_post_processor(step);
  } else if (type == "TemplateProcessing") {
    has_template_ = true;
    const json& specials = field(j, "special_tokens");
    bool after_sequence = false;
    for (const json& item : field(j, "single")) {
      if (item.contains("Sequence")) {
        after_sequence = true;
      } else if (item.contains("SpecialToken")) {
        std::string name = item["SpecialToken"].value("id", std::string());
        if (!specials.contains(name)) fail(fmt::format("template token '{}' not in special_tokens", name));
        for (const json& id : specials[name].value("ids", json::array())) {
          (after_sequence ? spec_.suffix_ids : spec_.prefix_ids).push_back(token_id(id, "post_processor"));
        }
      }
    }
  } else {
    fail(fmt::format("unsupported post_processor '{}'", type));
  }
}

void HfReader::read_decoder(const json& j) {
  std::string type = type_of(j);
  if (j.is_null()) return;
  using Kind = DecoderStep::Kind;
  if (type == "Sequence") {
    for (const json& step : field(j, "decoders")) read_decoder(step);
  } else if (type == "ByteLevel") {
    spec_.decoder.push_back({.kind = Kind::kByteLevel});
  } else if (type == "Replace") {
    const json& pattern = field(j, "pattern");
    if (!pattern.contains("String")) fail("unsupported Replace decoder pattern (only String)");
    spec_.decoder.push_back({Kind::kReplace, pattern["String"].get<std::string>(), j.value("content", std::string())});
  } else if (type == "ByteFallback") {
    spec_.decoder.push_back({.kind = Kind::kByteFallback});
  } else if (type == "Fuse") {
    spec_.decoder.push_back({.kind = Kind::kFuse});
  } else if (type == "Strip") {
    spec_.decoder.push_back({Kind::kStrip, {}, j.value("content", std::string(" ")),
                             count_field(j, "start", "Strip decoder"), count_field(j, "stop", "Strip decoder")});
  } else if (type == "Metaspace") {
    DecoderStep step{.kind = Kind::kMetaspace, .pattern = j.value("replacement", std::string("\u2581"))};
    std::string scheme = j.value("prepend_scheme", std::string(flag(j, "add_prefix_space", true) ? "always" : "never"));
    step.strip_first_space = scheme != "never";
    spec_.decoder.push_back(std::move(step));
  } else {
    fail(fmt::format("unsupported decoder '{}'", type));
  }
}

std::unique_ptr<Tokenizer> HfReader::load(TokenizerJson& file) {
  const json& root = file.root;
  if (!root.is_object() || !root.contains("model")) fail("not a tokenizer.json (no \"model\")");
  const json& added = field(root, "added_tokens");
  id_limit_ = static_cast<int64_t>(file.vocab.size()) + (added.is_array() ? static_cast<int64_t>(added.size()) : 0);
  try {
    read_model(root["model"], file);
    read_added_tokens(field(root, "added_tokens"));
    read_normalizer(field(root, "normalizer"));
    read_pre_tokenizer(field(root, "pre_tokenizer"));
    read_post_processor(field(root, "post_processor"));
    read_decoder(field(root, "decoder"));
  } catch (const json::exception& e) {
    fail(std::string("malformed tokenizer.json: ") + e.what());
  }

  const json& model = root["model"];
  BpeOptions options;
  options.byte_fallback = flag(model, "byte_fallback", false);
  options.fuse_unk = flag(model, "fuse_unk", false);
  options.ignore_merges = flag(model, "ignore_merges", false);
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    const std::string& unk = model["unk_token"].get_ref<const std::string&>();
    auto it = std::find(model_tokens_.begin(), model_tokens_.end(), unk);
    if (it != model_tokens_.end()) options.unk_id = static_cast<TokenId>(it - model_tokens_.begin());
  }
  model_ = std::make_unique<BpeModel>(model_tokens_, options);
  for (const auto& [left, right] : file.merges) {
    if (!model_->add_merge(left, right)) {
      fail(fmt::format("merge '{} {}' uses a token that is not in the vocabulary", left, right));
    }
  }

  spec_.tokens = std::move(model_tokens_);
  for (const AddedToken& t : spec_.added_tokens) {
    if (static_cast<size_t>(t.id) >= spec_.tokens.size()) spec_.tokens.resize(t.id + 1);
    spec_.tokens[t.id] = t.content;
  }
  spec_.kind = spec_.byte_level_input ? "byte-level BPE" : "SentencePiece-style BPE";

  // Special tokens named by tokenizer_config.json; BOS/EOS around the text only when no template says.
  std::optional<TokenId> bos = config_.is_object() ? lookup(token_name(field(config_, "bos_token"))) : std::nullopt;
  std::optional<TokenId> eos = config_.is_object() ? lookup(token_name(field(config_, "eos_token"))) : std::nullopt;
  if (!has_template_ && config_.is_object()) {
    if (flag(config_, "add_bos_token", false) && bos) spec_.prefix_ids.insert(spec_.prefix_ids.begin(), *bos);
    if (flag(config_, "add_eos_token", false) && eos) spec_.suffix_ids.push_back(*eos);
  }
  spec_.bos_id = bos ? bos : (spec_.prefix_ids.empty() ? std::nullopt : std::optional(spec_.prefix_ids.front()));
  if (eos) spec_.eos_ids.push_back(*eos);
  else if (!spec_.suffix_ids.empty()) spec_.eos_ids.push_back(spec_.suffix_ids.back());
  return std::make_unique<BpeTokenizer>(std::move(spec_), std::move(model_));
}
}  // namespace

std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::string& tokenizer_json_path,
                                             const std::string& tokenizer_config_path) {
  json config;
  if (!tokenizer_config_path.empty()) config = read_json_file(tokenizer_config_path);
  TokenizerJson file = read_tokenizer_json(tokenizer_json_path);
  return HfReader(tokenizer_json_path, config).load(file);
}

}  // namespace pagoda
