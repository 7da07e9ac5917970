// Small vocabulary types shared by every module.
#pragma once

#include <cstdint>

namespace pagoda {
using TokenId = int32_t;
}  // namespace pagoda
