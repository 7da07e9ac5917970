// `pagoda quantize` reading GGUF files (quantize/gguf_source.h): the tensors it hands the quantizer are the
// loader's weights for the same file, name for name and byte for byte (Q/K un-permuted); an HF checkpoint
// written into a GGUF as llama.cpp's converter does (Q/K rows interleaved, F32 or F16) comes back as the HF
// tensors; its config.json parses back into the GGUF's ModelConfig; quantizing the GGUF gives the same bytes
// as quantizing the HF checkpoint; and block-quantized or unmapped tensors are refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numbers>

#include "../loader/tiny_models.h"
#include "../model/golden_helpers.h"
#include "pagoda/loader/gguf_loader.h"
#include "pagoda/loader/hf_config.h"
#include "pagoda/loader/safetensors.h"
#include "pagoda/loader/weight_mapping.h"
#include "pagoda/loader/weight_transforms.h"
#include "pagoda/quantize/gguf_source.h"
#include "pagoda/quantize/hf_config_json.h"
#include "pagoda/quantize/quantize_checkpoint.h"

namespace pagoda {
namespace {

using namespace quantizer;

constexpr uint32_t kGgmlF32 = 0, kGgmlF16 = 1, kGgmlBF16 = 30;

std::string hf_656k() { return testing::data_path("models/quant/tinystories-656k"); }

LoadedModel load(const std::string& path) { return load_model(LoadOptions{.model_path = path, .show_progress = false}); }

// The loaded weight a slot names (weight_slots itself cannot be asked: it resets the layers it sizes).
const Weight& weight_of(const ModelWeights& w, const WeightSlot& s) {
  switch (s.role) {
    case WeightRole::kEmbedTokens: return w.embed_tokens;
    case WeightRole::kFinalNorm: return w.final_norm;
    case WeightRole::kLmHead: return w.lm_head;
    default: break;
  }
  const LayerWeights& l = w.layers.at(static_cast<size_t>(s.layer));
  switch (s.role) {
    case WeightRole::kAttnNorm: return l.attn_norm;
    case WeightRole::kWq: return l.wq;
    case WeightRole::kWk: return l.wk;
    case WeightRole::kWv: return l.wv;
    case WeightRole::kWo: return l.wo;
    case WeightRole::kFfnNorm: return l.ffn_norm;
    case WeightRole::kGate: return l.w_gate;
    case WeightRole::kUp: return l.w_up;
    default: return l.w_down;
  }
}

// Every weight the loader reads from `path` is the source's tensor of the same HF name: dtype, shape and
// bytes; and the source holds nothing else.
void expect_loader_weights(const std::string& path) {
  const SourceCheckpoint src = SourceCheckpoint::open(path);
  const LoadedModel m = load(path);
  ModelWeights names;
  const std::vector<WeightSlot> slots = weight_slots(m.config, names);
  EXPECT_EQ(src.tensors.size(), slots.size());
  for (const WeightSlot& slot : slots) {
    const std::string name = hf_weight_name(slot);
    const SafetensorsTensor* t = src.find(name);
    ASSERT_NE(t, nullptr) << name;
    const Tensor& d = weight_of(m.weights, slot).data;
    EXPECT_EQ(t->dtype, d.dtype) << name;
    EXPECT_EQ(t->shape, std::vector<int64_t>(d.shape.begin(), d.shape.begin() + d.ndim)) << name;
    ASSERT_EQ(static_cast<int64_t>(t->nbytes), d.nbytes()) << name;
    EXPECT_EQ(std::memcmp(t->data, d.data, t->nbytes), 0) << name;
  }
  EXPECT_EQ(src.config_json["tie_word_embeddings"].get<bool>(), m.config.tie_word_embeddings);
  EXPECT_EQ(src.find("lm_head.weight") == nullptr, m.config.tie_word_embeddings);
}

// The tensor bytes of `values` in GGML type `type` (F32, F16 or BF16).
std::vector<uint8_t> encode(const std::vector<float>& values, uint32_t type) {
  if (type == kGgmlF32) return test::to_bytes(values);
  std::vector<uint16_t> h(values.size());
  for (size_t i = 0; i < values.size(); ++i) h[i] = type == kGgmlF16 ? f32_to_f16(values[i]) : f32_to_bf16(values[i]);
  return test::to_bytes(h);
}

// llama.cpp's convert_hf_to_gguf.py permutation of a Q/K weight: GGUF row gguf_rope_row(r) is HF row r.
std::vector<float> permute_rows(const std::vector<float>& hf, int64_t rows, int64_t cols, int head_dim) {
  std::vector<float> out(hf.size());
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(&out[static_cast<size_t>(gguf_rope_row(r, head_dim) * cols)], &hf[static_cast<size_t>(r * cols)],
                static_cast<size_t>(cols) * sizeof(float));
  return out;
}

// The GGUF llama.cpp's converter writes for an F32 HF checkpoint: llama.* metadata, Q/K permuted, 2-d weights
// in `type` and norms in F32 (as its --outtype f16 does), no output.weight when the embeddings are tied.
void write_gguf_from_hf(const std::string& hf_dir, const std::string& path, uint32_t type) {
  const ModelConfig c = parse_hf_config(hf_dir + "/config.json");
  const SafetensorsCheckpoint ckpt = SafetensorsCheckpoint::open(hf_dir);
  test::GgufWriter w;
  w.kv_str("general.architecture", "llama");
  w.kv_u32("llama.context_length", static_cast<uint32_t>(c.max_position_embeddings));
  w.kv_u32("llama.embedding_length", static_cast<uint32_t>(c.hidden_size));
  w.kv_u32("llama.feed_forward_length", static_cast<uint32_t>(c.intermediate_size));
  w.kv_u32("llama.block_count", static_cast<uint32_t>(c.num_layers));
  w.kv_u32("llama.attention.head_count", static_cast<uint32_t>(c.num_heads));
  w.kv_u32("llama.attention.head_count_kv", static_cast<uint32_t>(c.num_kv_heads));
  w.kv_f32("llama.rope.freq_base", static_cast<float>(c.rope.theta));
  w.kv_f32("llama.attention.layer_norm_rms_epsilon", static_cast<float>(c.rms_norm_eps));
  w.kv_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(*c.bos_token_id));
  w.kv_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(c.eos_token_ids.at(0)));
  ModelWeights unused;
  for (const WeightSlot& slot : weight_slots(c, unused)) {
    const std::string name = hf_weight_name(slot);
    const SafetensorsTensor* t = ckpt.find(name);
    if (t == nullptr && slot.role == WeightRole::kEmbedTokens) t = ckpt.find("lm_head.weight");  // tied, stored once
    ASSERT_NE(t, nullptr) << name;
    std::vector<float> v = tensor_values(*t);
    if (slot.role == WeightRole::kWq || slot.role == WeightRole::kWk)
      v = permute_rows(v, slot.shape[0], slot.shape[1], c.head_dim);
    w.tensor(gguf_weight_name(slot), slot.shape.size() == 2 ? type : kGgmlF32,
             std::vector<uint64_t>(slot.shape.begin(), slot.shape.end()), encode(v, slot.shape.size() == 2 ? type : kGgmlF32));
  }
  w.write(path);
}

