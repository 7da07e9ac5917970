// JSON Schema (and "any JSON object") as a grammar. What a schema allows that the grammar can express is
// kept exactly; what it cannot is refused, never ignored, so that every output validates:
// - types string, number, integer, boolean, null, object, array, and lists of types; enum and const;
//   anyOf and oneOf (as anyOf: the branches of real schemas rarely overlap), allOf with one schema;
//   $ref to "#", "#/$defs/..." and "#/definitions/..." (recursive schemas included);
// - objects: properties in the schema's order, each required one present, the others optional;
//   additionalProperties only when there are no properties (a map) — with properties, extra keys are
//   never produced (OpenAI's strict mode and XGrammar do the same);
// - arrays: items, prefixItems, minItems, maxItems; strings: minLength, maxLength, pattern (a regular
//   expression, regex_grammar.h), format left unchecked (an annotation); numbers and integers: minimum,
//   maximum and the exclusive forms (a bounded number is written as a plain decimal, without exponent).
// Annotations (title, description, default, examples, ...) and "x-" extensions are skipped; any other
// keyword is an InvalidRequest naming it. Between tokens there may be nothing, one space, or a line break
// and an indent of up to 24 spaces or tabs: compact and pretty-printed JSON, but never runs of blank space
// a weak model could pad its output with. Exponents of numbers have at most two digits (1e400 overflows
// strict parsers).
#pragma once

#include <nlohmann/json.hpp>

#include "pagoda/structured/grammar.h"

namespace pagoda::structured {

// Properties are laid out in the order the client wrote them (ordered_json keeps it).
Grammar json_schema_grammar(const nlohmann::ordered_json& schema);
// Any JSON object (response_format {"type": "json_object"}).
Grammar json_object_grammar();

}  // namespace pagoda::structured
