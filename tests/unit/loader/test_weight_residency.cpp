// copy_weights_into_memory: same bytes, no pointer left in a file mapping, tied weights still shared.
// release_unreferenced_storage: frees exactly the buffers no weight of any set points into, interior views kept.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "pagoda/loader/weight_residency.h"

namespace pagoda {
namespace {

TEST(WeightResidency, CopiesEveryMappedWeightAndKeepsTying) {
  const std::string path = std::string(PAGODA_TEST_DATA_DIR) + "/../../models/stories260K.gguf";
  const LoadedModel mapped = load_model(LoadOptions{.model_path = path, .show_progress = false});
  LoadedModel copied = load_model(LoadOptions{.model_path = path, .show_progress = false});
  ASSERT_FALSE(copied.mappings.empty());
  copy_weights_into_memory(copied);
  EXPECT_TRUE(copied.mappings.empty());
  const auto same = [](const Weight& a, const Weight& b) {
    return a.data.dtype == b.data.dtype && a.data.numel() == b.data.numel() &&
           std::memcmp(a.data.data, b.data.data, static_cast<size_t>(a.data.nbytes())) == 0;
  };
  EXPECT_TRUE(same(mapped.weights.embed_tokens, copied.weights.embed_tokens));
  EXPECT_TRUE(same(mapped.weights.lm_head, copied.weights.lm_head));
  for (size_t l = 0; l < mapped.weights.layers.size(); ++l) {
    EXPECT_TRUE(same(mapped.weights.layers[l].wq, copied.weights.layers[l].wq)) << l;
    EXPECT_TRUE(same(mapped.weights.layers[l].w_down, copied.weights.layers[l].w_down)) << l;
  }
  EXPECT_NE(copied.weights.embed_tokens.data.data, mapped.weights.embed_tokens.data.data);
  EXPECT_EQ(copied.weights.lm_head.data.data == copied.weights.embed_tokens.data.data,
            mapped.weights.lm_head.data.data == mapped.weights.embed_tokens.data.data);
}

// As after a backend's prepare_weights: one weight moved to storage of its own (its loaded buffer is then
// unreferenced), one referenced only through a view of its middle rows, one kept alive by a second weight set
// (the fallback's), the tied embedding and output projection sharing one buffer.
TEST(WeightResidency, ReleasesExactlyTheBuffersNoWeightPointsInto) {
  const std::string path = std::string(PAGODA_TEST_DATA_DIR) + "/../../models/stories260K.gguf";
  LoadedModel m = load_model(LoadOptions{.model_path = path, .show_progress = false});
  copy_weights_into_memory(m);
  const size_t buffers = m.owned.size();
  ASSERT_GT(buffers, 4u);
  EXPECT_EQ(release_unreferenced_storage(m), 0);  // everything is referenced as loaded
  ASSERT_EQ(m.owned.size(), buffers);

  LayerWeights& l0 = m.weights.layers[0];
  const Weight moved = l0.wq, shared_wk = l0.wk;
  const HostTensor replacement(moved.data.dtype, std::span<const int64_t>(moved.data.shape.data(), moved.data.ndim));
  l0.wq.data = replacement.view();
  l0.w_down = l0.w_down.rows(1, 2);  // a pointer inside its buffer, not at its start
  ModelWeights fallback;
  fallback.layers.resize(1);
  fallback.layers[0].wk = shared_wk;
  l0.wk.data = replacement.view();

  EXPECT_EQ(release_unreferenced_storage(m, {&fallback}), moved.data.nbytes());
  EXPECT_EQ(m.owned.size(), buffers - 1);
  const auto owns = [&](const void* p) {
    return std::any_of(m.owned.begin(), m.owned.end(), [&](const HostTensor& h) { return h.view().data == p; });
  };
  EXPECT_FALSE(owns(moved.data.data));
  EXPECT_TRUE(owns(shared_wk.data.data));
  EXPECT_TRUE(owns(m.weights.embed_tokens.data.data));
  // Without the second set, layer 0's wk goes too.
  EXPECT_EQ(release_unreferenced_storage(m), shared_wk.data.nbytes());
  EXPECT_EQ(m.owned.size(), buffers - 2);
}

}  // namespace
}  // namespace pagoda
