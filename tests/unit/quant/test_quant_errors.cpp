// Quantized checkpoints that contradict themselves: each is a copy of one of the reference variants with one
// tensor or config field changed, written into a temp dir, and must give a LoadError naming what is wrong.
#include <gtest/gtest.h>

#include <chrono>

#include <cctype>
#include <cstring>

#include "../model/golden_helpers.h"
#include "editable_checkpoint.h"
#include "pagoda/loader/model_loader.h"

namespace pagoda {
namespace {

using json = nlohmann::ordered_json;
using test::EditableCheckpoint;
using test::TempDir;

void expect_error(const EditableCheckpoint& c, const std::vector<std::string>& needles,
                  const std::string& quantization = "") {
  TempDir dir;
  const std::string path = c.write(dir);
  test::expect_load_error(
      [&] { load_model(LoadOptions{.model_path = path, .show_progress = false, .quantization = quantization}); },
      needles);
}

const std::string kQ = "model.layers.0.self_attn.q_proj";
const std::string kDown = "model.layers.1.mlp.down_proj";

TEST(QuantErrors, UnmodifiedCopiesLoad) {  // the harness itself writes loadable checkpoints
  for (const std::string v : {"awq-w4-g32-gemm", "gptq-w4-g64-asym-descact", "ct-w4a16-g128", "ct-fp8-dynamic"}) {
    TempDir dir;
    const std::string path = EditableCheckpoint(v).write(dir);
    EXPECT_NO_THROW(load_model(LoadOptions{.model_path = path, .show_progress = false})) << v;
  }
}

TEST(QuantErrors, AwqPackedShapeDisagreesWithConfig) {
  EditableCheckpoint c("awq-w4-g128-gemm");
  c.reshape(kQ + ".qweight", "I32", {64, 16}, 4);
  expect_error(c, {kQ + ".qweight", "shape [64, 16]", "expected [128, 16]"});
}

TEST(QuantErrors, AwqScalesOfWrongDtype) {
  EditableCheckpoint c("awq-w4-g128-gemm");
  c.reshape(kQ + ".scales", "I32", {1, 128}, 4);
  expect_error(c, {kQ + ".scales", "dtype I32"});
}

TEST(QuantErrors, AwqMissingQzeros) {
  EditableCheckpoint c("awq-w4-g128-gemm");
  c.tensors.erase(kDown + ".qzeros");
  expect_error(c, {"missing tensor " + kDown + ".qzeros"});
}

TEST(QuantErrors, AwqGroupSizeNotDividingK) {
  EditableCheckpoint c("awq-w4-g32-gemm");
  c.config["quantization_config"]["group_size"] = 96;
  expect_error(c, {"group_size 96", "does not divide in_features 128"});
}

TEST(QuantErrors, AwqGroupSizeDisagreesWithScales) {
  EditableCheckpoint c("awq-w4-g32-gemm");
  c.config["quantization_config"]["group_size"] = 64;
  expect_error(c, {kQ + ".qzeros", "expected [2, 16]"});
}

TEST(QuantErrors, AwqGemvPackingIsRefused) {
  EditableCheckpoint c("awq-w4-g128-gemm");
  c.config["quantization_config"]["version"] = "gemv";
  expect_error(c, {"config.json", "quantization_config.version"});
}

TEST(QuantErrors, AwqThreeBits) {
  EditableCheckpoint c("awq-w4-g128-gemm");
  c.config["quantization_config"]["bits"] = 3;
  expect_error(c, {"quantization_config.bits", "is 3"});
}

TEST(QuantErrors, GptqGIdxOutOfRange) {
  EditableCheckpoint c("gptq-w4-g64-asym-descact");
  const int32_t bad = 2;  // two groups of 64: valid entries are 0 and 1
  std::memcpy(c.at(kQ + ".g_idx").data.data() + 4 * 5, &bad, 4);
  expect_error(c, {kQ + ".g_idx", "g_idx[5] = 2"});
}

TEST(QuantErrors, GptqGIdxNegative) {
  EditableCheckpoint c("gptq-w4-g64-asym-descact");
  const int32_t bad = -1;
  std::memcpy(c.at(kDown + ".g_idx").data.data(), &bad, 4);
  expect_error(c, {kDown + ".g_idx", "g_idx[0] = -1"});
}

TEST(QuantErrors, GptqDescActWithoutGIdx) {
  EditableCheckpoint c("gptq-w4-g64-asym-descact");
  c.tensors.erase(kQ + ".g_idx");
  expect_error(c, {"missing tensor " + kQ + ".g_idx", "desc_act"});
}

TEST(QuantErrors, GptqGIdxOfWrongLength) {
  EditableCheckpoint c("gptq-w4-g128-sym");
  c.reshape(kQ + ".g_idx", "I32", {64}, 4);
  expect_error(c, {kQ + ".g_idx", "shape [64]"});
}

TEST(QuantErrors, GptqUnknownCheckpointFormat) {
  EditableCheckpoint c("gptq-w4-g128-sym");
  c.config["quantization_config"]["checkpoint_format"] = "marlin";
  expect_error(c, {"quantization_config.checkpoint_format", "marlin"});
}

TEST(QuantErrors, GptqEightBitsDeclaredForFourBitTensors) {
  EditableCheckpoint c("gptq-w4-g128-sym");
  c.config["quantization_config"]["bits"] = 8;
  expect_error(c, {kQ + ".qweight", "expected [32, 128]"});
}

TEST(QuantErrors, CompressedTensorsWeightShapeLies) {
  EditableCheckpoint c("ct-w4a16-g128");
  const int64_t wrong[2] = {128, 64};
  std::memcpy(c.at(kQ + ".weight_shape").data.data(), wrong, 16);
  expect_error(c, {kQ + ".weight_shape", "[1] = 64"});
}

TEST(QuantErrors, CompressedTensorsScaleOfWrongShape) {
  EditableCheckpoint c("ct-w8a16-channel");
  c.reshape(kQ + ".weight_scale", "F32", {128, 2}, 4);
  expect_error(c, {kQ + ".weight_scale", "shape [128, 2]", "expected [128, 1]"});
}

TEST(QuantErrors, CompressedTensorsPackedOfWrongDtype) {
  EditableCheckpoint c("ct-w8a16-channel");
  c.reshape(kDown + ".weight_packed", "F32", {128, 96}, 4);
  expect_error(c, {kDown + ".weight_packed", "dtype F32"});
}

TEST(QuantErrors, CompressedTensorsMissingWeightShape) {
  EditableCheckpoint c("ct-w4a16-g128");
  c.tensors.erase(kQ + ".weight_shape");
  expect_error(c, {"missing tensor " + kQ + ".weight_shape"});
}

TEST(QuantErrors, CompressedTensorsUnsupportedStrategy) {
  EditableCheckpoint c("ct-w4a16-g128");
  c.config["quantization_config"]["config_groups"]["group_0"]["weights"]["strategy"] = "block";
  expect_error(c, {"config_groups.group_0.weights.strategy", "block"});
}

json& ct_weights(EditableCheckpoint& c) { return c.config["quantization_config"]["config_groups"]["group_0"]["weights"]; }
json& ct_group(EditableCheckpoint& c) { return c.config["quantization_config"]["config_groups"]["group_0"]; }

TEST(QuantErrors, CompressedTensorsTwoAndThreeBits) {
  for (int bits : {2, 3}) {
    EditableCheckpoint c("ct-w4a16-g128");
    ct_weights(c)["num_bits"] = bits;
    expect_error(c, {"config_groups.group_0.weights.num_bits", fmt::format("is {}", bits), "supported: 4, 8"});
  }
}

TEST(QuantErrors, CompressedTensorsAsymmetricWithoutZeroPoints) {
  EditableCheckpoint c("ct-w4a16-g128");
  ct_weights(c)["symmetric"] = false;
  expect_error(c, {"missing tensor " + kQ + ".weight_zero_point", "config_groups.group_0.weights.symmetric is false"});
}

TEST(QuantErrors, CompressedTensorsActOrderWithoutGIdx) {
  EditableCheckpoint c("ct-w4a16-g128");
  ct_weights(c)["actorder"] = "group";
  expect_error(c, {"missing tensor " + kQ + ".weight_g_idx", "actorder is \"group\""});
  EditableCheckpoint channel("ct-w8a16-channel");
  ct_weights(channel)["actorder"] = true;  // true means "group"
  expect_error(channel, {"config_groups.group_0.weights.actorder", "needs strategy group"});
}

TEST(QuantErrors, CompressedTensorsSchemesThatAreNotWeightOnly) {
  {  // int8 dynamic per-token activations (W4A8 / W8A8 int): the activation quantization would be skipped
    EditableCheckpoint c("ct-w4a16-g128");
    ct_group(c)["input_activations"] = {{"num_bits", 8}, {"type", "int"}, {"strategy", "token"}, {"dynamic", true},
                                        {"symmetric", true}};
    expect_error(c, {"config_groups.group_0.input_activations.type", "\"int\" with num_bits 8", "only FP8"});
  }
  {
    EditableCheckpoint c("ct-w4a16-g128");
    ct_group(c)["output_activations"] = {{"num_bits", 8}, {"type", "float"}};
    expect_error(c, {"config_groups.group_0.output_activations"});
  }
  {
    EditableCheckpoint c("ct-w8a16-channel");
    ct_weights(c)["dynamic"] = true;
    expect_error(c, {"config_groups.group_0.weights.dynamic", "is true"});
  }
  {
    EditableCheckpoint c("ct-fp8-dynamic");
    ct_weights(c)["symmetric"] = false;
    expect_error(c, {"config_groups.group_0.weights.symmetric", "FP8"});
  }
}

TEST(QuantErrors, CompressedTensorsSparseAndTransformedWeights) {
  {
    EditableCheckpoint c("ct-w4a16-g128");
    c.config["quantization_config"]["sparsity_config"] = {{"format", "sparse-24-bitmask"}, {"sparsity_structure", "2:4"},
                                                          {"targets", {"Linear"}}, {"ignore", {"lm_head"}}};
    expect_error(c, {"quantization_config.sparsity_config.format", "sparse-24-bitmask"});
  }
  {
    EditableCheckpoint c("ct-w4a16-g128");
    c.config["quantization_config"]["transform_config"] = {
        {"config_groups", {{"u", {{"type", "hadamard"}, {"apply", json::array()}}}}}};
    expect_error(c, {"quantization_config.transform_config.config_groups", "online transforms"});
  }
}

// kv_cache_scheme is read past (the KV cache is --kv-cache-dtype's) but checked as vLLM checks it: a scheme no engine
// serves was accepted silently (a corrupted-checkpoint sweep's {num_bits: 3, type: int, strategy: "bogus"}).
TEST(QuantErrors, CompressedTensorsKvCacheScheme) {
  const json fp8 = {{"num_bits", 8}, {"type", "float"}, {"strategy", "tensor"}, {"dynamic", false}, {"symmetric", true}};
  const auto with = [](json scheme, const char* key, const json& value) {
    scheme[key] = value;
    return scheme;
  };
  {
    EditableCheckpoint c("ct-fp8-dynamic");
    c.config["quantization_config"]["kv_cache_scheme"] = fp8;
    TempDir dir;
    EXPECT_NO_THROW(load_model(LoadOptions{.model_path = c.write(dir), .show_progress = false}));
  }
  const std::pair<json, std::vector<std::string>> bad[] = {
      {{{"num_bits", 3}, {"type", "int"}, {"strategy", "bogus"}}, {"kv_cache_scheme.type", "\"int\" with num_bits 3"}},
      {with(fp8, "num_bits", 4), {"kv_cache_scheme.type", "num_bits 4"}},
      {with(fp8, "strategy", "channel"), {"kv_cache_scheme.strategy", "\"channel\""}},
      {with(fp8, "symmetric", false), {"kv_cache_scheme.symmetric", "must be true"}},
      {json("fp8"), {"kv_cache_scheme", "must be an object"}},
  };
  for (const auto& [scheme, message] : bad) {
    EditableCheckpoint c("ct-fp8-dynamic");
    c.config["quantization_config"]["kv_cache_scheme"] = scheme;
    expect_error(c, message);
  }
}

TEST(QuantErrors, CompressedTensorsUnreadableRegex) {
  EditableCheckpoint c("ct-w4a16-g128");
  c.config["quantization_config"]["ignore"] = {"lm_head", "re:*_proj"};  // nothing to repeat (Python says so too)
  expect_error(c, {"quantization_config.ignore", "re:*_proj", "regular expression"});
  EditableCheckpoint t("ct-w4a16-g128");
  ct_group(t)["targets"] = {"re:.*(mlp"};
  expect_error(t, {"quantization_config.config_groups.group_0.targets", "re:.*(mlp"});
}

// Found by a corrupted-checkpoint sweep: std::regex overflowed the stack on a 100,000-character pattern or one
// nested 20,000 deep (SIGSEGV), and took exponential time to match (.*)*X against each module name (a hang).
// PCRE2 reads them now: length and nesting are bounded at compile time, backtracking at match time.
TEST(QuantErrors, CompressedTensorsHostileRegexes) {
  {
    EditableCheckpoint c("ct-w4a16-g128");
    c.config["quantization_config"]["ignore"] = {"lm_head", "re:" + std::string(100000, 'x')};
    expect_error(c, {"quantization_config.ignore", "100000 bytes long"});
  }
  {
    EditableCheckpoint c("ct-w4a16-g128");
    c.config["quantization_config"]["ignore"] = {"lm_head", "re:" + std::string(2000, '(') + "x" + std::string(2000, ')')};
    expect_error(c, {"quantization_config.ignore", "regular expression"});
  }
  for (const char* slow : {"re:(.*)*_projX", "re:(.*.*)*X$"}) {  // the sweep's: PCRE2 sees the X they need, at once
    EditableCheckpoint c("ct-w4a16-g128");
    c.config["quantization_config"]["ignore"] = {"lm_head", slow};
    TempDir dir;
    const std::string path = c.write(dir);
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_NO_THROW(load_model(LoadOptions{.model_path = path, .show_progress = false})) << slow;
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5)) << slow;
  }
  EditableCheckpoint c("ct-w4a16-g128");  // no character it needs to look for: a million steps, then an error
  c.config["quantization_config"]["ignore"] = {"lm_head", "re:((.|.)*)*[^a-z._0-9]"};
  expect_error(c, {"re:((.|.)*)*[^a-z._0-9]", "takes too long to match"});
}

