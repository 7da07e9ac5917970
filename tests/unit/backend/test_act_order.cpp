// Act-order weights with their columns sorted by group (backend/cpu/act_order.h): the sorted weight's column j
// holds exactly the values of the original's column input_order[j], for 4-bit and 8-bit codes; CpuOps multiplies
// a loaded act-order weight and its prepared (sorted) form alike; and g_idx that GPTQ does not write (a group of
// another size) is left as it is.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "pagoda/backend/cpu/act_order.h"
#include "pagoda/backend/cpu/cpu_ops.h"
#include "pagoda/backend/cpu/linear_quant.h"
#include "random_quant_weight.h"

namespace pagoda {
namespace {

using test::QuantForm;
using test::RandomQuantWeight;

// GPTQ's g_idx for act order: the columns taken in a random order, group_size at a time.
HostTensor act_order_g_idx(int64_t k, int64_t group_size, uint32_t seed) {
  std::vector<int32_t> perm(static_cast<size_t>(k));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(seed));
  HostTensor g(DType::kI32, {k});
  for (int64_t i = 0; i < k; ++i) g.ptr<int32_t>()[perm[i]] = static_cast<int32_t>(i / group_size);
  return g;
}

std::vector<float> dense(const Weight& w) {
  std::vector<float> out(static_cast<size_t>(w.num_rows() * w.cols()));
  cpu::dequantize_rows(w, 0, w.num_rows(), out.data());
  return out;
}

TEST(ActOrder, SortedColumnsHoldTheOriginalValuesInInputOrder) {
  for (QuantForm form : {QuantForm::kInt4Zeros, QuantForm::kInt8Symmetric, QuantForm::kInt8Zeros}) {
    for (int64_t group : {32, 64}) {
      const int64_t n = 12, k = 256;
      RandomQuantWeight r(form, n, k, group, 5);
      const HostTensor g_idx = act_order_g_idx(k, group, 7);
      Weight w = r.weight;
      w.g_idx = g_idx.view();
      std::vector<HostTensor> storage;
      const std::optional<Weight> sorted = cpu::sort_columns_by_group(w, storage);
      ASSERT_TRUE(sorted.has_value()) << test::quant_form_name(form) << " g" << group;
      EXPECT_TRUE(sorted->g_idx.empty());
      ASSERT_EQ(sorted->input_order.numel(), k);
      const int32_t* order = sorted->input_order.ptr<const int32_t>();
      std::vector<int32_t> seen(order, order + k);
      std::sort(seen.begin(), seen.end());
      for (int64_t j = 0; j < k; ++j) ASSERT_EQ(seen[j], j) << "input_order is not a permutation";
      for (int64_t j = 0; j < k; ++j) ASSERT_EQ(g_idx.ptr<int32_t>()[order[j]], j / group) << "column " << j;
      const std::vector<float> before = dense(w), after = dense(*sorted);
      int64_t differ = 0;
      for (int64_t row = 0; row < n; ++row)
        for (int64_t j = 0; j < k; ++j) differ += after[row * k + j] != before[row * k + order[j]];
      EXPECT_EQ(differ, 0) << test::quant_form_name(form) << " g" << group;
    }
  }
}

TEST(ActOrder, CpuOpsMultipliesTheSortedFormAsTheLoadedOne) {
  const int64_t n = 24, k = 512, group = 128, tokens = 3;
  RandomQuantWeight r(QuantForm::kInt4Zeros, n, k, group, 11);
  const HostTensor g_idx = act_order_g_idx(k, group, 13);
  ModelWeights loaded;
  loaded.layers.resize(1);
  loaded.layers[0].wo = r.weight;
  loaded.layers[0].wo.g_idx = g_idx.view();
  CpuOps ops;
  const ModelWeights prepared = ops.prepare_weights(loaded, ModelConfig{}, false, nullptr);
  ASSERT_FALSE(prepared.layers[0].wo.input_order.empty()) << "the act-order weight was not sorted";
  std::vector<float> x(static_cast<size_t>(tokens * k));
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  for (float& v : x) v = uni(rng);
  std::vector<float> want(static_cast<size_t>(tokens * n)), got(want.size());
  ops.linear(Tensor(want.data(), DType::kF32, {tokens, n}), Tensor(x.data(), DType::kF32, {tokens, k}),
             loaded.layers[0].wo);
  ops.linear(Tensor(got.data(), DType::kF32, {tokens, n}), Tensor(x.data(), DType::kF32, {tokens, k}),
             prepared.layers[0].wo);
  for (size_t i = 0; i < want.size(); ++i)  // the same products, summed in another order
    EXPECT_NEAR(got[i], want[i], 1e-5 * (1.0 + std::abs(want[i]))) << "output " << i;
}

TEST(ActOrder, GroupsOfAnotherSizeStayAsLoaded) {
  const int64_t n = 4, k = 128, group = 32;
  RandomQuantWeight r(QuantForm::kInt4Zeros, n, k, group, 19);
  HostTensor g_idx = act_order_g_idx(k, group, 23);
  Weight w = r.weight;
  w.g_idx = g_idx.view();
  std::vector<HostTensor> storage;
  for (int64_t i = 0; i < k; ++i)  // one column of group 1 moved into group 0: 33 and 31 columns
    if (g_idx.ptr<int32_t>()[i] == 1) {
      g_idx.ptr<int32_t>()[i] = 0;
      break;
    }
  EXPECT_FALSE(cpu::sort_columns_by_group(w, storage).has_value());
  EXPECT_FALSE(cpu::sort_columns_by_group(r.weight, storage).has_value()) << "no g_idx: nothing to sort";
  EXPECT_TRUE(storage.empty());
}

}  // namespace
}  // namespace pagoda
