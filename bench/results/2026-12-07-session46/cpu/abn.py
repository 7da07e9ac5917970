#!/usr/bin/env python3
"""abn.py THREADS ROUNDS MODEL BIN... : generation tok/s (64 tokens from BOS), binaries alternating (rotating order)."""
import json, statistics, subprocess, sys
threads, rounds, model, bins = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
res = {b: [] for b in bins}
for r in range(rounds):
    order = bins[r % len(bins):] + bins[:r % len(bins)]
    for b in order:
        out = subprocess.run([b, "generate", "--json", "--model", model, "--threads", threads, "--ignore-eos", "--max-tokens",
                              "48", "--prompt-ids", "1", "--max-model-len", "400"], check=True, capture_output=True, text=True).stdout
        res[b].append(json.loads(out)["timings"]["generation_tokens_per_second"])
    print(r, [round(res[b][-1], 2) for b in bins], flush=True)
m0 = statistics.median(res[bins[0]])
for b in bins: print(b, round(statistics.median(res[b]), 2), round(statistics.median(res[b]) / m0, 3))
