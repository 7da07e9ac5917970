// A whole model in compressed-tensors with several config groups (ct_mixed_config.h: int4 asymmetric, int4 with
// activation ordering, int8 asymmetric, FP8, "Linear" as a class, an ignore regex, modules no group targets):
// tinystories-656k's linears quantized here, each in the scheme compressed-tensors' matching gives it (written
// out by hand), packed from the format's definition (ct_packing.h). Loaded, every weight must dequantize to the
// test's own (q - z) * s bit for bit, and the model's logits must equal those of the same model stored dense
// with those values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "../model/golden_helpers.h"
#include "ct_mixed_config.h"
#include "ct_packing.h"
#include "editable_checkpoint.h"
#include "tiny_linear_checkpoint.h"

namespace pagoda {
namespace {

using test::EditableCheckpoint;
using test::TempDir;
using test::to_bytes;

// The weight schemes of mixed_groups' groups.
struct Scheme {
  bool fp8 = false;
  int bits = 0;
  int64_t group_size = 0;  // 0: channel
  bool symmetric = true;
  bool act_order = false;
};
const std::map<std::string, Scheme> kSchemes = {
    {"g_mlp1", {.bits = 4, .group_size = 32, .symmetric = false}},
    {"g_qk", {.bits = 4, .group_size = 64, .symmetric = true, .act_order = true}},
    {"g_down", {.bits = 8, .group_size = 0, .symmetric = false}},
    {"g_o0", {.fp8 = true, .bits = 8}},
    {"g_all", {.bits = 8, .group_size = 0, .symmetric = true}},
};

std::vector<float> floats_of(const EditableCheckpoint::Entry& e) {
  std::vector<float> v(e.data.size() / 4);
  std::memcpy(v.data(), e.data.data(), e.data.size());
  return v;
}

// Round to nearest with compressed-tensors' quantizer shape (quantization/utils/helpers.py calculate_qparams:
// min/max with 0 included; symmetric s = absmax / ((2^b - 1) / 2), else s = (max - min) / (2^b - 1) and
// z = round(-2^(b-1) - min / s)); how the codes were chosen does not matter to the loader, what they dequantize
// to does: dense = (q - z) * s. Act order: the groups are sets of columns chosen by a permutation
// (g_idx[perm[p]] = p / group_size), the codes stay in natural order.
void quantize_int(EditableCheckpoint& c, const std::string& module, int64_t n, int64_t k, const Scheme& s,
                  uint32_t seed, std::vector<float>& dense) {
  const std::vector<float> w = floats_of(c.at(module + ".weight"));
  const int64_t g_size = s.group_size == 0 ? k : s.group_size, groups = k / g_size;
  std::vector<int32_t> g_idx(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) g_idx[i] = static_cast<int32_t>(i / g_size);
  if (s.act_order) {
    std::vector<int> perm(static_cast<size_t>(k));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), std::mt19937(seed));
    for (int64_t p = 0; p < k; ++p) g_idx[perm[p]] = static_cast<int32_t>(p / g_size);
  }
  const int lo = -(1 << (s.bits - 1)), hi = (1 << (s.bits - 1)) - 1;
  std::vector<int> q(static_cast<size_t>(n * k)), z(static_cast<size_t>(n * groups), 0);
  std::vector<float> scales(static_cast<size_t>(n * groups));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t g = 0; g < groups; ++g) {
      float mn = 0, mx = 0;
      for (int64_t i = 0; i < k; ++i)
        if (g_idx[i] == g) mn = std::min(mn, w[r * k + i]), mx = std::max(mx, w[r * k + i]);
      const auto levels = static_cast<float>(hi - lo);
      float scale = s.symmetric ? std::max(-mn, mx) / (levels / 2) : (mx - mn) / levels;
      if (scale == 0) scale = 1;
      const int zero = s.symmetric ? 0 : std::clamp(static_cast<int>(std::nearbyint(lo - mn / scale)), lo, hi);
      scales[r * groups + g] = scale;
      z[r * groups + g] = zero;
      for (int64_t i = 0; i < k; ++i)
        if (g_idx[i] == g) {
          const int code = std::clamp(static_cast<int>(std::nearbyint(w[r * k + i] / scale)) + zero, lo, hi);
          q[r * k + i] = code;
          dense[r * k + i] = static_cast<float>(code - zero) * scale;
        }
    }
  c.tensors.erase(module + ".weight");
  c.tensors[module + ".weight_packed"] = {"I32", {n, k * s.bits / 32}, to_bytes(test::ct_pack_rows(q, n, k, s.bits))};
  c.tensors[module + ".weight_scale"] = {"F32", {n, groups}, to_bytes(scales)};
  c.tensors[module + ".weight_shape"] = {"I64", {2}, to_bytes(std::vector<int64_t>{n, k})};
  if (!s.symmetric)
    c.tensors[module + ".weight_zero_point"] = {"I32", {(n * s.bits + 31) / 32, groups},
                                                to_bytes(test::ct_pack_columns(z, n, groups, s.bits))};
  if (s.act_order) c.tensors[module + ".weight_g_idx"] = {"I32", {k}, to_bytes(g_idx)};
}

