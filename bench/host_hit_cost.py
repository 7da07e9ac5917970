#!/usr/bin/env python3
"""The cost of a prefix hit served from the host KV tier against recomputing the prefix, by prefix length (issue #16).

Starts `pagoda serve` twice, with and without `--kv-offload-memory`, on a device cache smaller than the fillers. For
each prefix length L: the prompt once (cold: the prefill), again at once (a device hit), then fillers that evict it,
then again (a host hit with the tier, a recompute without). Each request asks for one token, so its latency is the
prefill of what the cache did not hold (plus a step). Prints a table and writes JSON.

  bench/host_hit_cost.py --pagoda BIN --json OUT -- SERVE_ARGS...
"""
import argparse
import http.client
import json
import random
import re
import subprocess
import sys
import threading
import time


def start(pagoda, args):
    proc = subprocess.Popen([pagoda, "serve", "--host", "127.0.0.1", "--port", "0", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    port, ready, log = [None], threading.Event(), []

    def pump():
        for line in proc.stderr:
            log.append(line)
            m = re.search(r"serving .* on http://[\d.]+:(\d+)", line)
            if m:
                port[0] = int(m.group(1))
                ready.set()
        ready.set()

    threading.Thread(target=pump, daemon=True).start()
    if not ready.wait(300) or port[0] is None:
        proc.kill()
        sys.exit("server did not start:\n" + "".join(log[-20:]))
    return proc, port[0]


def complete(port, ids):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    start = time.perf_counter()
    conn.request("POST", "/v1/completions", json.dumps({"prompt": ids, "max_tokens": 1, "temperature": 0}),
                 {"Content-Type": "application/json"})
    body = json.loads(conn.getresponse().read())
    seconds = time.perf_counter() - start
    conn.close()
    return seconds, body["usage"]["prompt_tokens_details"]["cached_tokens"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--pagoda", required=True)
    p.add_argument("--json", required=True)
    p.add_argument("--lengths", default="1024,2048,4096,8000")
    p.add_argument("--host-memory", default="16GiB")
    p.add_argument("--filler-len", type=int, default=7000)
    p.add_argument("--fillers", type=int, default=3)
    p.add_argument("--max-id", type=int, default=100000, help="prompt token ids are drawn below this (the vocabulary)")
    p.add_argument("serve_args", nargs=argparse.REMAINDER)
    a = p.parse_args()
    serve_args = [x for x in a.serve_args if x != "--"]
    rng = random.Random(0)
    lengths = [int(x) for x in a.lengths.split(",")]
    prompts = {n: [rng.randrange(a.max_id // 100, a.max_id) for _ in range(n)] for n in lengths}
    results = {}
    for tier in ("host tier", "no host tier"):
        extra = ["--kv-offload-memory", a.host_memory] if tier == "host tier" else []
        proc, port = start(a.pagoda, serve_args + extra)
        complete(port, [rng.randrange(a.max_id // 100, a.max_id) for _ in range(64)])  # warm
        rows = []
        for n in lengths:
            cold, _ = complete(port, prompts[n])
            device, device_cached = complete(port, prompts[n])
            for _ in range(a.fillers):
                complete(port, [rng.randrange(a.max_id // 100, a.max_id) for _ in range(a.filler_len)])
            after, after_cached = complete(port, prompts[n])
            rows.append({"prefix_len": n, "cold_ms": cold * 1e3, "device_hit_ms": device * 1e3,
                         "device_cached": device_cached, "after_eviction_ms": after * 1e3, "after_cached": after_cached})
        proc.terminate()
        proc.wait(60)
        results[tier] = rows
    print("| prefix tokens | cold (prefill) ms | device hit ms | after eviction, host tier: ms (cached) | after eviction, no tier: ms (cached) |")
    print("| --- | --- | --- | --- | --- |")
    for h, r in zip(results["host tier"], results["no host tier"]):
        print(f'| {h["prefix_len"]} | {h["cold_ms"]:.1f} | {h["device_hit_ms"]:.1f} | {h["after_eviction_ms"]:.1f} ({h["after_cached"]}) | '
              f'{r["after_eviction_ms"]:.1f} ({r["after_cached"]}) |')
    with open(a.json, "w") as f:
        json.dump({"serve_args": serve_args, "host_memory": a.host_memory, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
