"""Structured outputs through `pagoda serve`: response_format (json_object, json_schema), vLLM's guided_json,
guided_regex and guided_choice, and structured_outputs. Two servers: the bundled stories model
(SentencePiece, 512 tokens) and a random-weight Llama-3-shaped model (byte-level BPE, 128,256 tokens), so
outputs are near-random draws from what the constraint allows. Every output that ends by itself ("stop")
parses and validates against its schema with the `jsonschema` package (an independent validator), matches
its regex with Python's `re`, or is one of its choices; outputs cut by max_tokens are checked as prefixes."""
import json
import re
import unittest

import jsonschema

import pagoda_cli
from test_server import Server

SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                      "age": {"type": "integer", "minimum": 0, "maximum": 130},
                                      "email": {"type": "string", "pattern": "^[a-z]{1,8}@[a-z]{1,8}\\.(com|org)$"}},
     "required": ["name", "age"]},
    {"type": "array", "items": {"enum": ["red", "green", "blue", 7, None]}, "minItems": 1, "maxItems": 4},
    {"type": "object", "properties": {"ok": {"type": "boolean"},
                                      "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 3},
                                      "score": {"type": "number", "minimum": 0},
                                      "p": {"type": "number", "exclusiveMinimum": -0.5, "maximum": 1.25}},
     "required": ["ok", "tags"]},
    {"anyOf": [{"type": "integer", "minimum": -50, "maximum": 50}, {"type": "string", "minLength": 1, "maxLength": 5},
               {"type": "null"}]},
    {"$defs": {"leaf": {"type": "object", "properties": {"v": {"type": "integer", "minimum": 1, "maximum": 9}},
                        "required": ["v"]}},
     "type": "object", "properties": {"left": {"$ref": "#/$defs/leaf"}, "right": {"$ref": "#/$defs/leaf"}},
     "required": ["left", "right"]},
    {"type": "array", "prefixItems": [{"type": "string", "maxLength": 3}, {"type": "boolean"}], "items": False},
    {"type": "object", "properties": {"id": {"type": "string", "pattern": "^[A-F0-9]{4}$"},
                                      "kind": {"const": "point"}, "xy": {"type": "array", "items": {"type": "integer", "minimum": -9, "maximum": 9},
                                                                         "minItems": 2, "maxItems": 2}},
     "required": ["id", "kind", "xy"]},
]


