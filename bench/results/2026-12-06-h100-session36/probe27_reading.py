#!/usr/bin/env python3
"""Reads probe27-out/ws-source-sass.csv.xz (Nsight Compute's per-instruction source counters of quant_gemm_ws_kernel,
gate-up at 256 tokens) into the figures of docs/PERFORMANCE.md: for the consumer and converter warps, their stall
samples by reason, and how much of each goes to waiting on the ring's mbarriers.

The SASS is laid out as: the consumers' main loop and epilogue up to their last EXIT, then the converter's code up to
its EXIT, then the out-of-line retry blocks of every mbarrier wait (YIELD; TRYWAIT; BRA). A wait is a TRYWAIT plus the
branch after it (where its samples land) plus its retry block; the retry block with the same barrier register
belongs to it."""
import csv, io, lzma, os, re, sys

path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "probe27-out", "ws-source-sass.csv.xz")
rows = list(csv.reader(io.TextIOWrapper(lzma.open(path))))
hdr, data = rows[1], rows[2:]
col = hdr.index


def num(r, name):
    try:
        return int(r[col(name)])
    except ValueError:
        return 0


SAMPLES, EXECUTED = "Warp Stall Sampling (All Samples)", "Instructions Executed"
reasons = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
sass = [r[1].strip() for r in data]
executed_exits = [k for k, s in enumerate(sass) if re.search(r"\bEXIT\b", s) and num(data[k], EXECUTED) > 0]
converter_exit = executed_exits[-1]                                   # the last EXIT: the converter's
consumer_exit = [k for k in executed_exits if k < converter_exit][-1]  # the consumers' last
regions = {"consumer": range(0, consumer_exit + 1), "converter": range(consumer_exit + 1, converter_exit + 1)}
stubs = range(converter_exit + 1, len(data))


def barrier_of(s):
    m = re.search(r"TRYWAIT P0, \[(R\d+)\+(\w+)\]", s)
    return m and m.groups()


waits = {name: set() for name in regions}  # rows of each region's mbarrier waits, retry blocks included
for name, rng in regions.items():
    for k in rng:
        b = barrier_of(sass[k])
        if not b:
            continue
        waits[name].update({k, k + 1})
        for j in stubs:
            if barrier_of(sass[j]) == b:
                waits[name].update({j - 1, j, j + 1, j + 2})
stub_owner = {j: name for name in regions for j in waits[name] if j in stubs}

for name, rng in regions.items():
    rows_of = [k for k in rng] + [j for j in stubs if stub_owner.get(j) == name]
    samples = sum(num(data[k], SAMPLES) for k in rows_of)
    executed = sum(num(data[k], EXECUTED) for k in rows_of)
    wait_samples = sum(num(data[k], SAMPLES) for k in waits[name])
    wait_executed = sum(num(data[k], EXECUTED) for k in waits[name])
    by_reason = sorted(((h[6:], sum(num(data[k], h) for k in rows_of) / samples) for h in reasons), key=lambda x: -x[1])
    print(f"{name}: {samples} samples, {executed} warp instructions executed")
    print(f"  at its mbarrier waits: {wait_samples / samples:.1%} of the samples, {wait_executed / executed:.1%} of the instructions")
    print("  by reason: " + ", ".join(f"{r} {f:.1%}" for r, f in by_reason[:7]))
