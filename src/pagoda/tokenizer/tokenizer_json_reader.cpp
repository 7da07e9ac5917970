// SAX reader for tokenizer.json (see tokenizer_json_reader.h). Events outside model.vocab/model.merges
// go to nlohmann's DOM builder; events inside are stored directly, skipping a std::map per token.
#include "pagoda/tokenizer/tokenizer_json_reader.h"

#include <fmt/format.h>

#include <fstream>

#include "pagoda/core/error.h"

namespace pagoda {

namespace {
using json = nlohmann::json;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw LoadError(path, "cannot open file");
  std::string text(static_cast<size_t>(in.tellg()), '\0');
  in.seekg(0);
  if (!in.read(text.data(), static_cast<std::streamsize>(text.size()))) throw LoadError(path, "cannot read file");
  return text;
}

class Handler {
 public:
  explicit Handler(TokenizerJson& out) : out_(out), dom_(out.root, true) {}
  const std::string& error() const { return error_; }

  // A scalar where model.vocab or model.merges is (its key kept from the DOM) is refused: the DOM, given the value
  // without its key, would write through a stale pointer.
  bool null() {
    if (pending_ != Capture::kNone) return not_container("null");
    return capture_ == Capture::kNone ? dom_.null() : bad("null");
  }
  bool boolean(bool v) {
    if (pending_ != Capture::kNone) return not_container("boolean");
    return capture_ == Capture::kNone ? dom_.boolean(v) : bad("boolean");
  }
  bool number_integer(json::number_integer_t v) {
    if (pending_ != Capture::kNone) return not_container("number");
    if (capture_ == Capture::kNone) return dom_.number_integer(v);
    return v >= 0 ? vocab_id(static_cast<uint64_t>(v)) : bad("negative id");
  }
  bool number_unsigned(json::number_unsigned_t v) {
    if (pending_ != Capture::kNone) return not_container("number");
    return capture_ == Capture::kNone ? dom_.number_unsigned(v) : vocab_id(v);
  }
  bool number_float(json::number_float_t v, const std::string& s) {
    if (pending_ != Capture::kNone) return not_container("number");
    return capture_ == Capture::kNone ? dom_.number_float(v, s) : bad("number");
  }
  bool binary(json::binary_t& v) {
    if (pending_ != Capture::kNone) return not_container("binary");
    return capture_ == Capture::kNone ? dom_.binary(v) : bad("binary");
  }
  bool string(std::string& s) {
    if (pending_ != Capture::kNone) return not_container("string");
    if (capture_ == Capture::kNone) return dom_.string(s);
    if (capture_ != Capture::kMerges) return bad("string");
    if (capture_depth_ == 1) {  // "a b"
      size_t space = s.find(' ', 1);
      if (space == std::string::npos) return bad(fmt::format("merge '{}'", s));
      out_.merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (capture_depth_ == 2 && pair_parts_ < 2) {  // ["a", "b"]
      (pair_parts_ == 0 ? pair_.first : pair_.second) = std::move(s);
      ++pair_parts_;
    } else {
      return bad("merge entry");
    }
    return true;
  }
  bool key(std::string& k) {
    if (capture_ == Capture::kVocab) {
      pending_key_ = std::move(k);
      return true;
    }
    if (capture_ != Capture::kNone) return bad("key");
    if (depth_ == 1) model_key_ = k == "model";
    if (in_model_ && depth_ == 2 && (k == "vocab" || k == "merges")) {
      pending_ = k == "vocab" ? Capture::kVocab : Capture::kMerges;
      return true;  // the DOM never sees these members
    }
    return dom_.key(k);
  }
  bool start_object(std::size_t n) { return start(true, n); }
  bool start_array(std::size_t n) { return start(false, n); }
  bool end_object() { return end(true); }
  bool end_array() { return end(false); }
  bool parse_error(std::size_t position, const std::string& last_token, const nlohmann::detail::exception& e) {
    return dom_.parse_error(position, last_token, e);  // throws
  }

 private:
  enum class Capture { kNone, kVocab, kMerges };

  bool not_container(const char* what) {
    error_ = fmt::format("model.{} is a {}; expected {}", pending_ == Capture::kVocab ? "vocab" : "merges", what,
                         pending_ == Capture::kVocab ? "an object of token ids" : "an array of merges");
    return false;
  }
  bool bad(const std::string& what) {
    error_ = fmt::format("unexpected {} in model.{}", what, capture_ == Capture::kVocab ? "vocab" : "merges");
    return false;
  }
  bool vocab_id(uint64_t id) {
    if (capture_ != Capture::kVocab || capture_depth_ != 1 || id > (1u << 30)) return bad("number");
    out_.vocab.emplace_back(std::move(pending_key_), static_cast<TokenId>(id));
    return true;
  }
  bool start(bool object, std::size_t n) {
    if (pending_ != Capture::kNone) {
      capture_ = pending_;
      pending_ = Capture::kNone;
      if (object != (capture_ == Capture::kVocab)) return bad(object ? "object" : "array");
      out_.has_vocab = out_.has_vocab || capture_ == Capture::kVocab;
      capture_depth_ = 1;
      return true;
    }
    if (capture_ != Capture::kNone) {
      if (object || capture_ != Capture::kMerges || capture_depth_ != 1) return bad(object ? "object" : "array");
      capture_depth_ = 2;
      pair_parts_ = 0;
      return true;
    }
    ++depth_;
    if (depth_ == 2 && model_key_ && object) in_model_ = true;
    return object ? dom_.start_object(n) : dom_.start_array(n);
  }
  bool end(bool object) {
    if (capture_ != Capture::kNone) {
      if (capture_depth_ == 2) {
        if (pair_parts_ != 2) return bad("merge pair");
        out_.merges.push_back(std::move(pair_));
      }
      if (--capture_depth_ == 0) capture_ = Capture::kNone;
      return true;
    }
    if (depth_ == 2) in_model_ = false;
    --depth_;
    return object ? dom_.end_object() : dom_.end_array();
  }

  TokenizerJson& out_;
  nlohmann::detail::json_sax_dom_parser<json> dom_;
  std::string error_;
  int depth_ = 0;  // open containers seen by the DOM
  bool model_key_ = false, in_model_ = false;
  Capture pending_ = Capture::kNone, capture_ = Capture::kNone;
  int capture_depth_ = 0;
  std::string pending_key_;
  std::pair<std::string, std::string> pair_;
  int pair_parts_ = 0;
};
}  // namespace

TokenizerJson read_tokenizer_json(const std::string& path) {
  std::string text = read_file(path);
  TokenizerJson out;
  Handler handler(out);
  bool ok;
  try {
    ok = json::sax_parse(text, &handler);
  } catch (const json::exception& e) {
    throw LoadError(path, std::string("invalid JSON: ") + e.what());
  }
  if (!ok) throw LoadError(path, handler.error().empty() ? "invalid JSON" : handler.error());
  return out;
}

json read_json_file(const std::string& path) {
  std::string text = read_file(path);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw LoadError(path, std::string("invalid JSON: ") + e.what());
  }
}

}  // namespace pagoda
