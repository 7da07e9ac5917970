// Tenant quotas in blocks, and their validation.
#include "pagoda/sched/tenant_kv.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "pagoda/core/error.h"

namespace pagoda {

int tenant_quota_blocks(double amount, int num_blocks, int block_size) {
  if (!(amount > 0)) return 0;
  const double blocks = amount <= 1.0 ? std::floor(amount * num_blocks) : std::ceil(amount / block_size);
  return static_cast<int>(std::clamp(blocks, 1.0, static_cast<double>(num_blocks)));
}

void validate(const TenantKv& t, const std::string& where) {
  if (!(t.weight > 0) || !std::isfinite(t.weight))
    throw Error(fmt::format("{}: tenant '{}': weight must be a positive number, got {}", where, t.name, t.weight));
  for (const auto& [name, v] : {std::pair{"kv_share", t.kv_share}, std::pair{"kv_cap", t.kv_cap}}) {
    if (!(v >= 0) || !std::isfinite(v))
      throw Error(fmt::format("{}: tenant '{}': {} must be a fraction of the pool (<= 1) or a token count, got {}",
                              where, t.name, name, v));
  }
  if (t.prompt_tokens_per_step < 0)
    throw Error(fmt::format("{}: tenant '{}': prompt_tokens_per_step must be >= 0, got {}", where, t.name,
                            t.prompt_tokens_per_step));
  // Comparable only in the same unit.
  if (t.kv_share > 0 && t.kv_cap > 0 && (t.kv_share <= 1) == (t.kv_cap <= 1) && t.kv_share > t.kv_cap)
    throw Error(fmt::format("{}: tenant '{}': kv_share ({}) is larger than kv_cap ({})", where, t.name, t.kv_share,
                            t.kv_cap));
}

}  // namespace pagoda
