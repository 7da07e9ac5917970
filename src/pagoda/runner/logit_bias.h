// OpenAI's logit_bias from JSON ({"token id": bias}) into SamplingParams::logit_bias, for the server and
// the CLI's request files alike.
#pragma once

#include <nlohmann/json.hpp>

#include <utility>
#include <vector>

#include "pagoda/core/types.h"

namespace pagoda {

// Token-id keys (decimal, each id once), biases in [-100, 100]; sorted by id. Throws InvalidRequest with a
// message naming what is wrong. Ids are checked against the vocabulary later, by the engine.
std::vector<std::pair<TokenId, float>> parse_logit_bias(const nlohmann::json& v);
std::vector<std::pair<TokenId, float>> parse_logit_bias(const nlohmann::ordered_json& v);  // a server request's

}  // namespace pagoda
