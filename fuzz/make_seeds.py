#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora into fuzz/corpus/<target>/ (committed; rerun after changing this
file). Small valid inputs of each format, so that mutations start from inputs that reach deep into the
parsers. Standard library only; deterministic.

  python3 fuzz/make_seeds.py
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "tests", "data")


def out(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


# --- safetensors: an 8-byte header length, the JSON header, the tensor bytes.
def safetensors(tensors, metadata=None):
    header, blob = {}, b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + len(raw)]}
        blob += raw
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + blob


out("fuzz_safetensors", "two_tensors", safetensors([
    ("a.weight", "F32", [2, 3], struct.pack("<6f", *range(6))),
    ("b.weight", "BF16", [4], b"\x80\x3f" * 4)], {"format": "pt"}))
out("fuzz_safetensors", "alias_metadata", safetensors([
    ("lm_head.weight", "F16", [2, 2], b"\x00\x3c" * 4)], {"model.embed_tokens.weight": "lm_head.weight"}))
out("fuzz_safetensors", "empty", safetensors([]))


# --- GGUF v3: a one-layer Llama with hidden 8 and an 8-token SentencePiece vocabulary, F32 weights.
GGUF_U32, GGUF_I32, GGUF_F32, GGUF_STR, GGUF_ARR = 4, 5, 6, 8, 9


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_kv(key, vtype, value):
    body = gguf_string(key) + struct.pack("<I", vtype)
    if vtype == GGUF_STR:
        return body + gguf_string(value)
    if vtype == GGUF_ARR:
        etype, items = value
        body += struct.pack("<IQ", etype, len(items))
        for v in items:
            body += gguf_string(v) if etype == GGUF_STR else struct.pack({GGUF_F32: "<f", GGUF_I32: "<i"}[etype], v)
        return body
    return body + struct.pack({GGUF_U32: "<I", GGUF_F32: "<f"}[vtype], value)


def tiny_llama_gguf():
    hidden, ffn, heads, kv_heads, vocab = 8, 16, 2, 1, 8
    head_dim = hidden // heads
    tokens = ["<unk>", "<s>", "</s>", "\u2581", "a", "b", "\u2581a", "<0x0A>"]
    kvs = [
        gguf_kv("general.architecture", GGUF_STR, "llama"),
        gguf_kv("general.alignment", GGUF_U32, 32),
        gguf_kv("llama.context_length", GGUF_U32, 64),
        gguf_kv("llama.embedding_length", GGUF_U32, hidden),
        gguf_kv("llama.block_count", GGUF_U32, 1),
        gguf_kv("llama.feed_forward_length", GGUF_U32, ffn),
        gguf_kv("llama.attention.head_count", GGUF_U32, heads),
        gguf_kv("llama.attention.head_count_kv", GGUF_U32, kv_heads),
        gguf_kv("llama.attention.layer_norm_rms_epsilon", GGUF_F32, 1e-5),
        gguf_kv("llama.rope.freq_base", GGUF_F32, 10000.0),
        gguf_kv("tokenizer.ggml.model", GGUF_STR, "llama"),
        gguf_kv("tokenizer.ggml.tokens", GGUF_ARR, (GGUF_STR, tokens)),
        gguf_kv("tokenizer.ggml.scores", GGUF_ARR, (GGUF_F32, [0.0, 0.0, 0.0, -1.0, -2.0, -2.0, -1.5, 0.0])),
        gguf_kv("tokenizer.ggml.token_type", GGUF_ARR, (GGUF_I32, [2, 3, 3, 1, 1, 1, 1, 6])),
        gguf_kv("tokenizer.ggml.bos_token_id", GGUF_U32, 1),
        gguf_kv("tokenizer.ggml.eos_token_id", GGUF_U32, 2),
    ]
    shapes = [("token_embd.weight", [hidden, vocab]), ("output_norm.weight", [hidden]),
              ("blk.0.attn_norm.weight", [hidden]), ("blk.0.attn_q.weight", [hidden, heads * head_dim]),
              ("blk.0.attn_k.weight", [hidden, kv_heads * head_dim]), ("blk.0.attn_v.weight", [hidden, kv_heads * head_dim]),
              ("blk.0.attn_output.weight", [heads * head_dim, hidden]), ("blk.0.ffn_norm.weight", [hidden]),
              ("blk.0.ffn_gate.weight", [hidden, ffn]), ("blk.0.ffn_up.weight", [hidden, ffn]),
              ("blk.0.ffn_down.weight", [ffn, hidden])]
    infos, blob = b"", b""
    for name, dims in shapes:  # GGUF dims: ne0 (contiguous) first
        n = 1
        for d in dims:
            n *= d
        infos += gguf_string(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        infos += struct.pack("<IQ", 0, len(blob))  # F32, offset
        blob += struct.pack(f"<{n}f", *[((i * 37) % 17 - 8) / 16.0 for i in range(n)])
        blob += b"\0" * (-len(blob) % 32)
    head = b"GGUF" + struct.pack("<IQQ", 3, len(shapes), len(kvs)) + b"".join(kvs) + infos
    return head + b"\0" * (-len(head) % 32) + blob


out("fuzz_gguf", "tiny_llama", tiny_llama_gguf())


# --- tokenizer.json: a byte-level BPE and a SentencePiece-style BPE with byte fallback.
def byte_level_bpe():
    vocab = {"H": 0, "e": 1, "l": 2, "o": 3, "\u0120": 4, "w": 5, "r": 6, "d": 7, "He": 8, "ll": 9, "llo": 10,
             "\u0120w": 11, "!": 12, "<|end|>": 13}
    return json.dumps({
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": 13, "content": "<|end|>", "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True}],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "\\s?\\p{L}+|\\s?\\p{N}|\\s?[^\\s\\p{L}\\p{N}]+|\\s+"},
             "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": ["H e", "l l", "ll o", "\u0120 w"]}}, indent=1)