TEST(GgufSource, Stories260KTensorsAreTheLoadersWeights) {
  expect_loader_weights(test::stories_gguf());
  const SourceCheckpoint src = SourceCheckpoint::open(test::stories_gguf());
  EXPECT_EQ(src.format, SourceFormat::kGguf);
  EXPECT_TRUE(src.files_dir.empty());
  EXPECT_EQ(src.linear_dtype, DType::kF32);
  // Q really was permuted in the file (the loader test checks the row mapping itself).
  const GgufFile f(test::stories_gguf());
  EXPECT_NE(std::memcmp(src.tensor("model.layers.0.self_attn.q_proj.weight").data,
                        f.find_tensor("blk.0.attn_q.weight")->data, 64 * 64 * 4), 0);
  EXPECT_EQ(std::memcmp(src.tensor("model.layers.0.self_attn.v_proj.weight").data,
                        f.find_tensor("blk.0.attn_v.weight")->data, 32 * 64 * 4), 0);
  ASSERT_NE(src.load_tokenizer(), nullptr);  // AWQ's calibration tokenizer: the file's own
  EXPECT_EQ(src.load_tokenizer()->vocab_size(), 512);
}

TEST(GgufSource, ConfigJsonParsesBackIntoTheGgufConfig) {
  test::TempDir tmp;
  const SourceCheckpoint src = SourceCheckpoint::open(test::stories_gguf());
  test::write_text(tmp.file("config.json"), src.config_json.dump(2));
  const ModelConfig hf = parse_hf_config(tmp.file("config.json"));
  const ModelConfig gg = gguf_model_config(GgufFile(test::stories_gguf()));
  EXPECT_EQ(hf.vocab_size, gg.vocab_size);
  EXPECT_EQ(hf.hidden_size, gg.hidden_size);
  EXPECT_EQ(hf.intermediate_size, gg.intermediate_size);
  EXPECT_EQ(hf.num_layers, gg.num_layers);
  EXPECT_EQ(hf.num_heads, gg.num_heads);
  EXPECT_EQ(hf.num_kv_heads, gg.num_kv_heads);
  EXPECT_EQ(hf.head_dim, gg.head_dim);
  EXPECT_EQ(hf.max_position_embeddings, gg.max_position_embeddings);
  EXPECT_EQ(static_cast<float>(hf.rms_norm_eps), static_cast<float>(gg.rms_norm_eps));
  EXPECT_EQ(hf.rope.type, gg.rope.type);
  EXPECT_EQ(hf.rope.theta, gg.rope.theta);
  EXPECT_EQ(hf.tie_word_embeddings, gg.tie_word_embeddings);
  EXPECT_EQ(hf.dtype, gg.dtype);
  EXPECT_EQ(hf.bos_token_id, gg.bos_token_id);
  EXPECT_EQ(hf.eos_token_ids, gg.eos_token_ids);
  EXPECT_EQ(src.config_json["rms_norm_eps"].get<double>(), 1e-5);  // the float32 1e-5 written as 1e-05
  EXPECT_EQ(src.config_json["architectures"], nlohmann::ordered_json::array({"LlamaForCausalLM"}));
  EXPECT_TRUE(src.config_json["rope_scaling"].is_null());
  EXPECT_FALSE(src.config_json.contains("head_dim"));  // hidden / heads
}

