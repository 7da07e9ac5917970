#!/usr/bin/env python3
"""The accuracy table of docs/QUANTIZATION.md, made in one run: every variant of a model is written (by
`pagoda quantize`, or by llama.cpp's own `llama-quantize` for the GGUF rows), then scored by
`pagoda eval perplexity` (and, for GGUF files, by llama.cpp's `llama-perplexity` too, in the same run) on
the same text in llama.cpp's convention (BOS-led 512-token chunks, second halves scored).

  python3 scripts/quant_table.py --pagoda build/cpu/bin/pagoda --text TEXT --out DIR \
      --hf NAME=HF_DIR [--hf ...] [--gguf NAME=F32.gguf ...] [--llama-cpp LLAMA_BIN_DIR] [--chunks 60]

--hf models get fp32, bf16, W8A16, FP8, RTN W4 and AWQ W4 at group sizes 128/64/32 (those that divide every
matmul's K); --gguf F32 files get Q8_0, Q4_0 and Q4_K_M from llama-quantize (needs --llama-cpp, a llama.cpp
build of your own: this project neither ships nor builds one). Bits per weight = 8 x file bytes / parameters.
Writes DIR/quant_table.json and DIR/quant_table.md (Python 3 standard library only)."""
import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time


def safetensors_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return n, json.loads(f.read(n))


def model_bytes(model):
    """Bytes of the weight files (safetensors or GGUF)."""
    if os.path.isdir(model):
        return sum(os.path.getsize(os.path.join(model, f)) for f in os.listdir(model) if f.endswith(".safetensors"))
    return os.path.getsize(model)


def count_params(hf_dir):
    """Parameters of an unquantized checkpoint, each stored tensor once (tied embeddings count once)."""
    total = 0
    for f in sorted(os.listdir(hf_dir)):
        if f.endswith(".safetensors"):
            _, h = safetensors_header(os.path.join(hf_dir, f))
            for name, t in h.items():
                if name != "__metadata__":
                    n = 1
                    for d in t["shape"]:
                        n *= d
                    total += n
    return total


def matmul_ks(hf_dir):
    cfg = json.load(open(os.path.join(hf_dir, "config.json")))
    return [cfg["hidden_size"], cfg["intermediate_size"]]


def to_bf16(src, dst):
    """A copy of an F32 checkpoint with every tensor rounded to bf16 (round to nearest even)."""
    os.makedirs(dst, exist_ok=True)
    for f in os.listdir(src):
        if not f.endswith(".safetensors"):
            shutil.copy(os.path.join(src, f), dst)
    for f in os.listdir(src):
        if not f.endswith(".safetensors"):
            continue
        n, h = safetensors_header(os.path.join(src, f))
        data = open(os.path.join(src, f), "rb").read()[8 + n:]
        out, offset, header = bytearray(), 0, {}
        for name in sorted(k for k in h if k != "__metadata__"):
            t = h[name]
            b, e = t["data_offsets"]
            if t["dtype"] != "F32":
                raise SystemExit(f"{f}: {name} is {t['dtype']}; the bf16 row needs an F32 checkpoint")
            words = struct.unpack(f"<{(e - b) // 4}I", data[b:e])
            halves = []
            for u in words:
                if (u & 0x7FFFFFFF) > 0x7F800000:
                    halves.append((u >> 16) | 0x40)
                else:
                    halves.append(((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF)
            blob = struct.pack(f"<{len(halves)}H", *halves)
            header[name] = {"dtype": "BF16", "shape": t["shape"], "data_offsets": [offset, offset + len(blob)]}
            out += blob
            offset += len(blob)
        if "__metadata__" in h:
            header["__metadata__"] = h["__metadata__"]
        hb = json.dumps(header, separators=(",", ":")).encode()
        hb += b" " * ((8 - len(hb) % 8) % 8)
        with open(os.path.join(dst, f), "wb") as o:
            o.write(struct.pack("<Q", len(hb)) + hb + out)
    cfg_path = os.path.join(dst, "config.json")
    cfg = json.load(open(cfg_path))
    cfg["torch_dtype"] = "bfloat16"
    json.dump(cfg, open(cfg_path, "w"), indent=2)


def run(cmd, log):
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    with open(log, "a") as f:
        f.write(f"$ {' '.join(cmd)}\n{r.stdout}\n{r.stderr}\n[{time.time() - t0:.1f} s, rc {r.returncode}]\n")
    if r.returncode != 0:
        raise SystemExit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-2000:]}")
    return r.stdout, r.stderr


def pagoda_ppl(args, model, log, text=None):
    out, _ = run([args.pagoda, "eval", "perplexity", "--model", model, "--text-file", text or args.text, "--ctx-size", "512",
                  "--chunks", str(args.chunks), "--json"], log)
    j = json.loads(out.strip().splitlines()[-1])
    return j["perplexity"], j.get("perplexity_stderr")


