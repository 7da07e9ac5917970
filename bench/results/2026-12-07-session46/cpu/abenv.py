#!/usr/bin/env python3
"""abenv.py THREADS ROUNDS MODEL BIN ENV... : generation tok/s (48 tokens from BOS) of one binary under each env
setting ("-" = none; "A=1,B=2"), rotating order."""
import json, os, statistics, subprocess, sys
threads, rounds, model, binary, envs = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
res = {e: [] for e in envs}
for r in range(rounds):
    order = envs[r % len(envs):] + envs[:r % len(envs)]
    for e in order:
        env = dict(os.environ)
        if e != "-":
            for kv in e.split(","): k, v = kv.split("="); env[k] = v
        out = subprocess.run([binary, "generate", "--json", "--model", model, "--threads", threads, "--ignore-eos", "--max-tokens",
                              "48", "--prompt-ids", "1", "--max-model-len", "400"], check=True, capture_output=True, text=True, env=env).stdout
        res[e].append(json.loads(out)["timings"]["generation_tokens_per_second"])
    print(r, [round(res[e][-1], 2) for e in envs], flush=True)
m0 = statistics.median(res[envs[0]])
for e in envs: print(e, round(statistics.median(res[e]), 2), round(statistics.median(res[e]) / m0, 3))