def sentencepiece_bpe():
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, "<0x0A>": 3, "<0xC3>": 4, "<0xA9>": 5, "\u2581": 6, "a": 7, "b": 8,
             "\u2581a": 9, "ab": 10}
    return json.dumps({
        "version": "1.0",
        "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i, t in enumerate(["<unk>", "<s>", "</s>"])],
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                                           {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                                                     {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"},
            {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "byte_fallback": True, "fuse_unk": True,
                  "ignore_merges": False, "vocab": vocab, "merges": ["\u2581 a", "a b"]}}, indent=1)


out("fuzz_tokenizer_json", "byte_level_bpe.json", byte_level_bpe())
out("fuzz_tokenizer_json", "sentencepiece_bpe.json", sentencepiece_bpe())


# --- chat templates: the two real ones in tests/data, and a small one using most of the syntax.
for model in ("tiny-llama3-hf", "tiny-mistral-spm-hf"):
    cfg = json.load(open(os.path.join(DATA, "models", model, "tokenizer_config.json")))
    if isinstance(cfg.get("chat_template"), str):
        out("fuzz_chat_template", model + ".jinja", cfg["chat_template"])
out("fuzz_chat_template", "syntax.jinja", """{%- set sep = ' | ' -%}
{% macro show(m) %}{{ m.role | upper }}: {{ m.content if m.content is string else m.content | map(attribute='type') | join(',') }}{% endmacro %}
{{ bos_token }}{% for m in messages if m.role != 'tool' %}{{ loop.index0 }}{{ sep }}{{ show(m) }}
{% if m.tool_calls is defined %}{{ m.tool_calls | tojson }}{% endif %}{% endfor %}
{%- if tools %}{% for t in tools %}{{ t.function.name ~ '(' ~ (t.function.parameters | tojson) ~ ')' }}{% endfor %}{% endif %}
{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% elif messages | length > 3 %}{{ raise_exception('no') }}{% endif %}
{{ (messages[-1].content ~ '')[1:4] }}{{ [1, 2, 3] | sum }}{{ {'a': 1}.items() | list | length }}{{ eos_token }}""")


# --- HTTP requests as clients send them.
out("fuzz_http_request", "post_json", "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    "Content-Length: 27\r\nAuthorization: Bearer k\r\n\r\n{\"prompt\":\"Hi\",\"n\":2}      ")
out("fuzz_http_request", "get", "GET /v1/models?x=1 HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n")
out("fuzz_http_request", "chunked", "POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    "7\r\n{\"promp\r\n9\r\nt\":\"Hi\"}\r\n0\r\n\r\n")
# Several requests on one connection (the target reads them while each keeps it alive), and the framing the
# server refuses (two Host headers, a coding other than chunked alone, two Authorization headers).
out("fuzz_http_request", "pipelined", "GET /health HTTP/1.1\r\nHost: x\r\n\r\nPOST /tokenize HTTP/1.1\r\nHost: x\r\n"
    "Content-Length: 2\r\n\r\n{}GET /metrics HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n"
    "Connection: close\r\n\r\n")
out("fuzz_http_request", "framing", "GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\nPOST / HTTP/1.1\r\nHost: x\r\n"
    "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\nAuthorization: a\r\n"
    "Authorization: b\r\n\r\n")

# --- OpenAI bodies; the first byte picks completions (0), chat (1) or the bare object parse (2).
completion = {"model": "m", "prompt": ["Once", "upon"], "max_tokens": 16, "temperature": 0.7, "top_p": 0.9,
              "top_k": 40, "min_p": 0.05, "n": 2, "stream": True, "stream_options": {"include_usage": True},
              "stop": ["\n", "end"], "stop_token_ids": [2], "logprobs": 3, "echo": True, "seed": 7,
              "presence_penalty": 0.5, "frequency_penalty": 0.1, "repetition_penalty": 1.1,
              "logit_bias": {"5": -100, "7": 2.5}, "ignore_eos": False, "priority": 1, "user": "u",
              "cache_salt": "s", "skip_special_tokens": True}
chat = {"messages": [{"role": "system", "content": "Be brief."},
                     {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
                     {"role": "assistant", "content": "Hel"}],
        "max_completion_tokens": 8, "logprobs": True, "top_logprobs": 2, "continue_final_message": True,
        "add_generation_prompt": False, "chat_template_kwargs": {"enable_thinking": False}}
out("fuzz_openai_request", "completion", b"\x00" + json.dumps(completion).encode())
out("fuzz_openai_request", "token_prompts", b"\x00" + json.dumps({"prompt": [[1, 2, 3], [4]], "max_tokens": 2}).encode())
out("fuzz_openai_request", "chat", b"\x01" + json.dumps(chat).encode())
out("fuzz_openai_request", "object", b"\x02" + json.dumps({"prompt": "x", "return_token_strs": True}).encode())

# --- output constraints: the first byte picks a JSON schema (even) or a regular expression (odd); the
# second seeds the walk.
schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8, "pattern": "^[a-z]+$"},
                                           "n": {"type": "integer", "minimum": -5, "maximum": 300},
                                           "tags": {"type": "array", "items": {"enum": ["a", 1, None]}, "maxItems": 3},
                                           "next": {"$ref": "#"}},
          "required": ["name"]}
out("fuzz_structured", "schema", b"\x00\x07" + json.dumps(schema).encode())
out("fuzz_structured", "any_of", b"\x00\x03" + json.dumps({"anyOf": [{"type": "number", "minimum": 0},
                                                                     {"prefixItems": [{"const": "x"}], "items": False}]}).encode())
out("fuzz_structured", "regex", b"\x01\x05" + "(?:[A-Z][a-zé]{1,3}|\\d+)(,\\s?\\w*)*$".encode())
out("fuzz_structured", "choice_like", b"\x01\x09" + "yes|no|maybe ☺".encode())

tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
          "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
out("fuzz_openai_request", "chat_tools", b"\x01" + json.dumps(
    {"messages": [{"role": "user", "content": "Weather?"},
                  {"role": "assistant", "content": None, "tool_calls": [
                      {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
                  {"role": "tool", "tool_call_id": "c1", "content": "21 C"}],
     "tools": tools, "tool_choice": "required"}).encode())

# --- Model output for the tool-call formats; the first byte picks llama3_json (0), hermes (1), mistral (2),
# the "required" array (3) or a named function (4), the second seeds the stream's cuts.
out("fuzz_tool_calls", "llama3_json", b"\x00\x07" + b'<|python_tag|>{"name": "f", "parameters": {"a": [1, "}"]}}; {"name": "g", "arguments": {}}')
out("fuzz_tool_calls", "hermes", b"\x01\x03" + b'Sure.\n<tool_call>\n{"name": "f", "arguments": {"x": "\\u00e9"}}\n</tool_call>\n<tool_call>{"name": "g"')
out("fuzz_tool_calls", "mistral", b"\x02\x05" + b'ok [TOOL_CALLS] [{"name": "f", "arguments": {"n": -1.5e3}}, {"name": "g", "arguments": {}}]')
out("fuzz_tool_calls", "required", b"\x03\x01" + b'[{"name": "f", "parameters": {"q": null}}]')
out("fuzz_tool_calls", "named", b"\x04\x02" + b'{"city": "Paris"}')
