// jinja globals: the functions every chat template can call — jinja2's range/namespace/dict and the
// raise_exception/strftime_now helpers transformers adds to its chat-template environment.
#pragma once

#include <string>
#include <unordered_map>

#include "pagoda/tokenizer/jinja_value.h"

namespace pagoda::jinja {

void add_builtin_globals(std::unordered_map<std::string, Value>& vars);

}  // namespace pagoda::jinja
