#!/usr/bin/env python3
"""Per config of probes 36 and 38 (the step-change runs): of the requests sent in the 32 req/s phase (scheduled
15-30 s), how many met both targets (TTFT <= 200 ms, TPOT <= 50 ms), missed TTFT, missed TPOT. Reads the
per-request records the benchmark wrote (kept in this folder's probe38-out JSON files before they were
trimmed; the figures are in README.md). Usage: python3 misses.py FILE.json..."""
import json
import sys

for path in sys.argv[1:]:
    recs = json.load(open(path)).get("requests") or []
    burst = [r for r in recs if 15 <= r["scheduled_time"] < 30]
    ttft = sum(1 for r in burst if r["ttft"] > 0.2)
    tpot = sum(1 for r in burst if r["tpot"] > 0.05)
    good = sum(1 for r in burst if r["ttft"] <= 0.2 and r["tpot"] <= 0.05)
    print(f"{path}: sent in the burst {len(burst)}, within both {good}, over TTFT {ttft}, over TPOT {tpot}")
