// jinja parser: turns the lexer's tokens into a statement tree, following jinja2's grammar and operator
// precedence (filters bind tighter than arithmetic: `'a' + x | trim` trims only x).
#pragma once

#include <string>

#include "pagoda/tokenizer/jinja_ast.h"

namespace pagoda::jinja {

// Throws pagoda::Error "<source>:<line>: <problem>" on a syntax error.
Body parse_template(const std::string& template_text, const std::string& source);

}  // namespace pagoda::jinja
