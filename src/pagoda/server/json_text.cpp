#include "pagoda/server/json_text.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace pagoda::server {

int json_nesting_depth(std::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size() && deepest <= limit; ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;  // the escaped character cannot end the string
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

namespace {

using json = nlohmann::ordered_json;

// nlohmann's SAX interface, building the document: each open object keeps an index of its keys, so a key is
// added without ordered_map's linear search for a duplicate.
class OrderedBuilder {
 public:
  bool null() { return put(nullptr); }
  bool boolean(bool v) { return put(v); }
  bool number_integer(json::number_integer_t v) { return put(v); }
  bool number_unsigned(json::number_unsigned_t v) { return put(v); }
  bool number_float(json::number_float_t v, const json::string_t&) { return put(v); }
  bool string(json::string_t& v) { return put(std::move(v)); }
  bool binary(json::binary_t& v) { return put(json::binary(std::move(v))); }
  bool start_object(std::size_t) { return open(json::object()); }
  bool start_array(std::size_t) { return open(json::array()); }
  bool key(json::string_t& k) {
    key_ = std::move(k);
    return true;
  }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  template <class Exception>
  bool parse_error(std::size_t, const std::string&, const Exception& e) {
    throw e;
  }

  json take() { return std::move(root_); }

 private:
  struct Open {
    json* value;
    std::unordered_map<std::string, size_t> keys;  // objects: each key's index among the members
  };

  // Adds `v` where the parser is: the root, the open array's next element, or the open object's member `key_`.
  json* add(json v) {
    if (open_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Open& top = open_.back();
    if (top.value->is_array()) {
      top.value->get_ref<json::array_t&>().push_back(std::move(v));
      return &top.value->get_ref<json::array_t&>().back();
    }
    auto& members = static_cast<json::object_t::Container&>(top.value->get_ref<json::object_t&>());
    const auto [it, added] = top.keys.try_emplace(key_, members.size());
    if (!added) {
      members[it->second].second = std::move(v);
      return &members[it->second].second;
    }
    members.emplace_back(key_, std::move(v));
    return &members.back().second;
  }
  bool put(json v) {
    add(std::move(v));
    return true;
  }
  // A container's elements are added only while it is the innermost open one, so the pointers held here stay
  // valid: only the innermost container's storage grows.
  bool open(json v) {
    open_.push_back(Open{add(std::move(v)), {}});
    return true;
  }
  bool close() {
    open_.pop_back();
    return true;
  }

  json root_;
  std::string key_;
  std::vector<Open> open_;
};

}  // namespace

JsonTooDeep::JsonTooDeep(int max_depth)
    : std::runtime_error("JSON nested deeper than " + std::to_string(max_depth) + " levels"), max_depth(max_depth) {}

nlohmann::ordered_json parse_ordered_json(std::string_view text, int max_depth) {
  if (json_nesting_depth(text, max_depth) > max_depth) throw JsonTooDeep(max_depth);
  OrderedBuilder builder;
  json::sax_parse(text, &builder);
  return builder.take();
}

}  // namespace pagoda::server
