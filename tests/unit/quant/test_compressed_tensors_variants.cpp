// compressed-tensors' asymmetric pack-quantized (weight_zero_point) and activation ordering (weight_g_idx) on
// single linears whose bytes are packed here from the format's definition (ct_packing.h), and the matching of
// several config groups and the ignore list against module names, through parse_quant_config.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>

#include "ct_mixed_config.h"
#include "ct_packing.h"
#include "pagoda/loader/quant/quant_config.h"
#include "tiny_linear_checkpoint.h"

namespace pagoda {
namespace {

using test::ct_config;
using test::ct_pack_columns;
using test::ct_pack_rows;
using test::dequantize_all;
using test::f16_bytes;
using test::expected_mixed_groups;
using test::int_weights;
using test::Json;
using test::kMixedIgnore;
using test::mixed_groups;
using test::SafetensorsWriter;
using test::TempDir;
using test::TinyCheckpoint;
using test::to_bytes;

QuantConfig pack_quantized(int bits, int64_t group_size, bool symmetric, bool act_order) {
  QuantConfig c{.method = QuantMethod::kCompressedTensors, .name = "compressed-tensors", .bits = bits,
                .group_size = group_size, .symmetric = symmetric};
  c.desc_act = act_order;
  c.group = "group_0";
  return c;
}

// A linear [n, k] of signed codes q, zero points z per row and group (none when symmetric), F16 scales, and an
// optional g_idx, as compressed-tensors stores it.
struct CtLinear {
  int64_t n, k, groups;
  int bits;
  std::vector<int> q, z;
  std::vector<float> s;
  std::vector<int32_t> g_idx;

  CtLinear(int64_t n_, int64_t k_, int64_t groups_, int bits_, bool symmetric)
      : n(n_), k(k_), groups(groups_), bits(bits_) {
    const int levels = 1 << bits, lo = -(levels / 2);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < k; ++c) q.push_back(lo + static_cast<int>((r * 7 + c * 5 + r * c) % levels));
    for (int64_t r = 0; r < n; ++r)
      for (int64_t g = 0; g < groups; ++g) {
        if (!symmetric) z.push_back(lo + static_cast<int>((r * 3 + g * 11 + 1) % levels));  // every value, both ends
        s.push_back(0.03125f * static_cast<float>(1 + (r * 5 + g) % 9));  // exact in f16
      }
  }
  int group_of(int64_t c) const { return g_idx.empty() ? static_cast<int>(c / (k / groups)) : g_idx[c]; }
  // The format's dequantization: (q - z) * s, in fp32.
  float value(int64_t r, int64_t c) const {
    const int g = group_of(c);
    return static_cast<float>(q[r * k + c] - (z.empty() ? 0 : z[r * groups + g])) * s[r * groups + g];
  }
  SafetensorsWriter writer() const {
    SafetensorsWriter w;
    w.tensor("m.weight_packed", "I32", {n, k * bits / 32}, to_bytes(ct_pack_rows(q, n, k, bits)));
    w.tensor("m.weight_scale", "F16", {n, groups}, f16_bytes(s));
    w.tensor("m.weight_shape", "I64", {2}, to_bytes(std::vector<int64_t>{n, k}));
    if (!z.empty())
      w.tensor("m.weight_zero_point", "I32", {(n * bits + 31) / 32, groups}, to_bytes(ct_pack_columns(z, n, groups, bits)));
    if (!g_idx.empty()) w.tensor("m.weight_g_idx", "I32", {k}, to_bytes(g_idx));
    return w;
  }
};

void expect_values(const Weight& w, const CtLinear& l, const std::string& what) {
  const std::vector<float> v = dequantize_all(w);
  ASSERT_EQ(v.size(), static_cast<size_t>(l.n * l.k));
  int wrong = 0;
  for (int64_t r = 0; r < l.n; ++r)
    for (int64_t c = 0; c < l.k; ++c)
      if (v[r * l.k + c] != l.value(r, c) && ++wrong <= 5)
        ADD_FAILURE() << what << ": [" << r << ", " << c << "] = " << v[r * l.k + c] << ", expected " << l.value(r, c);
  EXPECT_EQ(wrong, 0) << what;
}

// 12 rows, so that the zero points' streams along N end inside a word (12 * 4 = 48 bits, 12 * 8 = 96).
TEST(CompressedTensorsAsymmetric, ZeroPointsArePackedAlongOutFeatures) {
  for (int bits : {4, 8})
    for (int64_t group_size : {int64_t{8}, int64_t{0}}) {
      const int64_t n = 12, k = 16, groups = group_size == 0 ? 1 : k / group_size;
      const CtLinear l(n, k, groups, bits, false);
      TinyCheckpoint t;
      const Weight w = t.load(l.writer(), pack_quantized(bits, group_size, false, false), n, k);
      const std::string what = fmt::format("{} bits, group_size {}", bits, group_size);
      ASSERT_EQ(w.scheme, bits == 4 ? QuantScheme::kInt4Group : QuantScheme::kInt8Channel) << what;
      ASSERT_EQ(w.zeros.dtype, bits == 4 ? DType::kU8 : DType::kI32) << what;
      EXPECT_EQ(w.zeros.shape_string(), fmt::format("[{}, {}]", n, groups)) << what;
      EXPECT_TRUE(w.g_idx.empty()) << what;
      expect_values(w, l, what);
    }
}

TEST(CompressedTensorsAsymmetric, ZeroPointTensorMustMatchTheScheme) {
  const int64_t n = 16, k = 16;
  const CtLinear asym(n, k, 2, 4, false), sym(n, k, 2, 4, true);
  {
    TinyCheckpoint t;
    test::expect_load_error([&] { t.load(sym.writer(), pack_quantized(4, 8, false, false), n, k); },
                            {"missing tensor m.weight_zero_point", "config_groups.group_0.weights.symmetric is false"});
  }
  {
    TinyCheckpoint t;
    test::expect_load_error([&] { t.load(asym.writer(), pack_quantized(4, 8, true, false), n, k); },
                            {"m.weight_zero_point is present", "symmetric is true"});
  }
  {  // compressed-tensors before 0.9.4 saved the zero points unpacked, as int8 [N, groups]
    SafetensorsWriter w = sym.writer();
    w.tensor("m.weight_zero_point", "I8", {n, 2}, std::vector<uint8_t>(n * 2, 0));
    TinyCheckpoint t;
    test::expect_load_error([&] { t.load(w, pack_quantized(4, 8, false, false), n, k); },
                            {"m.weight_zero_point", "unpacked I8 zero points [16, 2]", "0.9.4"});
  }
  {  // packed along K (like the codes) instead of along N
    SafetensorsWriter w = sym.writer();
    w.tensor("m.weight_zero_point", "I32", {n, 1}, std::vector<uint8_t>(n * 4, 0));
    TinyCheckpoint t;
    test::expect_load_error([&] { t.load(w, pack_quantized(4, 8, false, false), n, k); },
                            {"m.weight_zero_point", "shape [16, 1]", "expected [2, 2]"});
  }
}

// Activation order: groups of 8 columns chosen by a permutation, g_idx[perm[p]] = p / 8, codes in natural
// order (compressed-tensors' _process_group), so value (r, c) uses group g_idx[c].
std::vector<int32_t> act_order_g_idx(int64_t k, int64_t group_size, uint32_t seed) {
  std::vector<int> perm(static_cast<size_t>(k));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(seed));
  std::vector<int32_t> g_idx(static_cast<size_t>(k));
  for (int64_t p = 0; p < k; ++p) g_idx[perm[p]] = static_cast<int32_t>(p / group_size);
  return g_idx;
}

