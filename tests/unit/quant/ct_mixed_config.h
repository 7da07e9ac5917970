// The compressed-tensors quantization_config of the config-group tests (test_compressed_tensors_variants.cpp
// checks which module each group takes, test_compressed_tensors_model.cpp loads and runs a model in it).
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

namespace pagoda::test {

using Json = nlohmann::ordered_json;

// A group's "weights" (QuantizationArgs) as llm-compressor writes them; group_size 0: strategy channel.
inline Json int_weights(int bits, int64_t group_size, bool symmetric, const char* actorder = nullptr) {
  return {{"num_bits", bits}, {"type", "int"}, {"symmetric", symmetric},
          {"strategy", group_size == 0 ? "channel" : "group"},
          {"group_size", group_size == 0 ? Json(nullptr) : Json(group_size)},
          {"dynamic", false}, {"actorder", actorder == nullptr ? Json(nullptr) : Json(actorder)}};
}

// config.json's quantization_config around `groups`; format "mixed-precision", so each group names its own.
inline Json ct_config(Json groups, std::vector<std::string> ignore) {
  return {{"quantization_config",
           {{"quant_method", "compressed-tensors"}, {"format", "mixed-precision"}, {"quantization_status", "compressed"},
            {"config_groups", std::move(groups)}, {"ignore", std::move(ignore)}, {"sparsity_config", Json::object()}}}};
}

// Four groups, in this order: layer 1's MLP (int4 asymmetric g32), every q and k (int4 symmetric g64, act
// order), every down_proj (int8 asymmetric per channel), layer 0's o_proj by name (FP8, dynamic FP8
// activations); with_linear adds a fifth for "Linear" (int8 symmetric per channel).
inline Json mixed_groups(bool with_linear) {
  Json g;
  g["g_mlp1"] = {{"targets", {"re:.*layers\\.1\\.mlp\\..*"}}, {"format", "pack-quantized"},
                 {"weights", int_weights(4, 32, false)}};
  g["g_qk"] = {{"targets", {"re:.*self_attn\\.(q|k)_proj$"}}, {"format", "pack-quantized"},
               {"weights", int_weights(4, 64, true, "group")}};
  g["g_down"] = {{"targets", {"re:.*down_proj"}}, {"format", "pack-quantized"}, {"weights", int_weights(8, 0, false)}};
  g["g_o0"] = {{"targets", {"model.layers.0.self_attn.o_proj"}}, {"format", "float-quantized"},
               {"weights",
                {{"num_bits", 8}, {"type", "float"}, {"strategy", "channel"}, {"symmetric", true}, {"dynamic", false}}},
               {"input_activations", {{"num_bits", 8}, {"type", "float"}, {"strategy", "token"}, {"dynamic", true}}}};
  if (with_linear)
    g["g_all"] = {{"targets", {"Linear"}}, {"format", "pack-quantized"}, {"weights", int_weights(8, 0, true)}};
  return g;
}

// "re:model\.layers\.0\.self_attn\.v" is applied with re.match: a prefix of v_proj's name suffices.
inline const std::vector<std::string> kMixedIgnore = {"lm_head", "re:model\\.layers\\.0\\.self_attn\\.v"};

// The group of each module under mixed_groups and kMixedIgnore, as compressed-tensors' matching gives it (worked
// out by hand from utils/match.py), "" for a module stored unquantized.
inline std::map<std::string, std::string> expected_mixed_groups(bool with_linear) {
  std::map<std::string, std::string> m = {
      {"model.layers.0.self_attn.q_proj", "g_qk"},   {"model.layers.0.self_attn.k_proj", "g_qk"},
      {"model.layers.0.self_attn.v_proj", ""},       {"model.layers.0.self_attn.o_proj", "g_o0"},
      {"model.layers.0.mlp.gate_proj", ""},          {"model.layers.0.mlp.up_proj", ""},
      {"model.layers.0.mlp.down_proj", "g_down"},    {"model.layers.1.self_attn.q_proj", "g_qk"},
      {"model.layers.1.self_attn.k_proj", "g_qk"},   {"model.layers.1.self_attn.v_proj", ""},
      {"model.layers.1.self_attn.o_proj", ""},       {"model.layers.1.mlp.gate_proj", "g_mlp1"},
      {"model.layers.1.mlp.up_proj", "g_mlp1"},
      // Both regexes match; "re:.*down_proj" sorts before "re:.*layers..." (vLLM would take the file's first).
      {"model.layers.1.mlp.down_proj", "g_down"},    {"lm_head", ""}};
  // "Linear" takes every linear that no name or regex took; the ignored ones stay unquantized.
  if (with_linear)
    for (auto& [module, group] : m)
      if (group.empty() && module != "lm_head" && module != "model.layers.0.self_attn.v_proj") group = "g_all";
  return m;
}

}  // namespace pagoda::test
