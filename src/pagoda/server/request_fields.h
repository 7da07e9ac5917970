// The fields of a completion or chat request that Pagoda does not read. Nothing is dropped silently:
//   - a field whose feature is missing and whose value would change the output is a 400 naming it
//     (functions / function_call, best_of > n, suffix, beam search); output constraints (response_format,
//     guided_*) are read by output_constraint_fields.h, which refuses the forms Pagoda cannot enforce;
//   - any other field is ignored as vLLM ignores it, with one warning per field name per process.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace pagoda::server {

// Throws ApiError (400) for a refused field. Returns the other fields Pagoda does not read, in request order.
std::vector<std::string> check_request_fields(const nlohmann::ordered_json& request, bool chat);

// check_request_fields, then one warning per ignored field name that no earlier request carried.
void check_and_log_request_fields(const nlohmann::ordered_json& request, bool chat);

}  // namespace pagoda::server
