// quantization_config parsing for the three supported families, each field checked where it is read.
#include "pagoda/loader/quant/quant_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "pagoda/core/error.h"

namespace pagoda {
namespace {

using nlohmann::json;

// Field access under `prefix` ("quantization_config.") that turns type problems into LoadErrors; null counts
// as absent, as the tools write it.
struct QuantFields {
  const std::string& path;
  const json& obj;
  std::string prefix;

  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    throw LoadError(path, fmt::format("{}{} {}", prefix, key, problem));
  }
  const json* get(const std::string& key) const {
    const auto it = obj.find(key);
    return (it == obj.end() || it->is_null()) ? nullptr : &*it;
  }
  int64_t integer(const std::string& key, int64_t fallback) const {
    const json* v = get(key);
    if (v == nullptr) return fallback;
    if (!v->is_number_integer()) fail(key, "must be an integer");
    return v->get<int64_t>();
  }
  bool boolean(const std::string& key, bool fallback) const {
    const json* v = get(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) fail(key, "must be true or false");
    return v->get<bool>();
  }
  std::string string(const std::string& key, const std::string& fallback) const {
    const json* v = get(key);
    if (v == nullptr) return fallback;
    if (!v->is_string()) fail(key, "must be a string");
    return v->get<std::string>();
  }
  std::vector<std::string> strings(const std::string& key) const {
    const json* v = get(key);
    std::vector<std::string> out;
    if (v == nullptr) return out;
    if (!v->is_array()) fail(key, "must be a list of module names");
    for (const json& e : *v) {
      if (!e.is_string()) fail(key, "must be a list of module names");
      out.push_back(e.get<std::string>());
    }
    return out;
  }
  QuantFields sub(const std::string& key) const {
    const json* v = get(key);
    if (v == nullptr || !v->is_object()) fail(key, "must be an object");
    return QuantFields{path, *v, prefix + key + "."};
  }
};

// group_size as the tools write it: -1 (GPTQ) or absent/null (channel) mean one group per row.
int64_t group_size_of(const QuantFields& f) {
  const int64_t g = f.integer("group_size", -1);
  if (g == -1) return 0;
  if (g <= 0 || g % 2 != 0) f.fail("group_size", fmt::format("must be -1 or a positive even number, got {}", g));
  return g;
}

int bits_of(const QuantFields& f, const std::string& key, std::initializer_list<int> allowed) {
  const int64_t bits = f.integer(key, -1);
  for (int a : allowed)
    if (bits == a) return a;
  f.fail(key, fmt::format("is {}; supported: {}", bits, fmt::join(allowed, ", ")));
}

void parse_awq(const QuantFields& f, QuantConfig& q) {
  q.bits = bits_of(f, "bits", {4});
  q.group_size = group_size_of(f);
  const std::string version = f.string("version", "gemm");
  if (version != "gemm" && version != "GEMM")
    f.fail("version", fmt::format("is \"{}\"; only AutoAWQ's GEMM packing is supported", version));
  if (!f.boolean("zero_point", true)) f.fail("zero_point", "is false; only AWQ with zero points is supported");
  q.symmetric = false;
  q.not_converted = f.strings("modules_to_not_convert");
}

void parse_gptq(const QuantFields& f, QuantConfig& q) {
  q.bits = bits_of(f, "bits", {4, 8});
  q.group_size = group_size_of(f);
  q.symmetric = f.boolean("sym", true);
  const std::string format = f.string("checkpoint_format", "gptq");
  if (format != "gptq" && format != "gptq_v2")
    f.fail("checkpoint_format", fmt::format("is \"{}\"; supported: gptq, gptq_v2", format));
  q.gptq_v2 = format == "gptq_v2";
  q.desc_act = f.boolean("desc_act", false);  // g_idx itself says the order; desc_act only makes it required
}

void parse_compressed_tensors(const QuantFields& f, QuantConfig& q) {
  const std::string status = f.string("quantization_status", "compressed");
  if (status != "compressed") f.fail("quantization_status", fmt::format("is \"{}\"; expected compressed", status));
  const QuantFields groups = f.sub("config_groups");
  if (groups.obj.size() != 1)
    groups.fail("", fmt::format("has {} groups; one scheme for every Linear is supported", groups.obj.size()));
  const QuantFields group = groups.sub(groups.obj.begin().key());
  const QuantFields w = group.sub("weights");
  const std::string format = group.string("format", f.string("format", ""));
  const std::string type = w.string("type", "int");
  const std::string strategy = w.string("strategy", "");
  if (w.get("actorder") != nullptr) w.fail("actorder", "is set; activation ordering (weight_g_idx) is not supported");
  if (format == "pack-quantized") {
    if (type != "int") w.fail("type", fmt::format("is \"{}\"; pack-quantized holds int weights", type));
    q.bits = bits_of(w, "num_bits", {4, 8});
    if (!w.boolean("symmetric", true)) w.fail("symmetric", "is false; only symmetric pack-quantized is supported");
    if (strategy == "group") {
      q.group_size = w.integer("group_size", -1);
      if (q.group_size <= 0 || q.group_size % 2 != 0)
        w.fail("group_size", fmt::format("must be a positive even number for strategy group, got {}", q.group_size));
    } else if (strategy != "channel") {
      w.fail("strategy", fmt::format("is \"{}\"; supported: group, channel", strategy));
    }
  } else if (format == "float-quantized") {
    if (type != "float") w.fail("type", fmt::format("is \"{}\"; float-quantized holds float weights", type));
    q.bits = bits_of(w, "num_bits", {8});
    q.is_float = true;
    if (strategy != "channel" && strategy != "tensor")
      w.fail("strategy", fmt::format("is \"{}\"; FP8 weights support channel and tensor", strategy));
  } else {
    group.fail("format", fmt::format("is \"{}\"; supported: pack-quantized, float-quantized", format));
  }
  q.not_converted = f.strings("ignore");
}

}  // namespace