// tinystories-656k written as llama.cpp's converter would (Q/K interleaved, tied: no output.weight), in F32,
// F16 and BF16: the source gives back the HF tensors (rounded to the file's type), and the loader agrees.
TEST(GgufSource, HfCheckpointComesBackFromItsGguf) {
  test::TempDir tmp;
  const SafetensorsCheckpoint hf = SafetensorsCheckpoint::open(hf_656k());
  for (const uint32_t type : {kGgmlF32, kGgmlF16, kGgmlBF16}) {
    SCOPED_TRACE(type);
    const std::string path = tmp.file(fmt::format("656k-{}.gguf", type));
    write_gguf_from_hf(hf_656k(), path, type);
    expect_loader_weights(path);
    const SourceCheckpoint src = SourceCheckpoint::open(path);
    EXPECT_EQ(src.linear_dtype, type == kGgmlF32 ? DType::kF32 : type == kGgmlF16 ? DType::kF16 : DType::kBF16);
    EXPECT_EQ(src.config_json["torch_dtype"], torch_dtype_name(src.linear_dtype));
    EXPECT_EQ(src.config_json["tie_word_embeddings"], true);
    EXPECT_EQ(src.find("lm_head.weight"), nullptr);
    for (const auto& [name, t] : hf.tensors()) {
      const std::string mine = name == "lm_head.weight" ? "model.embed_tokens.weight" : name;
      const SafetensorsTensor& s = src.tensor(mine);
      EXPECT_EQ(s.shape, t.shape) << name;
      const uint32_t stored = t.shape.size() == 2 ? type : kGgmlF32;
      const std::vector<uint8_t> expected = encode(tensor_values(t), stored);
      ASSERT_EQ(s.nbytes, expected.size()) << name;
      EXPECT_EQ(std::memcmp(s.data, expected.data(), s.nbytes), 0) << name;
    }
    // Every config.json field the GGUF source writes is the HF checkpoint's (head_dim derived in both).
    const nlohmann::json hf_config = testing::read_json(hf_656k() + "/config.json");
    for (const auto& [key, value] : src.config_json.items())
      if (key != "torch_dtype") {
        EXPECT_EQ(nlohmann::json::parse(value.dump()), hf_config.at(key)) << key;
      }
  }
}

// llama.cpp's per-pair rope divisors for HF llama3 scaling (factor, low 1, high 4, original 8192).
std::vector<float> llama3_freqs(double theta, int hd, double factor) {
  std::vector<float> out;
  for (int i = 0; i < hd / 2; ++i) {
    const double wavelen = 2 * std::numbers::pi * std::pow(theta, 2.0 * i / hd);
    double f = factor;
    if (wavelen < 8192.0 / 4) {
      f = 1;
    } else if (wavelen <= 8192.0) {
      const double smooth = (8192.0 / wavelen - 1) / (4 - 1);
      f = 1 / ((1 - smooth) / factor + smooth);
    }
    out.push_back(static_cast<float>(f));
  }
  return out;
}