TEST(CompressedTensorsActOrder, GIdxReachesTheWeight) {
  for (int bits : {4, 8})
    for (bool symmetric : {true, false}) {
      const int64_t n = 8, k = 32, group_size = 8;
      CtLinear l(n, k, k / group_size, bits, symmetric);
      l.g_idx = act_order_g_idx(k, group_size, 11 + bits);
      TinyCheckpoint t;
      const Weight w = t.load(l.writer(), pack_quantized(bits, group_size, symmetric, true), n, k);
      const std::string what = fmt::format("{} bits, symmetric {}", bits, symmetric);
      ASSERT_EQ(w.g_idx.shape_string(), "[32]") << what;
      EXPECT_EQ(std::vector<int32_t>(w.g_idx.ptr<int32_t>(), w.g_idx.ptr<int32_t>() + k), l.g_idx) << what;
      EXPECT_EQ(w.group_size, group_size);
      expect_values(w, l, what);
    }
}

// compressed-tensors registers weight_g_idx filled with -1 and reads any -1 as "no ordering".
TEST(CompressedTensorsActOrder, UnsetGIdxMeansColumnOrder) {
  const int64_t n = 8, k = 32, group_size = 8;
  CtLinear l(n, k, 4, 4, false);
  SafetensorsWriter w = l.writer();
  w.tensor("m.weight_g_idx", "I32", {k}, to_bytes(std::vector<int32_t>(k, -1)));
  TinyCheckpoint t;
  const Weight weight = t.load(w, pack_quantized(4, group_size, false, true), n, k);
  EXPECT_TRUE(weight.g_idx.empty());
  expect_values(weight, l, "g_idx all -1");
}

