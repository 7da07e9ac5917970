// BlockId: a KV block's index in the pool, as stored in block tables (and so in kernels' page arrays).
#pragma once

#include <cstdint>

namespace pagoda {
using BlockId = int32_t;
}  // namespace pagoda