def llama_ppl(args, gguf, log):
    out, err = run([os.path.join(args.llama_cpp, "llama-perplexity"), "-m", gguf, "-f", args.gguf_text or args.text, "-c", "512",
                    "-b", "512", "--chunks", str(args.chunks), "-t", str(os.cpu_count())], log)
    m = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", out + err)
    return float(m.group(1)), float(m.group(2))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pagoda", required=True)
    ap.add_argument("--text", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--hf", action="append", default=[], help="NAME=DIR of an unquantized F32 HF checkpoint")
    ap.add_argument("--gguf", action="append", default=[], help="NAME=FILE of an F32 (or F16) GGUF")
    ap.add_argument("--llama-cpp", help="folder with llama-quantize and llama-perplexity")
    ap.add_argument("--gguf-text", help="the text for the GGUF rows (default --text); llama.cpp aborts on "
                    "characters some vocabularies cannot byte-fall-back to, so pass a cleaned copy then")
    ap.add_argument("--chunks", type=int, default=60)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    log = os.path.join(args.out, "quant_table.log")
    open(log, "w").close()
    rows = []

    def add(model_name, variant, fmt, path, params, extra=None, text=None):
        ppl, se = pagoda_ppl(args, path, log, text)
        row = {"model": model_name, "variant": variant, "format": fmt, "bits_per_weight": 8 * model_bytes(path) / params,
               "pagoda_perplexity": ppl, "pagoda_stderr": se}
        row.update(extra or {})
        rows.append(row)
        print(json.dumps(row), flush=True)

    for spec in args.hf:
        name, src = spec.split("=", 1)
        params = count_params(src)
        work = os.path.join(args.out, name)
        os.makedirs(work, exist_ok=True)
        add(name, "fp32", "safetensors F32", src, params)
        to_bf16(src, os.path.join(work, "bf16"))
        add(name, "bf16", "safetensors BF16", os.path.join(work, "bf16"), params)
        variants = [("w8a16", ["--method", "rtn", "--bits", "8"], "compressed-tensors W8A16, per channel"),
                    ("fp8", ["--method", "rtn", "--bits", "8", "--format", "fp8"], "compressed-tensors FP8, per channel")]
        for g in (128, 64, 32):
            if all(k % g == 0 for k in matmul_ks(src)):
                for method in ("rtn", "awq"):
                    variants.append((f"{method}-w4-g{g}", ["--method", method, "--bits", "4", "--group-size", str(g)],
                                     f"AutoAWQ GEMM g{g} ({method.upper()})"))
        for variant, flags, fmt in variants:
            out_dir = os.path.join(work, variant)
            shutil.rmtree(out_dir, ignore_errors=True)
            t0 = time.time()
            run([args.pagoda, "quantize", "--model", src, "--out", out_dir] + flags, log)
            add(name, variant, fmt, out_dir, params, {"quantize_seconds": round(time.time() - t0, 2)})

    for spec in args.gguf:
        name, src = spec.split("=", 1)
        if not args.llama_cpp:
            raise SystemExit("--gguf needs --llama-cpp")
        # Parameters: an F32 GGUF's tensor bytes / 4 (its header is small next to them).
        params = None
        for qtype in ("F32", "Q8_0", "Q4_0", "Q4_K_M"):
            path = src if qtype == "F32" else os.path.join(args.out, f"{name}-{qtype}.gguf")
            if qtype != "F32":
                try:
                    run([os.path.join(args.llama_cpp, "llama-quantize"), src, path, qtype], log)
                except SystemExit as e:  # e.g. rows that are not whole blocks: llama.cpp has no fallback for them
                    reason = re.findall(r"tensor cols [^\n]*? required for \w+", str(e) + open(log).read())
                    rows.append({"model": name, "variant": f"gguf {qtype}", "format": f"GGUF {qtype} (llama-quantize)",
                                 "error": "llama-quantize refuses: " + (reason[-1].split("llama_")[0] if reason else "see the log")})
                    print(json.dumps(rows[-1]), flush=True)
                    continue
            lppl, lse = llama_ppl(args, path, log)
            if params is None:
                params = os.path.getsize(src) / 4
            add(name, f"gguf {qtype}", f"GGUF {qtype} (llama-quantize)" if qtype != "F32" else "GGUF F32", path, params,
                {"llama_cpp_perplexity": lppl, "llama_cpp_stderr": lse}, args.gguf_text)

    json.dump(rows, open(os.path.join(args.out, "quant_table.json"), "w"), indent=1)
    base = {}
    for r in rows:
        if r["variant"] in ("fp32", "gguf F32") and "error" not in r:
            base[(r["model"], r["variant"].startswith("gguf"))] = r["pagoda_perplexity"]
    lines = ["| model | variant | format | bits / weight | Pagoda perplexity | vs fp32 | llama.cpp perplexity | Pagoda / llama.cpp |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['variant']} | {r['format']} | – | {r['error']} | – | – | – |")
            continue
        b = base.get((r["model"], r["variant"].startswith("gguf")))
        vs = f"{100 * (r['pagoda_perplexity'] / b - 1):+.2f}%" if b and r["variant"] not in ("fp32", "gguf F32") else "–"
        l = r.get("llama_cpp_perplexity")
        se = f" ± {r['pagoda_stderr']:.3f}" if r.get("pagoda_stderr") else ""
        lcpp = f"{l:.4f}" if l else "–"
        ratio = f"{r['pagoda_perplexity'] / l:.4f}" if l else "–"
        lines.append(f"| {r['model']} | {r['variant']} | {r['format']} | {r['bits_per_weight']:.2f} | "
                     f"{r['pagoda_perplexity']:.4f}{se} | {vs} | {lcpp} | {ratio} |")
    open(os.path.join(args.out, "quant_table.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