TEST(GgufSource, Llama3RopeUntiedAndHeadDim) {
  test::TempDir tmp;
  test::TinyGguf g;
  g.config = test::tiny_gguf_config();
  g.config.hidden_size = 64;
  g.config.num_heads = 2;
  g.config.num_kv_heads = 1;
  g.config.head_dim = 64;  // 2 x 64 != hidden 64: config.json must say head_dim
  g.config.tie_word_embeddings = false;
  g.config.rope.theta = 500000;
  const std::vector<float> freqs = llama3_freqs(500000, 64, 8.0);
  g.extra = [&](test::GgufWriter& w) {
    w.tensor("rope_freqs.weight", 0, {32}, test::to_bytes(freqs));
    w.kv_u32("tokenizer.ggml.eot_token_id", 3);
  };
  g.write(tmp.file("l3.gguf"));
  expect_loader_weights(tmp.file("l3.gguf"));
  const SourceCheckpoint src = SourceCheckpoint::open(tmp.file("l3.gguf"));
  const nlohmann::ordered_json& j = src.config_json;
  EXPECT_EQ(j["head_dim"], 64);
  EXPECT_EQ(j["tie_word_embeddings"], false);
  EXPECT_EQ(j["rope_theta"], 500000.0);
  EXPECT_EQ(j["rope_scaling"], (nlohmann::ordered_json{{"rope_type", "llama3"},
                                                       {"factor", 8.0},
                                                       {"low_freq_factor", 1.0},
                                                       {"high_freq_factor", 4.0},
                                                       {"original_max_position_embeddings", 8192}}));
  EXPECT_EQ(j["eos_token_id"], nlohmann::ordered_json::array({2, 3}));
  EXPECT_EQ(src.find("rope_freqs.weight"), nullptr);
  EXPECT_NE(src.find("lm_head.weight"), nullptr);
  test::write_text(tmp.file("config.json"), j.dump());
  const ModelConfig back = parse_hf_config(tmp.file("config.json"));
  EXPECT_EQ(back.rope.type, RopeType::kLlama3);
  EXPECT_EQ(back.rope.factor, 8.0);
  EXPECT_EQ(back.head_dim, 64);
}

TEST(GgufSource, RefusesBlockQuantizedAndUnmappedTensors) {
  test::expect_load_error(
      [] { SourceCheckpoint::open(testing::data_path("models/gguf-kquant/tinystories-656k-Q4_K_M.gguf")); },
      {"tinystories-656k-Q4_K_M.gguf", "tensor token_embd.weight is Q5_0: only F32, F16 or BF16 GGUF files"});
  test::TempDir tmp;
  test::TinyGguf g;
  g.config = test::tiny_gguf_config();
  g.extra = [](test::GgufWriter& w) { w.tensor("blk.0.attn_q.bias", 0, {8}, test::to_bytes(std::vector<float>(8))); };
  g.write(tmp.file("bias.gguf"));
  test::expect_load_error([&] { SourceCheckpoint::open(tmp.file("bias.gguf")); },
                          {"bias.gguf", "tensor blk.0.attn_q.bias has no counterpart in an HF Llama checkpoint"});
}

QuantizeOptions options(const std::string& model, const std::string& out, int bits, QuantizeFormat format) {
  QuantizeOptions o;
  o.model_path = model;
  o.out_dir = out;
  o.bits = bits;
  o.format = format;
  o.show_progress = false;
  return o;
}

