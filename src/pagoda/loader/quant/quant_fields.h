// QuantFields: typed access to the fields of a quantization_config object, shared by the config parsers
// (quant_config.cpp, compressed_tensors_config.cpp), where every type problem becomes a LoadError that names
// the file and the field's full path ("quantization_config.config_groups.group_0.weights.num_bits").
// The JSON keeps the file's key order (ordered_json): compressed-tensors' config groups are matched in the
// order the file gives them.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "pagoda/core/error.h"

namespace pagoda::quant {

using Json = nlohmann::ordered_json;

// Field access under `prefix` ("quantization_config."); null counts as absent, as the tools write it.
struct QuantFields {
  const std::string& path;
  const Json& obj;
  std::string prefix;

  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    throw LoadError(path, fmt::format("{}{} {}", prefix, key, problem));
  }
  const Json* get(const std::string& key) const {
    const auto it = obj.find(key);
    return (it == obj.end() || it->is_null()) ? nullptr : &*it;
  }
  int64_t integer(const std::string& key, int64_t fallback) const {
    const Json* v = get(key);
    if (v == nullptr) return fallback;
    if (!v->is_number_integer()) fail(key, "must be an integer");
    return v->get<int64_t>();
  }
  bool boolean(const std::string& key, bool fallback) const {
    const Json* v = get(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) fail(key, "must be true or false");
    return v->get<bool>();
  }
  std::string string(const std::string& key, const std::string& fallback) const {
    const Json* v = get(key);
    if (v == nullptr) return fallback;
    if (!v->is_string()) fail(key, "must be a string");
    return v->get<std::string>();
  }
  std::vector<std::string> strings(const std::string& key) const {
    const Json* v = get(key);
    std::vector<std::string> out;
    if (v == nullptr) return out;
    if (!v->is_array()) fail(key, "must be a list of module names");
    for (const Json& e : *v) {
      if (!e.is_string()) fail(key, "must be a list of module names");
      out.push_back(e.get<std::string>());
    }
    return out;
  }
  QuantFields sub(const std::string& key) const {
    const Json* v = get(key);
    if (v == nullptr || !v->is_object()) fail(key, "must be an object");
    return QuantFields{path, *v, prefix + key + "."};
  }
};

// group_size as the tools write it: -1 (GPTQ) or absent/null (channel) mean one group per row.
inline int64_t group_size_of(const QuantFields& f) {
  const int64_t g = f.integer("group_size", -1);
  if (g == -1) return 0;
  if (g <= 0 || g % 2 != 0) f.fail("group_size", fmt::format("must be -1 or a positive even number, got {}", g));
  return g;
}

inline int bits_of(const QuantFields& f, const std::string& key, std::initializer_list<int> allowed) {
  const int64_t bits = f.integer(key, -1);
  for (int a : allowed)
    if (bits == a) return a;
  f.fail(key, fmt::format("is {}; supported: {}", bits, fmt::join(allowed, ", ")));
}

}  // namespace pagoda::quant