// Found by a corrupted-checkpoint sweep: one NaN or infinite scale (or FP8 NaN code) loaded, and greedy decoding
// then gave token 0 forever; a num_hidden_layers edited down ran a truncated model. Both are LoadErrors now.
TEST(QuantErrors, NonFiniteScalesAndCodes) {
  {
    EditableCheckpoint c("awq-w4-g128-gemm");
    auto& s = c.at(kQ + ".scales").data;  // F16 [groups, N]
    s[2] = 0x00, s[3] = 0x7e;             // group 0 of output row 1: NaN
    expect_error(c, {kQ, "scale [1, 0] is nan"});
  }
  {
    EditableCheckpoint c("gptq-w4-g128-sym");
    auto& s = c.at(kDown + ".scales").data;
    s[0] = 0x00, s[1] = 0x7c;  // +inf
    expect_error(c, {kDown, "scale [0, 0] is inf"});
  }
  {
    EditableCheckpoint c("ct-fp8-dynamic");
    c.at(kQ + ".weight").data[5] = 0xff;  // -NaN in e4m3fn
    expect_error(c, {kQ, "FP8 code at [0, 5] is NaN"});
  }
}

// sym: true promises zero points of 2^(bits - 1), and vLLM's gptq_marlin never reads qzeros then. A v1 file labelled
// gptq_v2 (zero points read 7) generated "k k k ..." here; random zero points gave other outputs than vLLM's.
TEST(QuantErrors, GptqZeroPointsThatContradictSym) {
  {
    EditableCheckpoint c("gptq-w4-g128-sym");
    c.config["quantization_config"]["checkpoint_format"] = "gptq_v2";
    expect_error(c, {"qzeros", "zero point 7", "sym is true, which means 8", "labelled gptq_v2"});
  }
  {
    EditableCheckpoint c("gptq-w4-g128-sym");
    c.at(kDown + ".qzeros").data[0] = 0x72;  // the first column's stored z - 1: 2, so z = 3
    expect_error(c, {kDown + ".qzeros", "zero point 3 (group 0, column 0)"});
  }
}

