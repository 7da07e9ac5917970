#!/usr/bin/env python3
"""Writes a GGUF file with a Llama model's shape, random weights and a real vocabulary, for speed runs
of Pagoda and llama.cpp on the same file (never for correctness).

The vocabulary (tokenizer.ggml.* keys) is copied from an existing GGUF, e.g. llama.cpp's vocab-only
ggml-vocab-llama-spm.gguf (the Llama-2 tokenizer, which TinyLlama uses). Weight bytes are pseudo-random
blocks repeated across each tensor: speed depends on sizes, not values. Standard library only.

  bench/make_dummy_gguf.py --vocab tests/data/tokenizers/ggml-vocab-llama-spm.gguf \
      --shape tinyllama-1.1b --type f16 --out /tmp/tinyllama-f16.gguf
"""
import argparse
import random
import struct

SHAPES = {
    # name: (layers, hidden, ffn, heads, kv_heads, context)
    "tinyllama-1.1b": (22, 2048, 5632, 32, 4, 2048),
}
GGML_F32, GGML_F16, GGML_Q8_0 = 0, 1, 8
GGUF_UINT32, GGUF_FLOAT32, GGUF_STRING, GGUF_ARRAY, GGUF_UINT64 = 4, 6, 8, 9, 10
SCALAR_FORMATS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        vals = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return vals[0]

    def string(self):
        n = self.take("Q")
        s = self.data[self.pos:self.pos + n]
        self.pos += n
        return s

    def value_bytes(self, vtype):
        """Returns the raw encoding of one value (to copy it verbatim)."""
        start = self.pos
        if vtype == GGUF_STRING:
            self.string()
        elif vtype == GGUF_ARRAY:
            etype, count = self.take("I"), self.take("Q")
            for _ in range(count):
                self.value_bytes(etype)
        else:
            self.take(SCALAR_FORMATS[vtype])
        return self.data[start:self.pos]


def read_tokenizer_kvs(path):
    with open(path, "rb") as f:
        r = Reader(f.read())
    assert r.take("I") == 0x46554747, "not a GGUF file"
    r.take("I")  # version
    r.take("Q")  # tensor count
    kvs = []
    for _ in range(r.take("Q")):
        key = r.string()
        vtype = r.take("I")
        raw = r.value_bytes(vtype)
        if key.startswith(b"tokenizer."):
            kvs.append((key, vtype, raw))
    return kvs


def gguf_string(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, raw):
    return gguf_string(key) + struct.pack("<I", vtype) + raw


def tensor_bytes(ttype, numel, rng):
    if ttype == GGML_F32:
        block = struct.pack("<1024f", *[1.0 + rng.uniform(-0.05, 0.05) for _ in range(1024)])
        return (block * (numel // 1024 + 1))[:numel * 4]
    if ttype == GGML_F16:
        block = struct.pack("<4096e", *[rng.gauss(0.0, 0.02) for _ in range(4096)])
        return (block * (numel // 4096 + 1))[:numel * 2]
    # Q8_0: blocks of f16 scale + 32 int8
    blocks = []
    for _ in range(128):
        blocks.append(struct.pack("<e", 0.02 / 127) + bytes(rng.randrange(256) for _ in range(32)))
    chunk = b"".join(blocks)
    nblocks = numel // 32
    return (chunk * (nblocks // 128 + 1))[:nblocks * 34]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--vocab", required=True)
    p.add_argument("--shape", choices=SHAPES, default="tinyllama-1.1b")
    p.add_argument("--type", choices=["f16", "q8_0"], default="f16")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    layers, hidden, ffn, heads, kv_heads, context = SHAPES[a.shape]
    head_dim = hidden // heads
    tok_kvs = read_tokenizer_kvs(a.vocab)
    vocab = None
    for key, vtype, raw in tok_kvs:
        if key == b"tokenizer.ggml.tokens":
            vocab = struct.unpack_from("<Q", raw, 4)[0]
    mat_type = GGML_F16 if a.type == "f16" else GGML_Q8_0

    tensors = [("token_embd.weight", (vocab, hidden), mat_type)]
    for i in range(layers):
        b = f"blk.{i}."
        tensors += [
            (b + "attn_norm.weight", (hidden,), GGML_F32),
            (b + "attn_q.weight", (heads * head_dim, hidden), mat_type),
            (b + "attn_k.weight", (kv_heads * head_dim, hidden), mat_type),
            (b + "attn_v.weight", (kv_heads * head_dim, hidden), mat_type),
            (b + "attn_output.weight", (hidden, heads * head_dim), mat_type),
            (b + "ffn_norm.weight", (hidden,), GGML_F32),
            (b + "ffn_gate.weight", (ffn, hidden), mat_type),
            (b + "ffn_up.weight", (ffn, hidden), mat_type),
            (b + "ffn_down.weight", (hidden, ffn), mat_type),
        ]
    tensors += [("output_norm.weight", (hidden,), GGML_F32), ("output.weight", (vocab, hidden), mat_type)]

    u32 = lambda v: struct.pack("<I", v)
    f32 = lambda v: struct.pack("<f", v)
    meta = [
        kv("general.architecture", GGUF_STRING, gguf_string("llama")),
        kv("general.name", GGUF_STRING, gguf_string(f"dummy {a.shape} {a.type}")),
        kv("general.alignment", GGUF_UINT32, u32(32)),
        kv("llama.context_length", GGUF_UINT32, u32(context)),
        kv("llama.embedding_length", GGUF_UINT32, u32(hidden)),
        kv("llama.feed_forward_length", GGUF_UINT32, u32(ffn)),
        kv("llama.block_count", GGUF_UINT32, u32(layers)),
        kv("llama.attention.head_count", GGUF_UINT32, u32(heads)),
        kv("llama.attention.head_count_kv", GGUF_UINT32, u32(kv_heads)),
        kv("llama.rope.dimension_count", GGUF_UINT32, u32(head_dim)),
        kv("llama.rope.freq_base", GGUF_FLOAT32, f32(10000.0)),
        kv("llama.attention.layer_norm_rms_epsilon", GGUF_FLOAT32, f32(1e-5)),
        kv("general.file_type", GGUF_UINT32, u32(1 if a.type == "f16" else 7)),
    ] + [kv(k, t, raw) for k, t, raw in tok_kvs]

    infos, offset = [], 0
    for name, shape, ttype in tensors:
        numel = 1
        for d in shape:
            numel *= d
        nbytes = numel * 4 if ttype == GGML_F32 else numel * 2 if ttype == GGML_F16 else numel // 32 * 34
        dims = list(reversed(shape))  # GGML ne[] order: innermost first
        infos.append(gguf_string(name) + u32(len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
                     + u32(ttype) + struct.pack("<Q", offset))
        offset += (nbytes + 31) // 32 * 32

    rng = random.Random(0)
    with open(a.out, "wb") as f:
        f.write(struct.pack("<IIQQ", 0x46554747, 3, len(tensors), len(meta)))
        f.write(b"".join(meta) + b"".join(infos))
        f.write(b"\0" * ((32 - f.tell() % 32) % 32))
        for name, shape, ttype in tensors:
            numel = 1
            for d in shape:
                numel *= d
            data = tensor_bytes(ttype, numel, rng)
            f.write(data + b"\0" * ((32 - len(data) % 32) % 32))
    print(f"wrote {a.out}: {len(tensors)} tensors, {offset / 2**30:.2f} GiB of weights")


if __name__ == "__main__":
    main()
