"""Writes a llama GGUF file from an F32 HF safetensors checkpoint the way llama.cpp's convert_hf_to_gguf.py lays
one out, in pure Python (no numpy, no gguf-py), for the tests of `pagoda quantize` on GGUF input:

- GGUF v3, little-endian, tensor data aligned to 32 bytes; llama.* metadata and the tokenizer's special ids
  (no vocabulary: the tests give token ids or pass --tokenizer);
- GGUF tensor names (token_embd, blk.N.attn_q, ..., output_norm, output);
- q_proj / k_proj rows permuted for llama.cpp's interleaved RoPE: within each head of head_dim rows, HF row
  j * head_dim/2 + i goes to GGUF row 2 * i + j (convert_hf_to_gguf.py's `permute`);
- 2-d weights in F32 or F16 (rounded to nearest even by struct's "e"), 1-d norms always F32, as the converter's
  --outtype f16 does;
- no output.weight when the checkpoint ties its embeddings (the embedding is read from lm_head.weight when
  that is how the checkpoint stores it).

Checked against a file made by convert_hf_to_gguf.py itself: for tinystories-656k every tensor's bytes are
the same (see docs/QUANTIZATION.md)."""
import json
import os
import struct

GGML_F32, GGML_F16 = 0, 1
_UINT32, _FLOAT32, _STRING = 4, 6, 8


def read_safetensors(path):
    """{name: (dtype, shape, bytes)} of one .safetensors file."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in header.items()}


def _floats(entry):
    dtype, shape, raw = entry
    if dtype != "F32":
        raise ValueError(f"only F32 checkpoints are converted here, got {dtype}")
    return list(struct.unpack(f"<{len(raw) // 4}f", raw)), shape


def _permute_rows(values, rows, cols, head_dim):
    out = [0.0] * len(values)
    half = head_dim // 2
    for r in range(rows):
        head, within = divmod(r, head_dim)
        j, i = divmod(within, half)
        g = head * head_dim + 2 * i + j
        out[g * cols:(g + 1) * cols] = values[r * cols:(r + 1) * cols]
    return out


def _string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def _kv(key, vtype, value):
    body = {_UINT32: lambda v: struct.pack("<I", v), _FLOAT32: lambda v: struct.pack("<f", v),
            _STRING: _string}[vtype](value)
    return _string(key) + struct.pack("<I", vtype) + body


def write_gguf_from_hf(hf_dir, out_path, outtype="f32"):
    with open(os.path.join(hf_dir, "config.json")) as f:
        c = json.load(f)
    st = read_safetensors(os.path.join(hf_dir, "model.safetensors"))
    heads, kv_heads = c["num_attention_heads"], c.get("num_key_value_heads", c["num_attention_heads"])
    head_dim = c.get("head_dim", c["hidden_size"] // heads)
    tied = c.get("tie_word_embeddings", False)
    eos = c["eos_token_id"][0] if isinstance(c["eos_token_id"], list) else c["eos_token_id"]
    kvs = [_kv("general.architecture", _STRING, "llama"),
           _kv("general.name", _STRING, os.path.basename(os.path.normpath(hf_dir))),
           _kv("llama.context_length", _UINT32, c["max_position_embeddings"]),
           _kv("llama.embedding_length", _UINT32, c["hidden_size"]),
           _kv("llama.feed_forward_length", _UINT32, c["intermediate_size"]),
           _kv("llama.block_count", _UINT32, c["num_hidden_layers"]),
           _kv("llama.attention.head_count", _UINT32, heads),
           _kv("llama.attention.head_count_kv", _UINT32, kv_heads),
           _kv("llama.rope.freq_base", _FLOAT32, c.get("rope_theta", 10000.0)),
           _kv("llama.attention.layer_norm_rms_epsilon", _FLOAT32, c["rms_norm_eps"]),
           _kv("llama.vocab_size", _UINT32, c["vocab_size"]),
           _kv("llama.rope.dimension_count", _UINT32, head_dim),
           _kv("general.file_type", _UINT32, 0 if outtype == "f32" else 1),
           _kv("tokenizer.ggml.bos_token_id", _UINT32, c["bos_token_id"]),
           _kv("tokenizer.ggml.eos_token_id", _UINT32, eos)]

    names = [("token_embd.weight", "model.embed_tokens.weight")]
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        names += [(f"blk.{i}.attn_norm.weight", p + "input_layernorm.weight"),
                  (f"blk.{i}.attn_q.weight", p + "self_attn.q_proj.weight"),
                  (f"blk.{i}.attn_k.weight", p + "self_attn.k_proj.weight"),
                  (f"blk.{i}.attn_v.weight", p + "self_attn.v_proj.weight"),
                  (f"blk.{i}.attn_output.weight", p + "self_attn.o_proj.weight"),
                  (f"blk.{i}.ffn_norm.weight", p + "post_attention_layernorm.weight"),
                  (f"blk.{i}.ffn_gate.weight", p + "mlp.gate_proj.weight"),
                  (f"blk.{i}.ffn_up.weight", p + "mlp.up_proj.weight"),
                  (f"blk.{i}.ffn_down.weight", p + "mlp.down_proj.weight")]
    names.append(("output_norm.weight", "model.norm.weight"))
    if not tied:
        names.append(("output.weight", "lm_head.weight"))

    tensors = []  # (gguf name, ggml type, row-major shape, bytes)
    for gguf_name, hf_name in names:
        entry = st.get(hf_name)
        if entry is None and hf_name == "model.embed_tokens.weight" and tied:
            entry = st["lm_head.weight"]  # tied embeddings stored once
        values, shape = _floats(entry)
        if gguf_name.endswith(("attn_q.weight", "attn_k.weight")):
            values = _permute_rows(values, shape[0], shape[1], head_dim)
        if len(shape) == 2 and outtype == "f16":
            tensors.append((gguf_name, GGML_F16, shape, struct.pack(f"<{len(values)}e", *values)))
        else:
            tensors.append((gguf_name, GGML_F32, shape, struct.pack(f"<{len(values)}f", *values)))

    align = 32
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)))
    for kv in kvs:
        out += kv
    offset = 0
    for name, ggml_type, shape, raw in tensors:
        out += _string(name) + struct.pack("<I", len(shape))
        for d in reversed(shape):  # GGML's ne[] runs innermost first
            out += struct.pack("<Q", d)
        out += struct.pack("<IQ", ggml_type, offset)
        offset += (len(raw) + align - 1) // align * align
    out += b"\0" * (-len(out) % align)
    for _, _, _, raw in tensors:
        out += raw + b"\0" * (-len(raw) % align)
    with open(out_path, "wb") as f:
        f.write(out)
