#!/usr/bin/env python3
"""A/B of two pagoda binaries on the CPU, alternating one run each (session 45): `pagoda generate --json` timings
for a 256-token prompt of stories260K (prompt tok/s = 256 / time to first token) and 128 tokens generated after it,
and TinyLlama Q4_0 generation of 64 tokens from BOS. Prints each run and the medians.
  ab_cpu_regions.py BASE NEW ROUNDS THREADS TINYLLAMA_Q4_0_GGUF"""
import json, random, statistics, subprocess, sys

base, new, rounds, threads, q4 = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
rng = random.Random(0)
ids = ",".join(map(str, [1] + [rng.randrange(300, 500) for _ in range(255)]))

def run(binary, model, prompt_ids, n):
    out = subprocess.run([binary, "generate", "--json", "--model", model, "--threads", threads, "--ignore-eos",
                          "--max-tokens", str(n), "--prompt-ids", prompt_ids, "--max-model-len", "400"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["timings"]

res = {name: {"stories_pp": [], "stories_tg": [], "q4_0_tg": []} for name in ("base", "new")}
for r in range(rounds):
    for name, binary in (("base", base), ("new", new)) if r % 2 == 0 else (("new", new), ("base", base)):
        t = run(binary, "models/stories260K.gguf", ids, 128)
        g = run(binary, q4, "1", 64)
        res[name]["stories_pp"].append(t["prompt_tokens_per_second"])
        res[name]["stories_tg"].append(t["generation_tokens_per_second"])
        res[name]["q4_0_tg"].append(g["generation_tokens_per_second"])
        print(r, name, round(t["prompt_tokens_per_second"]), round(t["generation_tokens_per_second"]),
              round(g["generation_tokens_per_second"], 2), flush=True)
for key in ("stories_pp", "stories_tg", "q4_0_tg"):
    b, n = statistics.median(res["base"][key]), statistics.median(res["new"][key])
    print(f"{key}: base {b:.1f}  new {n:.1f}  new/base {n / b:.3f}")