TEST(CompressedTensorsActOrder, InconsistentGIdxIsALoadError) {
  const int64_t n = 8, k = 32, group_size = 8;
  CtLinear l(n, k, 4, 4, true);
  const QuantConfig act_order = pack_quantized(4, group_size, true, true);
  auto load_with = [&](std::vector<int32_t> g_idx, const QuantConfig& config, const std::vector<std::string>& needles) {
    l.g_idx = std::move(g_idx);
    TinyCheckpoint t;
    test::expect_load_error([&] { t.load(l.writer(), config, n, k); }, needles);
  };
  std::vector<int32_t> g = act_order_g_idx(k, group_size, 5);
  load_with(g, pack_quantized(4, group_size, true, false),
            {"m.weight_g_idx is present", "config_groups.group_0.weights.actorder is not \"group\""});
  {
    TinyCheckpoint t;
    test::expect_load_error([&] { t.load(CtLinear(n, k, 4, 4, true).writer(), act_order, n, k); },
                            {"missing tensor m.weight_g_idx", "actorder is \"group\""});
  }
  std::vector<int32_t> partial = g;
  partial[3] = -1;
  load_with(partial, act_order, {"m.weight_g_idx", "-1 (unset) for 1 of 32 columns"});
  std::vector<int32_t> uneven = g;
  uneven[std::find(g.begin(), g.end(), 1) - g.begin()] = 0;  // a column of group 1 moved to group 0
  load_with(uneven, act_order, {"m.weight_g_idx", "puts 9 columns in group 0, not group_size 8"});
  std::vector<int32_t> outside = g;
  outside[7] = 4;
  load_with(outside, act_order, {"m.weight_g_idx", "g_idx[7] = 4 is outside the 4 groups"});
}

// --- config groups and ignore: which scheme each module gets (parse_quant_config + QuantConfig::scheme_for) ---

QuantConfig parse(const Json& config) {
  TempDir dir;
  test::write_text(dir.file("config.json"), config.dump());
  return parse_quant_config(dir.file("config.json"), "");
}

// The group each module gets, "" for none.
std::string group_of(const QuantConfig& q, const std::string& module) {
  const QuantConfig* s = q.scheme_for(module);
  return s == nullptr ? "" : s->group;
}

const char* kModules[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                          "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"};

std::map<std::string, std::string> assignment(const QuantConfig& q) {
  std::map<std::string, std::string> out;
  for (int l = 0; l < 2; ++l)
    for (const char* m : kModules) {
      const std::string module = fmt::format("model.layers.{}.{}", l, m);
      out[module] = group_of(q, module);
    }
  out["lm_head"] = group_of(q, "lm_head");
  return out;
}

TEST(CompressedTensorsTargets, ExactNameBeatsRegexBeatsClassAndRegexesGoAlphabetically) {
  const QuantConfig a = parse(ct_config(mixed_groups(false), kMixedIgnore));
  ASSERT_EQ(a.groups.size(), 4u);
  EXPECT_EQ(a.groups[0].scheme->group, "g_mlp1");  // the file's order, not the keys' order
  EXPECT_EQ(assignment(a), expected_mixed_groups(false));
  const QuantConfig& mlp1 = *a.scheme_for("model.layers.1.mlp.up_proj");
  EXPECT_EQ(mlp1.bits, 4);
  EXPECT_EQ(mlp1.group_size, 32);
  EXPECT_FALSE(mlp1.symmetric);
  EXPECT_TRUE(a.scheme_for("model.layers.0.self_attn.q_proj")->desc_act);
  EXPECT_TRUE(a.scheme_for("model.layers.0.self_attn.o_proj")->is_float);
  EXPECT_FALSE(a.is_float);  // not every group is FP8
  EXPECT_EQ(assignment(parse(ct_config(mixed_groups(true), kMixedIgnore))), expected_mixed_groups(true));
}

TEST(CompressedTensorsTargets, IgnoreAndDuplicateTargets) {
  Json g;
  g["first"] = {{"targets", {"Linear", "model.layers.0.mlp.up_proj"}}, {"format", "pack-quantized"},
                {"weights", int_weights(4, 128, true)}};
  g["second"] = {{"targets", {"model.layers.0.mlp.up_proj"}}, {"format", "pack-quantized"},
                 {"weights", int_weights(8, 0, true)}};
  {  // a target two groups list belongs to the last; the ignore list may name a class
    const QuantConfig q = parse(ct_config(g, {"lm_head"}));
    EXPECT_EQ(group_of(q, "model.layers.0.mlp.up_proj"), "second");
    EXPECT_EQ(group_of(q, "model.layers.0.mlp.gate_proj"), "first");
    EXPECT_EQ(group_of(q, "lm_head"), "");
    EXPECT_EQ(group_of(parse(ct_config(g, {"Linear"})), "model.layers.0.mlp.up_proj"), "");
  }
  {  // regular expressions are anchored at the start only (re.match), as in the ignore list
    const QuantConfig q = parse(ct_config(g, {"re:.*layers\\.1", "re:self_attn"}));
    EXPECT_EQ(group_of(q, "model.layers.1.mlp.up_proj"), "");
    EXPECT_EQ(group_of(q, "model.layers.0.self_attn.q_proj"), "first");  // "self_attn" is not at the start
    EXPECT_EQ(group_of(q, "lm_head"), "first");  // not ignored: compressed-tensors would quantize it
  }
}

}  // namespace
}  // namespace pagoda
