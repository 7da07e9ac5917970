// quantization_config parsing for the supported families (AutoAWQ, GPTQ, compressed-tensors, ModelOpt, fp8),
// each field checked where it is read.
#include "pagoda/loader/quant/quant_config.h"

#include <fmt/format.h>

#include <fnmatch.h>

#include <cctype>
#include <filesystem>
#include <fstream>

#include "pagoda/core/error.h"
#include "pagoda/loader/quant/compressed_tensors_config.h"
#include "pagoda/loader/quant/quant_fields.h"

namespace pagoda {
namespace {

using quant::bits_of;
using quant::group_size_of;
using quant::QuantFields;
using json = quant::Json;

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
  // FP8: static per-tensor input_scale; FP8_PER_CHANNEL_PER_TOKEN: dynamic per-token activation scales.
  q.activations = algo == "FP8" ? ActivationQuant::kFp8Static : ActivationQuant::kFp8PerToken;
  q.not_converted = body.strings(hf_quant_config ? "exclude_modules" : "ignore");
}

// fp8 (transformers' FineGrainedFP8 / vLLM's Fp8Config): {"quant_method": "fp8", "activation_scheme",
// "weight_block_size": [bn, bk] or absent, "modules_to_not_convert"}.
void parse_fp8(const QuantFields& f, QuantConfig& q) {
  q.bits = 8;
  q.is_float = true;
  const std::string fmt_name = f.string("fmt", "e4m3");
  // Dynamic scales are per token here (vLLM's Fp8Config takes one per tensor for per-tensor weights: per
  // token is at least as accurate, and needs no reduction over the batch).
  const std::string scheme = f.string("activation_scheme", "dynamic");
  if (scheme != "dynamic" && scheme != "static")
    f.fail("activation_scheme", fmt::format("is \"{}\"; expected dynamic or static", scheme));
  q.activations = scheme == "static" ? ActivationQuant::kFp8Static : ActivationQuant::kFp8PerToken;
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

const QuantConfig* QuantConfig::scheme_for(const std::string& module) const {
  if (method == QuantMethod::kNone) return nullptr;
  if (method == QuantMethod::kCompressedTensors) return quant::compressed_tensors_scheme_for(*this, module);
  for (const std::string& skip : not_converted) {
    if (method == QuantMethod::kAwq || method == QuantMethod::kFp8) {
      if (module.find(skip) != std::string::npos) return nullptr;  // AutoAWQ: `any(key in name ...)`
    } else if (method == QuantMethod::kModelOpt) {  // exact, substring, or a shell wildcard ("model.layers.0.*")
      if (module.find(skip) != std::string::npos || fnmatch(skip.c_str(), module.c_str(), 0) == 0) return nullptr;
    }
  }
  return this;
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
    quant::parse_compressed_tensors(f, q);
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