// The GGUF of tinystories-656k quantizes to the bytes the HF checkpoint quantizes to: every format, RTN and
// AWQ (whose calibration reads the HF tokenizer through tokenizer_dir). Only the tied embedding's name
// differs: the HF file stores it as lm_head.weight, the GGUF output as model.embed_tokens.weight.
TEST(GgufQuantize, SameBytesAsFromTheHfCheckpoint) {
  test::TempDir tmp;
  write_gguf_from_hf(hf_656k(), tmp.file("656k.gguf"), kGgmlF32);
  struct Case {
    const char* name;
    int bits;
    QuantizeFormat format;
    QuantizeMethod method;
  };
  for (const Case& k : {Case{"awq-rtn", 4, QuantizeFormat::kAwq, QuantizeMethod::kRtn},
                        Case{"w8", 8, QuantizeFormat::kCompressedTensors, QuantizeMethod::kRtn},
                        Case{"fp8", 8, QuantizeFormat::kFp8, QuantizeMethod::kRtn},
                        Case{"w4-ct", 4, QuantizeFormat::kCompressedTensors, QuantizeMethod::kRtn},
                        Case{"awq", 4, QuantizeFormat::kAwq, QuantizeMethod::kAwq}}) {
    SCOPED_TRACE(k.name);
    const std::string from_hf = tmp.file(std::string(k.name) + "-hf"), from_gguf = tmp.file(std::string(k.name) + "-gguf");
    QuantizeOptions a = options(hf_656k(), from_hf, k.bits, k.format);
    QuantizeOptions b = options(tmp.file("656k.gguf"), from_gguf, k.bits, k.format);
    a.method = b.method = k.method;
    a.calibration = b.calibration = {testing::data_path("text/tinystories_valid_part1.txt"), 16, 128};
    a.awq.scale_grid = b.awq.scale_grid = 4;
    b.tokenizer_dir = hf_656k();
    quantize_checkpoint(a);
    quantize_checkpoint(b);
    const SafetensorsCheckpoint x = SafetensorsCheckpoint::open(from_hf), y = SafetensorsCheckpoint::open(from_gguf);
    ASSERT_EQ(x.tensors().size(), y.tensors().size());
    for (const auto& [name, t] : x.tensors()) {
      const SafetensorsTensor* u = y.find(name == "lm_head.weight" ? "model.embed_tokens.weight" : name);
      ASSERT_NE(u, nullptr) << name;
      EXPECT_EQ(u->dtype, t.dtype) << name;
      EXPECT_EQ(u->shape, t.shape) << name;
      ASSERT_EQ(u->nbytes, t.nbytes) << name;
      EXPECT_EQ(std::memcmp(u->data, t.data, t.nbytes), 0) << name;
    }
    const nlohmann::json cx = testing::read_json(from_hf + "/config.json");
    const nlohmann::json cy = testing::read_json(from_gguf + "/config.json");
    EXPECT_EQ(cy["quantization_config"], cx["quantization_config"]);
    for (const char* f : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json"})
      EXPECT_EQ(test::read_bytes(from_gguf + "/" + f), test::read_bytes(hf_656k() + "/" + f)) << f;
    // Pagoda computes the same logits from either.
    const LoadedModel mx = load(from_hf), my = load(from_gguf);
    ASSERT_NE(my.tokenizer, nullptr);
    const std::vector<TokenId> ids = my.tokenizer->encode("Once upon a time, a little dog", EncodeOptions{});
    EXPECT_EQ(testing::all_position_logits(mx, ids, 4), testing::all_position_logits(my, ids, 4));
  }
}

// The bundled stories260K (llama2.c weights converted by llama.cpp) at W8A16: loads without a tokenizer and
// computes what the GGUF computes, to the rounding of 8-bit weights.
TEST(GgufQuantize, Stories260KW8IsCloseToTheGguf) {
  test::TempDir tmp;
  quantize_checkpoint(options(test::stories_gguf(), tmp.file("w8"), 8, QuantizeFormat::kCompressedTensors));
  EXPECT_FALSE(std::filesystem::exists(tmp.file("w8") + "/tokenizer.json"));
  const LoadedModel q = load(tmp.file("w8")), ref = load(test::stories_gguf());
  EXPECT_FALSE(q.tokenizer);
  EXPECT_EQ(q.weights.layers[0].wq.scheme, QuantScheme::kInt8Channel);
  const std::vector<TokenId> prompt = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315};
  const std::vector<float> a = testing::all_position_logits(q, prompt, 3);
  const std::vector<float> b = testing::all_position_logits(ref, prompt, 3);
  double worst = 0, range = 0;
  int same_argmax = 0;
  for (size_t pos = 0; pos < prompt.size(); ++pos) {
    const float* x = a.data() + pos * 512;
    const float* y = b.data() + pos * 512;
    for (int v = 0; v < 512; ++v) {
      worst = std::max(worst, static_cast<double>(std::abs(x[v] - y[v])));
      range = std::max(range, static_cast<double>(std::abs(y[v])));
    }
    same_argmax += std::max_element(x, x + 512) - x == std::max_element(y, y + 512) - y;
  }
  std::printf("[ measured ] stories260K W8A16 vs GGUF F32: max |logit diff| %.4g (max |logit| %.4g), argmax %d/%zu\n",
              worst, range, same_argmax, prompt.size());
  EXPECT_LT(worst, 0.02 * range);
  EXPECT_EQ(same_argmax, static_cast<int>(prompt.size()));
}

}  // namespace
}  // namespace pagoda