bool QuantConfig::quantizes(const std::string& module) const {
  if (method == QuantMethod::kNone) return false;
  for (const std::string& skip : not_converted) {
    if (method == QuantMethod::kAwq) {
      if (module.find(skip) != std::string::npos) return false;  // AutoAWQ: `any(key in name ...)`
    } else if (skip.rfind("re:", 0) == 0) {
      if (std::regex_match(module, std::regex(skip.substr(3)))) return false;
    } else if (module == skip) {
      return false;
    }
  }
  return true;
}

QuantConfig parse_quant_config(const std::string& config_path, const std::string& requested) {
  if (requested != "" && requested != "none" && requested != "awq" && requested != "gptq" &&
      requested != "compressed-tensors" && requested != "fp8")
    throw LoadError(config_path, fmt::format("unknown quantization \"{}\" (expected awq, gptq, compressed-tensors, "
                                             "fp8 or none)", requested));
  std::ifstream in(config_path, std::ios::binary);
  json root;
  try {
    root = json::parse(in);
  } catch (const json::exception& e) {
    throw LoadError(config_path, std::string("bad JSON: ") + e.what());
  }
  QuantConfig q;
  const auto it = root.is_object() ? root.find("quantization_config") : root.end();
  if (it == root.end() || it->is_null()) {
    if (requested != "" && requested != "none")
      throw LoadError(config_path, fmt::format("--quantization {} was asked for, but config.json has no "
                                               "quantization_config (an unquantized checkpoint)", requested));
    return q;
  }
  if (!it->is_object()) throw LoadError(config_path, "quantization_config must be an object");
  const QuantFields f{config_path, *it, "quantization_config."};
  q.name = f.string("quant_method", "");
  if (q.name == "awq") {
    q.method = QuantMethod::kAwq;
    parse_awq(f, q);
  } else if (q.name == "gptq") {
    q.method = QuantMethod::kGptq;
    parse_gptq(f, q);
  } else if (q.name == "compressed-tensors") {
    q.method = QuantMethod::kCompressedTensors;
    parse_compressed_tensors(f, q);
  } else {
    f.fail("quant_method", fmt::format("is \"{}\"; supported: awq, gptq, compressed-tensors", q.name));
  }
  const bool matches = requested.empty() || requested == q.name || (requested == "fp8" && q.is_float);
  if (!matches)
    throw LoadError(config_path, fmt::format("--quantization {} does not match the checkpoint's quant_method \"{}\"{}",
                                             requested, q.name, q.is_float ? " (fp8)" : ""));
  return q;
}

}  // namespace pagoda
