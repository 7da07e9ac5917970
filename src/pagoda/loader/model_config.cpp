// Derived quantities of ModelConfig.
#include "pagoda/loader/model_config.h"

namespace pagoda {

int64_t ModelConfig::num_parameters() const {
  const int64_t h = hidden_size;
  const int64_t q = static_cast<int64_t>(num_heads) * head_dim;
  const int64_t kv = static_cast<int64_t>(num_kv_heads) * head_dim;
  const int64_t per_layer = 2 * h + h * q + 2 * h * kv + q * h + 3 * h * intermediate_size;
  int64_t n = static_cast<int64_t>(vocab_size) * h + num_layers * per_layer + h;
  if (!tie_word_embeddings) n += static_cast<int64_t>(vocab_size) * h;
  return n;
}

}  // namespace pagoda
