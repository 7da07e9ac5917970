#!/usr/bin/env python3
"""An independent float64 forward pass of a tiny Llama HF checkpoint (standard library only), compared
with the top-8 logits Hugging Face transformers recorded in tests/data/refs/hf_<model>.json. It backs the
convention behind the references (RoPE inverse frequencies rounded to bf16; docs/ARCHITECTURE.md): run it with and
without --bf16-inv-freq and compare the differences per position.

  python3 tests/tools/hf_reference_forward.py tiny-llama3-hf --positions 10
  python3 tests/tools/hf_reference_forward.py tiny-llama3-hf --positions 10 --bf16-inv-freq
"""
import argparse
import array
import json
import math
import os
import struct

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")


def bf16_round(x):
    u = struct.unpack("<I", struct.pack("<f", x))[0]
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("<f", struct.pack("<I", u))[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", choices=["tiny-llama3-hf", "tiny-mistral-spm-hf"])
    ap.add_argument("--positions", type=int, default=8)
    ap.add_argument("--bf16-inv-freq", action="store_true", help="round inv_freq to bf16, as the references were made")
    a = ap.parse_args()
    d = os.path.join(DATA, "models", a.model)
    cfg = json.load(open(os.path.join(d, "config.json")))
    raw = open(os.path.join(d, "model.safetensors"), "rb").read()
    hlen = struct.unpack_from("<Q", raw, 0)[0]
    header = json.loads(raw[8:8 + hlen])
    cache = {}

    def weight(name):  # bf16 -> float
        if name not in cache:
            lo, hi = header[name]["data_offsets"]
            u16 = array.array("H")
            u16.frombytes(raw[8 + hlen + lo:8 + hlen + hi])
            f = array.array("f")
            f.frombytes(array.array("I", [v << 16 for v in u16]).tobytes())
            cache[name] = list(f)
        return cache[name]

    H, nh, nkv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd, eps, L, I = cfg.get("head_dim") or H // nh, cfg["rms_norm_eps"], cfg["num_hidden_layers"], cfg["intermediate_size"]
    rp = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    theta = rp.get("rope_theta", cfg.get("rope_theta", 10000.0))
    inv = [1.0 / theta ** (2 * i / hd) for i in range(hd // 2)]
    if rp.get("rope_type") == "llama3":
        f, lo, hi, old = rp["factor"], rp["low_freq_factor"], rp["high_freq_factor"], rp["original_max_position_embeddings"]
        scaled = []
        for x in inv:
            wl = 2 * math.pi / x
            if wl > old / lo:
                scaled.append(x / f)
            elif wl < old / hi:
                scaled.append(x)
            else:
                s = (old / wl - lo) / (hi - lo)
                scaled.append((1 - s) * x / f + s * x)
        inv = scaled
    if a.bf16_inv_freq:
        inv = [bf16_round(x) for x in inv]

    def matvec(w, x, rows):
        k = len(x)
        return [sum(w[r * k + i] * x[i] for i in range(k)) for r in range(rows)]

    def rms(x, w):
        s = 1 / math.sqrt(sum(v * v for v in x) / len(x) + eps)
        return [w[i] * x[i] * s for i in range(len(x))]

    def rope(v, pos):
        h, o = hd // 2, v[:]
        for i in range(h):
            c, s = math.cos(pos * inv[i]), math.sin(pos * inv[i])
            o[i], o[i + h] = v[i] * c - v[i + h] * s, v[i + h] * c + v[i] * s
        return o

    ref = json.load(open(os.path.join(DATA, "refs", f"hf_{a.model}.json")))["generations"][0]
    ids = ref["prompt_ids"]
    lm = "model.embed_tokens.weight" if cfg["tie_word_embeddings"] else "lm_head.weight"
    keys, values = [[] for _ in range(L)], [[] for _ in range(L)]
    for pos in range(min(a.positions, len(ids))):
        x = weight("model.embed_tokens.weight")[ids[pos] * H:(ids[pos] + 1) * H]
        for l in range(L):
            p = f"model.layers.{l}."
            n = rms(x, weight(p + "input_layernorm.weight"))
            q = matvec(weight(p + "self_attn.q_proj.weight"), n, nh * hd)
            k = matvec(weight(p + "self_attn.k_proj.weight"), n, nkv * hd)
            v = matvec(weight(p + "self_attn.v_proj.weight"), n, nkv * hd)
            q = sum((rope(q[h * hd:(h + 1) * hd], pos) for h in range(nh)), [])
            keys[l].append(sum((rope(k[h * hd:(h + 1) * hd], pos) for h in range(nkv)), []))
            values[l].append(v)
            att = []
            for h in range(nh):
                g = h // (nh // nkv)
                sc = [sum(q[h * hd + e] * kk[g * hd + e] for e in range(hd)) / math.sqrt(hd) for kk in keys[l]]
                m = max(sc)
                ex = [math.exp(s - m) for s in sc]
                z = sum(ex)
                att += [sum(ex[j] / z * values[l][j][g * hd + e] for j in range(len(ex))) for e in range(hd)]
            x = [u + w for u, w in zip(x, matvec(weight(p + "self_attn.o_proj.weight"), att, H))]
            n = rms(x, weight(p + "post_attention_layernorm.weight"))
            gate = matvec(weight(p + "mlp.gate_proj.weight"), n, I)
            up = matvec(weight(p + "mlp.up_proj.weight"), n, I)
            act = [gg / (1 + math.exp(-gg)) * u for gg, u in zip(gate, up)]
            x = [u + w for u, w in zip(x, matvec(weight(p + "mlp.down_proj.weight"), act, H))]
        n = rms(x, weight("model.norm.weight"))
        w = weight(lm)
        top = ref["top8_ids"][pos]
        diffs = [sum(w[t * H + e] * n[e] for e in range(H)) - ref["top8_logits"][pos][i] for i, t in enumerate(top)]
        print(f"position {pos}: max |float64 - transformers| over the top-8 logits = {max(abs(v) for v in diffs):.5f}")


if __name__ == "__main__":
    main()
