#!/usr/bin/env python3
"""Tenant-0's requests in each multi-tenant run of probes 51 and 52 (the bench JSONs hold every request):
how many, its slowest five TTFTs (with their cached tokens: 0 is its cold request), its P99 as the bench reports it,
its warm requests' mean TTFT, the noisy tenant's median TTFT and the run's output throughput.
  python3 bench/results/2026-12-07-session42/tenant0_requests.py > .../tenant0_requests.txt"""
import glob, json, lzma, os, statistics

here = os.path.dirname(os.path.abspath(__file__))
for path in sorted(glob.glob(os.path.join(here, "probe5*-out", "kv_*", "bench-*.json.xz"))):
    d = json.load(lzma.open(path))
    reqs = d["requests"]
    t0 = [r for r in reqs if r["tenant"] == "tenant-0"]
    ttfts = sorted((round(1000 * r["ttft"], 1), r["cached_tokens"]) for r in t0)
    warm = [t for t, cached in ttfts if cached > 0]
    p99 = next(t["p99_ttft_ms"] for t in d["multi_tenant"]["tenants"] if t["name"] == "tenant-0")
    noisy = [1000 * r["ttft"] for r in reqs if r["tenant"] == "noisy"]
    run = os.path.relpath(os.path.dirname(path), here)
    print(f"{run}: tenant-0 {len(t0)} requests, P99 {p99:.1f} ms, slowest five (ms, cached tokens) {ttfts[-5:]}, "
          f"warm mean {statistics.mean(warm):.1f} ms"
          + (f"; noisy median TTFT {statistics.median(noisy):.0f} ms" if noisy else "")
          + f"; output {d['output_throughput']:.1f} tok/s")
