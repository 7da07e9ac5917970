#!/usr/bin/env python3
"""Reads h100-probe66/*-sass.csv.xz (Nsight Compute's per-instruction source counters of decode_tc_kernel, batch 1:
FP8 KV at 32k and 8k keys, bf16 KV at 32k) into the instruction mix and stall reasons that docs/PERFORMANCE.md quotes.
  probe66_reading.py [fp8-32k bf16-32k fp8-8k]
Per kind of SASS instruction: its share of the warp instructions executed and of the stall samples; then the
instructions per 16-key warp tile (HMMA count / 32), split by how often each instruction ran a tile (the loop body
runs about once; a warp's prologue and epilogue once per warp, 1 / (tiles a warp) a tile)."""
import collections, csv, io, lzma, os, re, sys

here = os.path.dirname(os.path.abspath(__file__))


def num(x):
    try:
        return int(x)
    except ValueError:
        return 0


for name in sys.argv[1:] or ["fp8-32k", "bf16-32k", "fp8-8k"]:
    rows = list(csv.reader(io.TextIOWrapper(lzma.open(os.path.join(here, "h100-probe66", f"{name}-sass.csv.xz")))))
    hdr, data = rows[1], rows[2:]
    ci, cs = hdr.index("Instructions Executed"), hdr.index("Warp Stall Sampling (All Samples)")
    reasons = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
    tot, tots = sum(num(r[ci]) for r in data), sum(num(r[cs]) for r in data)
    op, ops = collections.Counter(), collections.Counter()
    for r in data:
        m = re.match(r"\s*(@!?U?P\w+\s+)?([A-Z0-9_.]+)", r[1])
        o = m.group(2).split(".")[0] if m else r[1][:10]
        op[o] += num(r[ci])
        ops[o] += num(r[cs])
    tiles = sum(num(r[ci]) for r in data if "HMMA" in r[1]) / 32  # 32 MMAs a 16-key tile (QK 16, PV 16)
    print(f"== {name}: {tot} warp instructions, {tiles:.0f} 16-key warp tiles, {tot / tiles:.0f} a tile; {tots} samples")
    for o, c in op.most_common(16):
        print(f"  {o:10s} {c / tot:6.1%} of instructions  {ops[o] / tots:6.1%} of samples")
    freq = collections.defaultdict(float)
    for r in data:
        f = num(r[ci]) / tiles
        freq["loop body (>= 0.9 a tile)" if f >= 0.9 else "0.3-0.9 a tile" if f >= 0.3 else "< 0.3 a tile"] += f
    print("  a tile:", ", ".join(f"{k} {v:.0f}" for k, v in freq.items()))
    rs = sorted(((h[6:], sum(num(r[hdr.index(h)]) for r in data)) for h in reasons), key=lambda x: -x[1])
    print("  stalls:", ", ".join(f"{h} {c / tots:.1%}" for h, c in rs[:8]))
