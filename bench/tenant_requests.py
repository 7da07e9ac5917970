#!/usr/bin/env python3
"""One tenant's requests in each multi-tenant run of a device results folder (the runs of scripts/kv_policy_bench.sh:
DIR/*probe*/kv_*/bench-*.json.xz, each holding every request, beside the server's log):
  python3 bench/tenant_requests.py bench/results/DATE-sessionNN [--tenant tenant-0] > .../tenant0_requests.txt
Per run: the tenant's requests, its P99 TTFT as the bench reports it, its five slowest TTFTs with their cached tokens
(0: its cold first request), its warm requests' mean TTFT, the server's five slowest (TTFT, queue: submission to first
scheduling) from its log, the noisy tenant's median TTFT and the run's output throughput."""
import argparse, glob, json, lzma, os, re, statistics

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("dir")
parser.add_argument("--tenant", default="tenant-0")
args = parser.parse_args()

for path in sorted(glob.glob(os.path.join(args.dir, "*probe*", "kv_*", "bench-*.json.xz"))):
    d = json.load(lzma.open(path))
    reqs = d["requests"]
    mine = [r for r in reqs if r["tenant"] == args.tenant]
    ttfts = sorted((round(1000 * r["ttft"], 1), r["cached_tokens"]) for r in mine)
    warm = [t for t, cached in ttfts if cached > 0]
    p99 = next(t["p99_ttft_ms"] for t in d["multi_tenant"]["tenants"] if t["name"] == args.tenant)
    noisy = [1000 * r["ttft"] for r in reqs if r["tenant"] == "noisy"]
    served = []
    for log in glob.glob(os.path.join(os.path.dirname(path), "serve-*.log.xz")):
        for line in lzma.open(log, "rt"):
            m = re.search(rf"tenant={re.escape(args.tenant)} .*queue=([0-9.]+)ms .*ttft=([0-9.]+)ms", line)
            if m:
                served.append((float(m.group(2)), float(m.group(1))))
    served.sort()
    run = os.path.relpath(os.path.dirname(path), args.dir)
    print(f"{run}: {args.tenant} {len(mine)} requests, P99 {p99:.1f} ms, slowest five (ms, cached tokens) {ttfts[-5:]}, "
          f"warm mean {statistics.mean(warm):.1f} ms"
          + (f"; the server's slowest five (TTFT, queue ms) {served[-5:]}" if served else "")
          + (f"; noisy median TTFT {statistics.median(noisy):.0f} ms" if noisy else "")
          + f"; output {d['output_throughput']:.1f} tok/s")