TEST(QuantErrors, TensorsOfLayersTheConfigDoesNotHave) {
  EditableCheckpoint c("awq-w4-g128-gemm");
  c.config["num_hidden_layers"] = 1;
  expect_error(c, {"model.layers.1.", "beyond the config's 1 layers"});
}

// Python's own forms (named groups, inline flags) are read as Python reads them.
TEST(QuantErrors, CompressedTensorsPythonRegexSyntax) {
  EditableCheckpoint c("ct-w4a16-g128");
  c.config["quantization_config"]["ignore"] = {"lm_head", "re:(?i)(?P<never>MODEL\\.NOWHERE)"};
  TempDir dir;
  const std::string path = c.write(dir);
  EXPECT_NO_THROW(load_model(LoadOptions{.model_path = path, .show_progress = false}));
}

// lm_head is a Linear: without "lm_head" in the ignore list, "Linear" takes it, and its weight is stored quantized.
TEST(QuantErrors, CompressedTensorsQuantizedLmHead) {
  EditableCheckpoint c("ct-w4a16-g128");
  c.config["tie_word_embeddings"] = false;
  c.config["quantization_config"]["ignore"] = json::array();
  c.tensors["model.embed_tokens.weight"] = c.at("lm_head.weight");
  c.tensors.erase("lm_head.weight");
  c.metadata.erase("model.embed_tokens.weight");
  expect_error(c, {"missing tensor lm_head.weight", "config_groups.group_0 targets lm_head"});
}

