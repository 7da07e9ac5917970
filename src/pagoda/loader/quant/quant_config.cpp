// quantization_config parsing for the supported families (AutoAWQ, GPTQ, compressed-tensors, ModelOpt, fp8),
// each field checked where it is read.
#include "pagoda/loader/quant/quant_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fnmatch.h>

#include <cctype>
#include <filesystem>
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

json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw LoadError(path, std::string("bad JSON: ") + e.what());
  }
}

// ModelOpt: hf_quant_config.json's {"quantization": {"quant_algo", "exclude_modules", "kv_cache_quant_algo"}},
// or config.json's {"quant_method": "modelopt", "quant_algo", "ignore"} (vLLM modelopt.py ModelOptQuantConfigBase).
void parse_modelopt(const QuantFields& f, QuantConfig& q, bool hf_quant_config) {
  const QuantFields body = hf_quant_config ? f.sub("quantization") : f;
  std::string algo = body.string("quant_algo", "");
  for (char& c : algo) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (algo != "FP8" && algo != "FP8_PER_CHANNEL_PER_TOKEN")
    body.fail("quant_algo", fmt::format("is \"{}\"; supported: FP8, FP8_PER_CHANNEL_PER_TOKEN", algo));
  q.bits = 8;
  q.is_float = true;
  q.not_converted = body.strings(hf_quant_config ? "exclude_modules" : "ignore");
}

// fp8 (transformers' FineGrainedFP8 / vLLM's Fp8Config): {"quant_method": "fp8", "activation_scheme",
// "weight_block_size": [bn, bk] or absent, "modules_to_not_convert"}.
void parse_fp8(const QuantFields& f, QuantConfig& q) {
  q.bits = 8;
  q.is_float = true;
  const std::string fmt_name = f.string("fmt", "e4m3");
  if (fmt_name != "e4m3") f.fail("fmt", fmt::format("is \"{}\"; only e4m3 weights are supported", fmt_name));
  if (const json* block = f.get("weight_block_size")) {
    if (!block->is_array() || block->size() != 2 || !(*block)[0].is_number_integer() ||
        !(*block)[1].is_number_integer() || (*block)[0].get<int64_t>() <= 0 || (*block)[1].get<int64_t>() <= 0)
      f.fail("weight_block_size", "must be two positive integers [block_n, block_k]");
    q.fp8_block_n = (*block)[0].get<int64_t>();
    q.fp8_block_k = (*block)[1].get<int64_t>();
  }
  q.not_converted = f.strings("modules_to_not_convert");  // transformers' name
  for (const std::string& m : f.strings("ignored_layers")) q.not_converted.push_back(m);  // vLLM's
}

}  // namespace

bool QuantConfig::quantizes(const std::string& module) const {
  if (method == QuantMethod::kNone) return false;
  for (const std::string& skip : not_converted) {
    if (method == QuantMethod::kAwq || method == QuantMethod::kFp8) {
      if (module.find(skip) != std::string::npos) return false;  // AutoAWQ: `any(key in name ...)`
    } else if (method == QuantMethod::kModelOpt) {  // exact, substring, or a shell wildcard ("model.layers.0.*")
      if (module.find(skip) != std::string::npos || fnmatch(skip.c_str(), module.c_str(), 0) == 0) return false;
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
      requested != "compressed-tensors" && requested != "modelopt" && requested != "fp8")
    throw LoadError(config_path, fmt::format("unknown quantization \"{}\" (expected awq, gptq, compressed-tensors, "
                                             "modelopt, fp8 or none)", requested));
  const json root = read_json_file(config_path);
  QuantConfig q;
  const auto it = root.is_object() ? root.find("quantization_config") : root.end();
  const std::filesystem::path modelopt_path = std::filesystem::path(config_path).parent_path() / "hf_quant_config.json";
  std::error_code ec;
  if ((it == root.end() || it->is_null()) && std::filesystem::exists(modelopt_path, ec)) {
    const std::string path = modelopt_path.string();
    const json modelopt = read_json_file(path);
    if (!modelopt.is_object()) throw LoadError(path, "must be a JSON object");
    q.method = QuantMethod::kModelOpt;
    q.name = "modelopt";
    parse_modelopt(QuantFields{path, modelopt, ""}, q, true);
    if (!requested.empty() && requested != "modelopt" && requested != "fp8")
      throw LoadError(path, fmt::format("--quantization {} does not match this ModelOpt FP8 checkpoint", requested));
    return q;
  }
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
  } else if (q.name == "modelopt") {
    q.method = QuantMethod::kModelOpt;
    parse_modelopt(f, q, false);
  } else if (q.name == "fp8") {
    q.method = QuantMethod::kFp8;
    parse_fp8(f, q);
  } else {
    f.fail("quant_method", fmt::format("is \"{}\"; supported: awq, gptq, compressed-tensors, modelopt, fp8", q.name));
  }
  const bool matches = requested.empty() || requested == q.name || (requested == "fp8" && q.is_float);
  if (!matches)
    throw LoadError(config_path, fmt::format("--quantization {} does not match the checkpoint's quant_method \"{}\"{}",
                                             requested, q.name, q.is_float ? " (fp8)" : ""));
  return q;
}

}  // namespace pagoda
