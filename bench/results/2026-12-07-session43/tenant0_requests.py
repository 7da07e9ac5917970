#!/usr/bin/env python3
"""Tenant-0's requests in each multi-tenant run of probes 53 to 56 (the bench JSONs hold every request): how many, its
P99 TTFT as the bench reports it, its slowest five TTFTs with their queue time (submission to first scheduling, from
the server's log) and cached tokens (0: its cold request), the noisy tenant's median TTFT and the output throughput.
  python3 bench/results/2026-12-07-session43/tenant0_requests.py > bench/results/2026-12-07-session43/tenant0_requests.txt"""
import glob, json, lzma, os, re, statistics

here = os.path.dirname(os.path.abspath(__file__))
for path in sorted(glob.glob(os.path.join(here, "probe5*-out", "kv_*", "bench-*.json.xz"))):
    d = json.load(lzma.open(path))
    reqs = d["requests"]
    t0 = [r for r in reqs if r["tenant"] == "tenant-0"]
    ttfts = sorted((round(1000 * r["ttft"], 1), r["cached_tokens"]) for r in t0)
    p99 = next(t["p99_ttft_ms"] for t in d["multi_tenant"]["tenants"] if t["name"] == "tenant-0")
    noisy = [1000 * r["ttft"] for r in reqs if r["tenant"] == "noisy"]
    # The server's own view of tenant-0's requests: queue (until first scheduled) and TTFT, the five slowest.
    log = glob.glob(os.path.join(os.path.dirname(path), "serve-*.log.xz"))
    served = []
    if log:
        for line in lzma.open(log[0], "rt"):
            m = re.search(r"tenant=tenant-0 .*queue=([0-9.]+)ms .*ttft=([0-9.]+)ms", line)
            if m:
                served.append((float(m.group(2)), float(m.group(1))))
    served.sort()
    run = os.path.relpath(os.path.dirname(path), here)
    print(f"{run}: tenant-0 {len(t0)} requests, P99 {p99:.1f} ms; slowest five (ms, cached tokens) {ttfts[-5:]}; "
          f"the server's slowest five (TTFT, queue ms) {served[-5:]}"
          + (f"; noisy median TTFT {statistics.median(noisy):.0f} ms" if noisy else "")
          + f"; output {d['output_throughput']:.1f} tok/s")
