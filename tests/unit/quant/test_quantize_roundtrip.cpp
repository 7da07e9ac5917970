// `pagoda quantize --method rtn` on tinystories-656k against the independent packer's files
// (tests/data/models/quant/, make_quant_refs.py): tensor by tensor the same names, dtypes, shapes and bytes,
// the same quantization_config, and the same logits when Pagoda loads either. AWQ output is deterministic
// and loads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "../loader/test_files.h"
#include "../model/golden_helpers.h"
#include "pagoda/loader/safetensors.h"
#include "pagoda/quantize/quantize_checkpoint.h"

namespace pagoda {
namespace {

using namespace quantizer;

std::string quant_dir(const std::string& name) { return testing::data_path("models/quant/" + name); }

struct Variant {
  const char* reference;
  int bits;
  int64_t group_size;
  QuantizeFormat format;
};

QuantizeOptions rtn_options(const Variant& v, const std::string& out) {
  QuantizeOptions o;
  o.model_path = quant_dir("tinystories-656k");
  o.out_dir = out;
  o.bits = v.bits;
  o.group_size = v.group_size;
  o.format = v.format;
  o.show_progress = false;
  return o;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

class RtnMatchesReference : public ::testing::TestWithParam<Variant> {};

TEST_P(RtnMatchesReference, TensorByTensor) {
  test::TempDir tmp;
  const std::string out = tmp.file("out");
  quantize_checkpoint(rtn_options(GetParam(), out));
  const SafetensorsCheckpoint mine = SafetensorsCheckpoint::open(out);
  const SafetensorsCheckpoint ref = SafetensorsCheckpoint::open(quant_dir(GetParam().reference));
  ASSERT_EQ(mine.tensors().size(), ref.tensors().size());
  int64_t differing_bytes = 0;
  for (const auto& [name, r] : ref.tensors()) {
    const SafetensorsTensor* m = mine.find(name);
    ASSERT_NE(m, nullptr) << name;
    EXPECT_EQ(m->dtype, r.dtype) << name;
    EXPECT_EQ(m->shape, r.shape) << name;
    ASSERT_EQ(m->nbytes, r.nbytes) << name;
    for (size_t i = 0; i < r.nbytes; ++i) differing_bytes += m->data[i] != r.data[i];
  }
  std::printf("[ measured ] %s: %lld differing bytes\n", GetParam().reference, static_cast<long long>(differing_bytes));
  EXPECT_EQ(differing_bytes, 0);
  EXPECT_EQ(mine.metadata_entries(), ref.metadata_entries());
  // The whole file, header layout included.
  EXPECT_EQ(test::read_bytes(out + "/model.safetensors"), test::read_bytes(quant_dir(GetParam().reference) + "/model.safetensors"));
  const nlohmann::json cfg = read_json(out + "/config.json");
  const nlohmann::json ref_cfg = read_json(quant_dir(GetParam().reference) + "/config.json");
  EXPECT_EQ(cfg["quantization_config"], ref_cfg["quantization_config"]);
  EXPECT_EQ(cfg, ref_cfg);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "generation_config.json", "special_tokens_map.json"})
    EXPECT_TRUE(std::filesystem::exists(out + "/" + f)) << f;
}

TEST_P(RtnMatchesReference, SameLogitsAsTheReference) {
  test::TempDir tmp;
  const std::string out = tmp.file("out");
  quantize_checkpoint(rtn_options(GetParam(), out));
  const LoadedModel mine = load_model(LoadOptions{.model_path = out, .show_progress = false});
  const LoadedModel ref = load_model(LoadOptions{.model_path = quant_dir(GetParam().reference), .show_progress = false});
  ASSERT_NE(mine.tokenizer, nullptr);
  const std::vector<TokenId> ids = mine.tokenizer->encode("Once upon a time, a little dog", EncodeOptions{});
  EXPECT_EQ(testing::all_position_logits(mine, ids, 4), testing::all_position_logits(ref, ids, 4));
}

INSTANTIATE_TEST_SUITE_P(Formats, RtnMatchesReference,
                         ::testing::Values(Variant{"awq-w4-g128-gemm", 4, 128, QuantizeFormat::kAwq},
                                           Variant{"awq-w4-g32-gemm", 4, 32, QuantizeFormat::kAwq},
                                           Variant{"ct-w8a16-channel", 8, 0, QuantizeFormat::kCompressedTensors},
                                           Variant{"ct-fp8-dynamic", 8, 0, QuantizeFormat::kFp8},
                                           Variant{"ct-w4a16-g128", 4, 128, QuantizeFormat::kCompressedTensors}),
                         [](const auto& info) {
                           std::string s = info.param.reference;
                           for (char& c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

QuantizeOptions small_awq(const std::string& out, int64_t group_size) {
  QuantizeOptions o;
  o.model_path = quant_dir("tinystories-656k");
  o.out_dir = out;
  o.method = QuantizeMethod::kAwq;
  o.group_size = group_size;
  o.show_progress = false;
  o.calibration = {testing::data_path("text/tinystories_valid_part1.txt"), 24, 128};
  o.awq.scale_grid = 5;
  return o;
}

TEST(AwqQuantize, DeterministicAndLoadable) {
  test::TempDir tmp;
  const QuantizeSummary s = quantize_checkpoint(small_awq(tmp.file("a"), 64));
  quantize_checkpoint(small_awq(tmp.file("b"), 64));
  EXPECT_EQ(test::read_bytes(tmp.file("a") + "/model.safetensors"), test::read_bytes(tmp.file("b") + "/model.safetensors"));
  EXPECT_EQ(test::read_bytes(tmp.file("a") + "/config.json"), test::read_bytes(tmp.file("b") + "/config.json"));
  ASSERT_EQ(s.awq_groups.size(), 2u);
  EXPECT_GT(s.calibration_tokens, 0);
  for (const auto& layer : s.awq_groups) {
    ASSERT_EQ(layer.size(), 4u);
    EXPECT_FALSE(layer[1].searched);  // GQA: v_proj [64, 128] and o_proj [128, 128] differ, as AutoAWQ skips it
    for (const GroupReport& g : layer) {
      if (g.searched) {
        EXPECT_TRUE(std::isfinite(g.mse_awq) && std::isfinite(g.mse_rtn)) << g.linears;
      }
    }
  }
  const LoadedModel m = load_model(LoadOptions{.model_path = tmp.file("a"), .show_progress = false});
  EXPECT_EQ(m.weights.layers[0].wq.scheme, QuantScheme::kInt4Group);
  const nlohmann::json cfg = read_json(tmp.file("a") + "/config.json");
  EXPECT_EQ(cfg["quantization_config"]["group_size"], 64);
  EXPECT_EQ(cfg["quantization_config"]["quant_method"], "awq");
}

}  // namespace
}  // namespace pagoda