class StructuredOutputs:
    """The checks, run against each server (the subclasses below)."""

    MAX_TOKENS = 400

    def post(self, path, body):
        return self.server.post(path, body)

    def choices(self, body, chat=False):
        path = "/v1/chat/completions" if chat else "/v1/completions"
        base = {"messages": [{"role": "user", "content": "Give me JSON."}]} if chat else {"prompt": "Once upon a time"}
        status, out = self.post(path, {**base, "max_tokens": self.MAX_TOKENS, "temperature": 1.0, **body})
        self.assertEqual(status, 200, out)
        return [(c["message"]["content"] if chat else c["text"], c["finish_reason"]) for c in out["choices"]]

    def check_json(self, texts, schema):
        finished = 0
        for text, reason in texts:
            if reason != "stop":
                self.assertEqual(reason, "length")
                continue
            finished += 1
            try:
                value = json.loads(text)
            except json.JSONDecodeError as e:
                self.fail(f"not JSON ({e}): {text!r}")
            if schema is not None:
                jsonschema.validate(value, schema)
            else:
                self.assertIsInstance(value, dict, text)
        return finished

    def test_json_schemas_through_response_format_and_guided_json(self):
        finished = total = 0
        for i, schema in enumerate(SCHEMAS):
            with self.subTest(schema=i):
                texts = self.choices({"n": 3, "seed": i, "response_format": {
                    "type": "json_schema", "json_schema": {"name": f"s{i}", "schema": schema, "strict": True}}})
                texts += self.choices({"n": 3, "seed": 100 + i, "guided_json": schema}, chat=True)
                finished += self.check_json(texts, schema)
                total += len(texts)
        self.assertGreaterEqual(finished, total // 2, "most outputs should end by themselves: too few were checked")

    def test_json_mode(self):
        texts = self.choices({"n": 4, "seed": 5, "response_format": {"type": "json_object"}}, chat=True)
        texts += self.choices({"n": 4, "seed": 6, "structured_outputs": {"json_object": True}})
        # The bundled model rarely closes a free string within max_tokens: every output is checked to open an
        # object, and the finished ones to parse as one.
        for text, _ in texts:
            self.assertTrue(text.lstrip(" \n\t").startswith("{"), text)
        self.check_json(texts, None)

    def test_regex_and_choice(self):
        pattern = "(yes|no), [0-9]{1,3} (cats|dogs)"
        for text, reason in self.choices({"n": 4, "seed": 3, "guided_regex": pattern}):
            self.assertEqual(reason, "stop", text)  # bounded: always ends
            self.assertRegex(text, "^" + pattern + "$")
        choices = ["positive", "negative", "neutral ☺"]
        for text, reason in self.choices({"n": 4, "seed": 4, "guided_choice": choices}, chat=True):
            self.assertEqual(reason, "stop")
            self.assertIn(text, choices)
        for text, _ in self.choices({"n": 2, "seed": 5, "structured_outputs": {"choice": ["A", "B"]}}):
            self.assertIn(text, ["A", "B"])

    def test_streamed_output_is_the_same_constrained_text(self):
        body = {"prompt": "Once", "max_tokens": self.MAX_TOKENS, "seed": 9, "temperature": 1.0,
                "guided_json": SCHEMAS[4]}
        status, out = self.post("/v1/completions", body)
        self.assertEqual(status, 200, out)
        events = self.server.sse("/v1/completions", {**body, "stream": True})
        text = "".join(e["choices"][0]["text"] for e in events if isinstance(e, dict) and e.get("choices"))
        self.assertEqual(text, out["choices"][0]["text"])

    def test_constraints_that_cannot_be_enforced_are_refused(self):
        cases = [
            ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {
                "type": "array", "uniqueItems": True}}}}, "response_format", "uniqueItems"),
            ({"guided_json": {"type": "string", "not": {"const": "a"}}}, "guided_json", "'not'"),
            # No finite value satisfies these (they were accepted and produced whitespace until max_tokens).
            ({"guided_json": {"$ref": "#"}}, "guided_json", "no finite JSON value"),
            ({"guided_json": {"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]}}, "guided_json",
             "no finite JSON value"),
            ({"guided_json": {"type": "object", "properties": {"a": {}}, "required": ["b"], "additionalProperties": False}},
             "guided_json", "'additionalProperties' is false"),
            ({"guided_regex": "(a)\\1"}, "guided_regex", "backreferences"),
            ({"guided_grammar": "root ::= \"a\""}, "guided_grammar", "not supported"),
            ({"guided_choice": []}, "guided_choice", "non-empty"),
            ({"guided_json": {"type": "object"}, "guided_regex": "a"}, "guided_regex", "both"),
            ({"response_format": {"type": "yaml"}}, "response_format.type", "json_schema"),
            ({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}},
             "response_format.json_schema.schema", "schema"),
        ]
        for body, param, words in cases:
            with self.subTest(body=body):
                status, out = self.post("/v1/completions", {"prompt": "a", "max_tokens": 4, **body})
                self.assertEqual(status, 400, out)
                self.assertEqual(out["error"]["param"], param, out)
                self.assertIn(words, out["error"]["message"])

    def test_a_constraint_given_up_midway_is_an_error_not_a_stop(self):
        """A grammar too ambiguous to follow (over 4,096 parses alive at once) is found only once the output reaches
        its ambiguous part: the request then ends as an error, never as a "stop" of truncated, invalid JSON."""
        inner = {"anyOf": [{"type": "object", "properties": {f"k{i}": {"type": "integer"}}, "required": [f"k{i}"]}
                           for i in range(1500)]}
        schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 5}, "v": inner},
                  "required": ["name", "v"], "additionalProperties": False}
        body = {"prompt": "Once upon a time", "guided_json": schema, "max_tokens": 60, "seed": 0}
        status, out = self.post("/v1/completions", body)
        self.assertEqual(status, 400, out)
        self.assertIn("output constraint could not be followed", out["error"]["message"])
        events = self.server.sse("/v1/completions", dict(body, stream=True))
        self.assertTrue(any(isinstance(e, dict) and "error" in e for e in events), events[-3:])
        self.assertFalse(any(isinstance(e, dict) and e.get("choices") and e["choices"][0].get("finish_reason") == "stop"
                             for e in events), events[-3:])

    def test_text_response_format_is_unconstrained(self):
        status, plain = self.post("/v1/completions", {"prompt": "Once", "max_tokens": 12, "temperature": 0})
        status2, text = self.post("/v1/completions", {"prompt": "Once", "max_tokens": 12, "temperature": 0,
                                                      "response_format": {"type": "text"}})
        self.assertEqual((status, status2), (200, 200))
        self.assertEqual(plain["choices"][0]["text"], text["choices"][0]["text"])


class StoriesModel(StructuredOutputs, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server()

    @classmethod
    def tearDownClass(cls):
        assert cls.server.stop() == 0


class RandomLlama3Model(StructuredOutputs, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server("-m", f"{pagoda_cli.ARGS.data}/models/tiny-llama3-hf")

    @classmethod
    def tearDownClass(cls):
        assert cls.server.stop() == 0

    def test_a_schema_nested_past_the_limit_inside_tool_choice_required_is_a_400(self):
        """tool_choice "required" wraps the tools' parameters one level deeper than the body held them: a body at
        the depth limit (128) made a 129-level schema, a 500."""
        messages = [{"role": "user", "content": "hi"}]
        # Bodies 127 and 128 levels deep (both within the body's limit of 128): the wrapped schemas are 128 and 129 deep.
        for levels, inner, want in ((61, {"type": "integer"}, 200),
                                    (61, {"type": "array", "items": {"type": "integer"}}, 400)):
            params = inner
            for _ in range(levels):
                params = {"type": "object", "properties": {"a": params}}
            status, out = self.server.post("/v1/chat/completions", {
                "messages": messages, "max_tokens": 2, "tool_choice": "required",
                "tools": [{"type": "function", "function": {"name": "f", "parameters": params}}]})
            self.assertEqual(status, want, out)
            if status == 400:
                self.assertIn("nested at most", out["error"]["message"])


if __name__ == "__main__":
    pagoda_cli.main()