// Settings that leave the stored tensors as they are: actorder "weight" (GPTQ's calibration order only),
// sparsity_config format "dense" (pruned weights stored as they are), an empty transform_config.
TEST(QuantErrors, CompressedTensorsSettingsThatChangeNoTensorLoad) {
  for (const char* actorder : {"weight", "static"}) {
    EditableCheckpoint c("ct-w4a16-g128");
    ct_weights(c)["actorder"] = actorder;
    c.config["quantization_config"]["sparsity_config"] = {{"format", "dense"}, {"global_sparsity", 0.5},
                                                          {"sparsity_structure", "unstructured"}};
    c.config["quantization_config"]["transform_config"] = {{"config_groups", json::object()}};
    TempDir dir;
    const std::string path = c.write(dir);
    EXPECT_NO_THROW(load_model(LoadOptions{.model_path = path, .show_progress = false})) << actorder;
  }
}

TEST(QuantErrors, Fp8WeightOfWrongDtype) {
  EditableCheckpoint c("ct-fp8-dynamic");
  c.reshape(kQ + ".weight", "F16", {128, 128}, 2);
  expect_error(c, {kQ + ".weight", "dtype F16", "F8_E4M3"});
}

TEST(QuantErrors, Fp8MissingScale) {
  EditableCheckpoint c("ct-fp8-dynamic");
  c.tensors.erase(kDown + ".weight_scale");
  expect_error(c, {"missing tensor " + kDown + ".weight_scale"});
}

