// copy_weights_into_memory: same bytes, no pointer left in a file mapping, tied weights still shared.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace pagoda
