// jinja evaluator: renders a parsed template against a set of global variables, with jinja2's scoping
// (each for-loop iteration and macro call gets its own scope; namespace() objects carry state out).
#pragma once

#include <string>

#include "pagoda/tokenizer/jinja_ast.h"

namespace pagoda::jinja {

// Renders `body`. `globals` are the template's variables; the built-in functions (range, namespace,
// dict, raise_exception, strftime_now) are added unless shadowed. Throws pagoda::InvalidRequest: with the
// template's own message for raise_exception(msg), else "<source>:<line>: <problem>".
std::string render(const Body& body, const ValueDict& globals, const std::string& source);

}  // namespace pagoda::jinja
