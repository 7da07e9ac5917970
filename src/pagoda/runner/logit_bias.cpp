// parse_logit_bias (logit_bias.h).
#include "pagoda/runner/logit_bias.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "pagoda/core/error.h"

namespace pagoda {

namespace {

template <typename Json>
std::vector<std::pair<TokenId, float>> parse(const Json& v) {
  if (!v.is_object()) throw InvalidRequest("logit_bias must be an object mapping token ids to biases in [-100, 100]");
  std::vector<std::pair<TokenId, float>> bias;
  for (const auto& [key, value] : v.items()) {
    size_t used = 0;
    int64_t id = -1;
    try {
      id = std::stoll(key, &used);
    } catch (const std::exception&) {
    }
    if (used != key.size() || id < 0 || id > std::numeric_limits<int32_t>::max())
      throw InvalidRequest(fmt::format("logit_bias keys must be token ids (got '{}')", key));
    const double b = value.is_number() ? value.template get<double>() : std::numeric_limits<double>::quiet_NaN();
    if (!(b >= -100 && b <= 100))
      throw InvalidRequest(fmt::format("logit_bias for token {} must be a number in [-100, 100]", id));
    bias.emplace_back(static_cast<TokenId>(id), static_cast<float>(b));
  }
  std::sort(bias.begin(), bias.end());
  for (size_t i = 1; i < bias.size(); ++i)
    if (bias[i].first == bias[i - 1].first)
      throw InvalidRequest(fmt::format("logit_bias gives token {} twice", bias[i].first));
  return bias;
}

}  // namespace

std::vector<std::pair<TokenId, float>> parse_logit_bias(const nlohmann::json& v) { return parse(v); }
std::vector<std::pair<TokenId, float>> parse_logit_bias(const nlohmann::ordered_json& v) { return parse(v); }

}  // namespace pagoda