// FP8 e4m3 per row: s = absmax / 448, each value the nearest code (by search over the decoder's values).
void quantize_fp8(EditableCheckpoint& c, const std::string& module, int64_t n, int64_t k, std::vector<float>& dense) {
  const std::vector<float> w = floats_of(c.at(module + ".weight"));
  std::vector<uint8_t> codes(static_cast<size_t>(n * k));
  std::vector<float> scales(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) {
    float absmax = 0;
    for (int64_t i = 0; i < k; ++i) absmax = std::max(absmax, std::abs(w[r * k + i]));
    const float scale = absmax == 0 ? 1 : absmax / 448;
    scales[r] = scale;
    for (int64_t i = 0; i < k; ++i) {
      const float x = std::abs(w[r * k + i] / scale);
      auto distance = [&](int code) { return std::abs(f8e4m3_to_f32(static_cast<uint8_t>(code)) - x); };
      int best = 0;
      for (int code = 1; code <= 0x7E; ++code)
        if (distance(code) < distance(best)) best = code;
      codes[r * k + i] = static_cast<uint8_t>(best | (w[r * k + i] < 0 ? 0x80 : 0));
      dense[r * k + i] = f8e4m3_to_f32(codes[r * k + i]) * scale;
    }
  }
  c.tensors[module + ".weight"] = {"F8_E4M3", {n, k}, codes};
  c.tensors[module + ".weight_scale"] = {"F32", {n, 1}, to_bytes(scales)};
}

struct MixedModel {
  TempDir quant_dir, dense_dir;
  std::map<std::string, std::string> groups;   // module -> group ("" unquantized)
  std::map<std::string, std::vector<float>> dense;  // module -> the values its weight must dequantize to
};

void build(MixedModel& m, bool with_linear) {
  EditableCheckpoint quant("tinystories-656k"), dense_twin("tinystories-656k");
  m.groups = test::expected_mixed_groups(with_linear);
  uint32_t seed = 1;
  for (const auto& [module, group] : m.groups) {
    if (module == "lm_head") continue;
    const EditableCheckpoint::Entry& e = quant.at(module + ".weight");
    const int64_t n = e.shape[0], k = e.shape[1];
    std::vector<float> values = floats_of(e);
    if (!group.empty()) {
      const Scheme& s = kSchemes.at(group);
      if (s.fp8)
        quantize_fp8(quant, module, n, k, values);
      else
        quantize_int(quant, module, n, k, s, seed++, values);
    }
    dense_twin.at(module + ".weight").data = to_bytes(values);
    m.dense[module] = std::move(values);
  }
  const test::Json config = test::ct_config(test::mixed_groups(with_linear), test::kMixedIgnore);
  quant.config["quantization_config"] = config["quantization_config"];
  quant.write(m.quant_dir);
  dense_twin.write(m.dense_dir);
}

const Weight& weight_of(const LoadedModel& m, const std::string& module) {
  const int layer = module[13] - '0';  // "model.layers.N."
  const LayerWeights& l = m.weights.layers[static_cast<size_t>(layer)];
  const std::string tail = module.substr(15);
  if (tail == "self_attn.q_proj") return l.wq;
  if (tail == "self_attn.k_proj") return l.wk;
  if (tail == "self_attn.v_proj") return l.wv;
  if (tail == "self_attn.o_proj") return l.wo;
  if (tail == "mlp.gate_proj") return l.w_gate;
  if (tail == "mlp.up_proj") return l.w_up;
  return l.w_down;
}

class CompressedTensorsMixedModel : public ::testing::TestWithParam<bool> {};

TEST_P(CompressedTensorsMixedModel, WeightsAndLogitsEqualTheDenseModel) {
  MixedModel m;
  build(m, GetParam());
  // The dense model holds the dequantized weights: the FP8 group's inputs stay unquantized (weight-only).
  const LoadedModel quant =
      load_model(LoadOptions{.model_path = m.quant_dir.path(), .show_progress = false, .quantize_activations = false});
  const LoadedModel dense = load_model(LoadOptions{.model_path = m.dense_dir.path(), .show_progress = false});
  for (const auto& [module, group] : m.groups) {
    if (module == "lm_head") continue;
    const Weight& w = weight_of(quant, module);
    if (group.empty()) {
      EXPECT_FALSE(w.quantized()) << module;
      continue;
    }
    const Scheme& s = kSchemes.at(group);
    ASSERT_TRUE(w.quantized()) << module;
    EXPECT_EQ(w.scheme, s.fp8 ? QuantScheme::kFp8Channel
                              : s.bits == 4 ? QuantScheme::kInt4Group : QuantScheme::kInt8Channel) << module;
    EXPECT_EQ(w.group_size, s.group_size == 0 ? w.cols() : s.group_size) << module;
    EXPECT_EQ(w.g_idx.empty(), !s.act_order) << module;
    if (!s.fp8 && s.bits == 8) {
      EXPECT_EQ(w.zeros.empty(), s.symmetric) << module;
    }
    EXPECT_EQ(test::dequantize_all(w), m.dense.at(module)) << module << " (" << group << ")";
  }
  const std::vector<TokenId> ids = {1, 403, 1139, 289, 13, 70, 612, 1093, 4, 250, 17, 901};
  const std::vector<float> got = testing::all_position_logits(quant, ids, 5);
  const std::vector<float> want = testing::all_position_logits(dense, ids, 5);
  ASSERT_EQ(got.size(), want.size());
  double max_diff = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(static_cast<double>(got[i]) - want[i]));
    ASSERT_NEAR(got[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << "logit " << i;
  }
  std::printf("[ measured ] max |logit - dense| = %.3g\n", max_diff);
}

INSTANTIATE_TEST_SUITE_P(Groups, CompressedTensorsMixedModel, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "WithLinear" : "NamesAndRegexesOnly"; });

}  // namespace
}  // namespace pagoda
