#!/usr/bin/env python3
"""The figures of session 43's PERFORMANCE section that come from the bench JSONs and the debug-level server logs:
  python3 bench/results/2026-12-07-session43/step_trace.py > bench/results/2026-12-07-session43/step_trace.txt
(1) probe 53, late planning on and off: TTFT of every request but the noisy tenant's, and tenant-0's;
(2) each debug trace (probes 55 and 56 give plan and launch times): launches over 3 ms, eager prompt steps' launch
    times, steps planned late, the long launches beside new highs of the rows a step may sample and new token counts,
    the longest run of steps without prompt work;
(3) probe 55's flood as the input of replay_late_planning.cpp (replay_input.txt)."""
import glob, json, lzma, os, re, statistics

here = os.path.dirname(os.path.abspath(__file__))


def q(values, p):  # linear interpolation, as numpy's default
    v = sorted(values)
    k = (len(v) - 1) * p
    f = int(k)
    c = min(f + 1, len(v) - 1)
    return v[f] + (v[c] - v[f]) * (k - f)


print("== late planning, probe 53 (H100, same call)")
for run in ("kv_flood_late1", "kv_flood_late0"):
    d = json.load(lzma.open(os.path.join(here, "probe53-out", run, "bench-lru-k_host_fair.json.xz")))
    ord_t = [1000 * r["ttft"] for r in d["requests"] if r["tenant"] != "noisy"]
    t0 = [1000 * r["ttft"] for r in d["requests"] if r["tenant"] == "tenant-0"]
    print(f"{run}: all but noisy: mean {statistics.mean(ord_t):.1f} median {q(ord_t, .5):.1f} p90 {q(ord_t, .9):.1f} ms;"
          f" tenant-0 mean {statistics.mean(t0):.1f} median {q(t0, .5):.1f} ms; output {d['output_throughput']:.1f} tok/s")

LINE = re.compile(r"^D (\S+) step (\d+): (?:planned in ([0-9.]+) ms, launched in ([0-9.]+) ms, |launched )([0-9.]+) ms before it ran, "
                  r"ran ([0-9.]+) ms; (\d+) decodes, (\d+) prompt tokens \[(.*)\]")


def steps_of(log):
    out = []
    for line in lzma.open(log, "rt"):
        m = LINE.match(line)
        if not m:
            continue
        chunks = [tuple(map(int, c.split(" ")[-1].split("@"))) for c in m.group(9).split(", ") if "@" in c]
        out.append({"time": m.group(1), "n": int(m.group(2)), "plan": float(m.group(3) or 0),
                    "launch": float(m.group(4)) if m.group(4) else None, "before": float(m.group(5)),
                    "ran": float(m.group(6)), "decodes": int(m.group(7)), "prompt": int(m.group(8)), "chunks": chunks})
    return out


for log in sorted(glob.glob(os.path.join(here, "probe5*-out", "kv_*", "serve-*.log.xz"))):
    steps = steps_of(log)
    if not steps:
        continue
    run = os.path.relpath(os.path.dirname(log), here)
    print(f"== {run}: {len(steps)} steps")
    late = sum(1 for a, b in zip(steps, steps[1:]) if a["ran"] > 4 and b["before"] < 0.8 * a["ran"])
    at_once = sum(1 for a, b in zip(steps, steps[1:]) if a["ran"] > 4 and b["before"] >= 0.8 * a["ran"])
    print(f"  launched less than 0.8 of the step before's run ahead of its end (planned late): {late}; the rest: {at_once}")
    stretch, best, best_at = 0, 0, None
    for s in steps:
        stretch = stretch + s["ran"] if s["prompt"] == 0 else 0
        if stretch > best:
            best, best_at = stretch, s["time"]
    print(f"  longest run of steps without prompt work: {best:.0f} ms, ending {best_at}")
    if steps[0]["launch"] is None:
        continue
    long = [s for s in steps if s["launch"] > 3]
    print(f"  launches over 3 ms: {len(long)}, {sum(1 for s in long if s['n'] <= 400)} of them in the first 400 steps")
    later = sorted(s["launch"] for s in steps if s["prompt"] > 0 and s["n"] > 500)
    print(f"  prompt steps after step 500, launch ms: median {q(later, .5):.2f}, p90 {q(later, .9):.2f}, max {later[-1]:.2f}")
    high, counts, marks = 0, set(), []
    for s in steps:  # rows a step may sample: its decodes and its prompt chunks (an upper bound)
        rows = s["decodes"] + len(s["chunks"])
        new = rows > high
        high = max(high, rows)
        tokens = s["decodes"] + s["prompt"]
        if s["launch"] > 3:
            marks.append(f"{s['n']}:{s['launch']:.1f}{'*' if new else ''}{'+' if tokens not in counts else ''}")
        counts.add(tokens)
    print("  long launches (step:ms, * at a new high of the rows it may sample, + at a token count not seen before):",
          " ".join(marks))
    if run == "probe55-out/kv_flood_debug":
        with open(os.path.join(here, "replay_input.txt"), "w") as f:
            for s in steps:
                pairs = sum(t * st + t * (t + 1) // 2 for t, st in s["chunks"])
                f.write(f"{s['n']} {s['plan'] + s['launch']} {s['ran']} {s['decodes']} {s['prompt']} {pairs}\n")