TEST(QuantErrors, UnknownQuantMethod) {
  EditableCheckpoint c("awq-w4-g128-gemm");
  c.config["quantization_config"]["quant_method"] = "bitsandbytes";
  expect_error(c, {"quantization_config.quant_method", "bitsandbytes"});
}

TEST(QuantErrors, RequestedQuantizationDoesNotMatch) {
  expect_error(EditableCheckpoint("gptq-w4-g128-sym"), {"--quantization awq", "\"gptq\""}, "awq");
  expect_error(EditableCheckpoint("ct-w8a16-channel"), {"--quantization fp8"}, "fp8");
  expect_error(EditableCheckpoint("tinystories-656k"), {"--quantization gptq", "no quantization_config"}, "gptq");
}

TEST(QuantErrors, QuantizedTensorsWithoutQuantizationConfig) {
  EditableCheckpoint c("ct-fp8-dynamic");
  c.config.erase("quantization_config");
  expect_error(c, {kQ + ".weight", "dtype F8_E4M3", "no quantization_config"}, "none");
}

// ModelOpt and fp8 checkpoints hold the same FP8 e4m3 weights as compressed-tensors' float-quantized, with
// other names for the config and the scales. ct-fp8-dynamic rewritten in each must load to the same weights,
// hence the same logits, bit for bit (and ct-fp8-dynamic matches transformers: QuantGolden).
std::vector<float> prompt_logits(const std::string& path) {
  const LoadedModel m = load_model(LoadOptions{.model_path = path, .show_progress = false});
  return testing::all_position_logits(m, {1, 403, 1139, 289, 13}, 7);
}

EditableCheckpoint as_modelopt(const std::string& algo, bool scale_as_vector) {
  EditableCheckpoint c("ct-fp8-dynamic");
  c.config.erase("quantization_config");
  c.hf_quant_config = {{"producer", {{"name", "modelopt"}, {"version", "0.19.0"}}},
                       {"quantization", {{"quant_algo", algo}, {"kv_cache_quant_algo", nullptr},
                                         {"exclude_modules", {"lm_head"}}}}};
  std::vector<std::string> linears;
  for (auto& [name, e] : c.tensors) {  // [N, 1] -> [N], as FP8_PER_CHANNEL_PER_TOKEN writes them
    if (scale_as_vector && name.ends_with(".weight_scale")) e.shape = {e.shape[0]};
    if (name.ends_with(".weight_scale")) linears.push_back(name.substr(0, name.size() - 13));
  }
  std::string upper = algo;
  for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (upper == "FP8") {  // static activation scales: an input_scale per linear
    const float s = 0.02f;
    std::vector<uint8_t> bytes(4);
    std::memcpy(bytes.data(), &s, 4);
    for (const std::string& l : linears) c.tensors[l + ".input_scale"] = {"F32", {}, bytes};
  }
  return c;
}

