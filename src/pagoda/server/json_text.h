// JSON text from clients into nlohmann::ordered_json (objects keep the order their keys were sent in, which chat
// templates and JSON schemas depend on) in linear time, with its nesting bounded before anything recurses.
// ordered_json's own parser inserts each key with a linear search for a duplicate: an object of n keys took
// O(n^2) (160,000 keys: 25 s on a request thread).
#pragma once

#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string_view>

namespace pagoda::server {

// The deepest nesting of arrays and objects in `text` (brackets inside strings do not count), scanning only until
// it exceeds `limit`: linear, and no recursion.
int json_nesting_depth(std::string_view text, int limit);

// What parse_ordered_json throws for text nested deeper than its bound (checked before anything parses or recurses).
class JsonTooDeep : public std::runtime_error {
 public:
  explicit JsonTooDeep(int max_depth);
  int max_depth;
};

// Parses `text` in time linear in its size; a key given twice keeps its last value (as nlohmann, Python and
// pydantic do). Throws JsonTooDeep when arrays and objects nest deeper than `max_depth`, and
// nlohmann::json::parse_error or out_of_range (a number beyond double's range) as nlohmann::json::parse does.
nlohmann::ordered_json parse_ordered_json(std::string_view text, int max_depth);

}  // namespace pagoda::server
