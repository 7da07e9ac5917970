#!/usr/bin/env python3
"""A/B/peer, alternating: pagoda BASE and NEW `generate --json` (512-token prompt, then N generated) and llama-bench
pp512 / tgN, THREADS threads, ROUNDS rounds; medians and ratios.  ab2.py BASE NEW MODEL ROUNDS THREADS [N]"""
import json, random, statistics, subprocess, sys
base, new, model, rounds, threads = sys.argv[1:6]; rounds = int(rounds); n = sys.argv[6] if len(sys.argv) > 6 else "64"
rng = random.Random(0)
ids = ",".join(map(str, [1] + [rng.randrange(300, 20000) for _ in range(511)]))
def pg(binary):
    out = subprocess.run([binary, "generate", "--json", "--model", model, "--threads", threads, "--ignore-eos",
                          "--max-tokens", n, "--prompt-ids", ids, "--max-model-len", "1024"], check=True,
                         capture_output=True, text=True).stdout
    t = json.loads(out)["timings"]; return t["prompt_tokens_per_second"], t["generation_tokens_per_second"]
def lc():
    out = subprocess.run(["/tmp/peer/llama.cpp/build/bin/llama-bench", "-m", model, "-p", "512", "-n", n, "-t", threads,
                          "-r", "1", "-o", "json"], check=True, capture_output=True, text=True).stdout
    j = json.loads(out); return j[0]["avg_ts"], j[1]["avg_ts"]
res = {k: ([], []) for k in ("base", "new", "llama")}
for r in range(rounds):
    order = [("base", lambda: pg(base)), ("new", lambda: pg(new)), ("llama", lc)]
    if r % 2: order.reverse()
    for name, f in order:
        p, g = f(); res[name][0].append(p); res[name][1].append(g)
    print(r, {k: (round(v[0][-1], 1), round(v[1][-1], 2)) for k, v in res.items()}, flush=True)
med = {k: (statistics.median(v[0]), statistics.median(v[1])) for k, v in res.items()}
for k, (p, g) in med.items(): print(f"{k}: pp {p:.1f} tg {g:.2f}")
print(f"new/base pp {med['new'][0]/med['base'][0]:.3f} tg {med['new'][1]/med['base'][1]:.3f}")
print(f"base/llama pp {med['base'][0]/med['llama'][0]:.3f} tg {med['base'][1]/med['llama'][1]:.3f}")
print(f"new/llama pp {med['new'][0]/med['llama'][0]:.3f} tg {med['new'][1]/med['llama'][1]:.3f}")
