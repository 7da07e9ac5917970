#!/usr/bin/env python3
"""`pagoda serve` under many open streams: starts the server, opens --streams concurrent streaming
completions (all at once, each --max-tokens tokens, ignore_eos), and reports the sustained request and
token rates plus the server's own per-token overhead: the time from the engine emitting a token to its SSE
bytes being written (histogram pagoda:server_token_delivery_seconds, read from /metrics).

  bench/server_load.py --pagoda build/cpu/bin/pagoda --streams 1000 --out bench/results/<date>-server-load.json
"""
import argparse
import asyncio
import datetime
import json
import os
import resource
import socket
import subprocess
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def one_stream(port, prompt, max_tokens):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
                       "ignore_eos": True})
    writer.write((f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  f"Connection: close\r\nContent-Length: {len(body)}\r\n\r\n{body}").encode())
    await writer.drain()
    raw = await reader.read()
    writer.close()
    return b"200 OK" in raw.split(b"\r\n", 1)[0] and b"data: [DONE]" in raw


def histogram(metrics_text, name):
    buckets, total, count = [], 0.0, 0
    for line in metrics_text.splitlines():
        if line.startswith(name + "_bucket"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            buckets.append((float("inf") if le == "+Inf" else float(le), float(line.rsplit(" ", 1)[1])))
        elif line.startswith(name + "_sum"):
            total = float(line.rsplit(" ", 1)[1])
        elif line.startswith(name + "_count"):
            count = int(float(line.rsplit(" ", 1)[1]))
    return buckets, total, count


def quantile(buckets, count, q):
    """Prometheus-style: linear interpolation inside the bucket holding the q-th observation."""
    rank, prev_le, prev_n = q * count, 0.0, 0.0
    for le, n in buckets:
        if n >= rank:
            if le == float("inf"):
                return prev_le
            return prev_le + (le - prev_le) * ((rank - prev_n) / (n - prev_n) if n > prev_n else 0)
        prev_le, prev_n = le, n
    return prev_le


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pagoda", required=True)
    p.add_argument("--streams", type=int, default=1000)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--max-num-seqs", type=int, default=256)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 4 * a.streams + 64
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard) if hard != resource.RLIM_INFINITY else want, hard))
    port = free_port()
    server = subprocess.Popen([a.pagoda, "--log-level", "warn", "serve", "--port", str(port), "--max-num-seqs",
                               str(a.max_num_seqs)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        prompts = ["Once upon a time", "The little dog", "Lily wanted", "One day, a cat"]

        async def run_all():
            return await asyncio.gather(*(one_stream(port, prompts[i % 4], a.max_tokens) for i in range(a.streams)))

        t0 = time.perf_counter()
        ok = asyncio.run(run_all())
        elapsed = time.perf_counter() - t0
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    finally:
        server.terminate()
        server.wait(timeout=30)
    buckets, total, count = histogram(metrics, "pagoda:server_token_delivery_seconds")
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "pagoda_commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip(),
        "nproc": os.cpu_count(), "streams": a.streams, "max_tokens": a.max_tokens, "max_num_seqs": a.max_num_seqs,
        "succeeded": sum(ok), "elapsed_s": elapsed, "requests_per_second": sum(ok) / elapsed,
        "output_tokens_per_second": sum(ok) * a.max_tokens / elapsed,
        "delivery_count": count, "delivery_mean_s": total / count if count else None,
        "delivery_p50_s": quantile(buckets, count, 0.5), "delivery_p99_s": quantile(buckets, count, 0.99),
    }
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