TEST(QuantModelOpt, Fp8CheckpointsLoadToTheSameWeightsAsCompressedTensors) {
  const std::vector<float> expected = prompt_logits(test::data_dir() + "/models/quant/ct-fp8-dynamic");
  {
    TempDir dir;
    EXPECT_EQ(prompt_logits(as_modelopt("FP8_PER_CHANNEL_PER_TOKEN", true).write(dir)), expected) << "hf_quant_config";
  }
  {  // newer ModelOpt: the same in config.json's quantization_config
    EditableCheckpoint c = as_modelopt("fp8_per_channel_per_token", false);
    c.config["quantization_config"] = {{"quant_method", "modelopt"}, {"quant_algo", "FP8_PER_CHANNEL_PER_TOKEN"},
                                       {"ignore", {"lm_head"}}};
    c.hf_quant_config = nullptr;
    TempDir dir;
    EXPECT_EQ(prompt_logits(c.write(dir)), expected) << "config.json";
  }
  {  // fp8 (transformers / vLLM Fp8Config) with per-row scales
    EditableCheckpoint c("ct-fp8-dynamic");
    c.config["quantization_config"] = {{"quant_method", "fp8"}, {"activation_scheme", "dynamic"},
                                       {"modules_to_not_convert", {"lm_head"}}};
    TempDir dir;
    EXPECT_EQ(prompt_logits(c.write(dir)), expected) << "fp8";
  }
}

TEST(QuantModelOpt, InconsistentCheckpointsAreLoadErrors) {
  expect_error(as_modelopt("NVFP4", true), {"hf_quant_config.json", "quantization.quant_algo", "NVFP4"});
  {
    TempDir dir;
    const std::string path = as_modelopt("FP8", true).write(dir);
    EXPECT_NO_THROW(load_model(LoadOptions{.model_path = path, .show_progress = false, .quantization = "modelopt"}));
    EXPECT_NO_THROW(load_model(LoadOptions{.model_path = path, .show_progress = false, .quantization = "fp8"}));
  }
  {
    EditableCheckpoint c = as_modelopt("FP8", true);
    c.hf_quant_config["quantization"]["exclude_modules"] = {"lm_head", "model.layers.1.*"};
    // Layer 1 is excluded, so read as unquantized: its FP8 weights are not a float dtype.
    expect_error(c, {"model.layers.1.", ".weight has dtype F8_E4M3"});
  }
  expect_error(as_modelopt("FP8", true), {"--quantization awq", "ModelOpt"}, "awq");
  {
    EditableCheckpoint c = as_modelopt("FP8", true);
    c.reshape(kQ + ".weight_scale", "F32", {3}, 4);
    expect_error(c, {kQ + ".weight_scale", "shape [3]"});
  }
  {
    EditableCheckpoint c("ct-fp8-dynamic");
    c.config["quantization_config"] = {{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}};
    expect_error(c, {"missing tensor " + kQ + ".weight_scale_inv"});
    c.config["quantization_config"]["weight_block_size"] = {128};
    expect_error(c, {"quantization_config.weight_block_size", "two positive integers"});
  }
}

}  // namespace
}  // namespace pagoda

namespace pagoda {
namespace {

// compressed-tensors FP8 weights with strategy "block": weight_scale [ceil(N / bn), ceil(K / bk)]. Blocks of
// one row by 384 columns (K is 128 or 384 here) hold ct-fp8-dynamic's per-row scales as they are, so the
// model must load to the same logits; without block_structure the config is refused.
TEST(QuantCompressedTensors, Fp8BlockStrategyReadsOneScaleABlock) {
  const std::vector<float> expected = prompt_logits(test::data_dir() + "/models/quant/ct-fp8-dynamic");
  EditableCheckpoint c("ct-fp8-dynamic");
  auto& weights = c.config["quantization_config"]["config_groups"]["group_0"]["weights"];
  weights["strategy"] = "block";
  weights["block_structure"] = {1, 384};
  {
    TempDir dir;
    EXPECT_EQ(prompt_logits(c.write(dir)), expected);
  }
  weights["block_structure"] = {32, 64};  // the [N, 1] scales no longer match ceil(N / 32) x ceil(K / 64)
  expect_error(c, {kQ + ".weight_scale"});
  weights.erase("block_structure");
  expect_error(c, {"block_structure"});
}

}  // namespace
}  // namespace pagoda
