#!/usr/bin/env python3
"""Soak test for `pagoda serve` (not in CI): mixed traffic at a share of saturation for a long time, with
the server's RSS, open file descriptors and KV usage sampled every few seconds; the run passes when RSS is
flat after warm-up (< 5% growth), every request got an answer, and no KV block is left in use at the end.

  python3 bench/soak.py --pagoda build/cpu/bin/pagoda --duration 3600 --out bench/results/soak
  (extra arguments after -- go to `pagoda serve`)

Traffic (Poisson arrivals at --load x the measured saturation rate): completions and chat, streamed and
not, n = 1..3, logprobs, stop strings, seeded sampling and greedy, and streamed requests that the client
abandons mid-stream (the server must cancel them and free their blocks). Writes samples.json, a summary
(summary.json) and, with matplotlib, soak.png. With --max-in-flight N the client keeps at most N requests open and
counts the arrivals it skips past that.
"""
import argparse
import http.client
import json
import os
import random
import re
import subprocess
import sys
import threading
import time


class Server:
    def __init__(self, pagoda, extra):
        self.proc = subprocess.Popen([pagoda, "--log-level", "info", "serve", "--host", "127.0.0.1", "--port", "0",
                                      *extra],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.port = None
        for line in self.proc.stderr:
            m = re.search(r"serving .* on http://[\d.]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        if self.port is None:
            raise SystemExit("the server did not start")
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()  # drain the log

    def get(self, path):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        c.request("GET", path)
        r = c.getresponse()
        body = r.read().decode()
        c.close()
        return r.status, body

    def metric(self, name):
        _, text = self.get("/metrics")
        for line in text.splitlines():
            if line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
        return float("nan")

    def rss_bytes(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def open_fds(self):
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))


PROMPTS = ["Once upon a time", "The little dog", "Lily and Tom went to the park", "One day, a girl named Sue",
           "The sun was shining and", "Max had a red ball"]


def one_request(port, rng, outcomes, lock):
    kind = rng.random()
    chat = kind < 0.3
    stream = rng.random() < 0.5
    abandon = stream and rng.random() < 0.15
    body = {"max_tokens": rng.randint(8, 96), "temperature": rng.choice([0.0, 0.8]), "seed": rng.randint(0, 999)}
    if chat:
        body["messages"] = [{"role": "user", "content": rng.choice(PROMPTS)}]
        path = "/v1/chat/completions"
        if rng.random() < 0.2:
            body.update(logprobs=True, top_logprobs=2)
    else:
        body["prompt"] = rng.choice(PROMPTS) + " " * rng.randint(0, 3)
        path = "/v1/completions"
        if rng.random() < 0.2:
            body["logprobs"] = 2
        if rng.random() < 0.2:
            body["n"] = rng.randint(2, 3)
    if rng.random() < 0.2:
        body["stop"] = [rng.choice([".", "\n", " the"])]
    if stream:
        body["stream"] = True
    result = "ok"
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        if abandon:
            r.read(64)
            if c.sock is not None:  # None when the whole (short) response was already read
                c.sock.close()  # the client goes away mid-stream
            result = "abandoned"
        else:
            data = r.read().decode()
            if r.status != 200:
                result = f"http {r.status}"
            elif stream and not data.rstrip().endswith("data: [DONE]"):
                result = "stream without [DONE]"
        c.close()
    except Exception as e:  # noqa: BLE001 - every failure is counted, none may happen
        result = f"error {type(e).__name__}"
    with lock:
        outcomes[result] = outcomes.get(result, 0) + 1


def saturation_rate(port, seconds=20, concurrency=16):
    """Requests a second the server completes with `concurrency` clients sending back to back."""
    done = [0]
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def client(i):
        rng = random.Random(i)
        outcomes = {}
        while time.monotonic() < stop:
            one_request(port, rng, outcomes, threading.Lock())
            with lock:
                done[0] += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(concurrency)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return done[0] / (time.monotonic() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pagoda", required=True)
    ap.add_argument("--duration", type=float, default=3600, help="seconds of load (default 3600)")
    ap.add_argument("--load", type=float, default=0.8, help="share of the saturation rate (default 0.8)")
    ap.add_argument("--sample-interval", type=float, default=10)
    ap.add_argument("--warm-up", type=float, default=None, help="seconds before RSS growth is measured (default 10%%)")
    ap.add_argument("--max-in-flight", type=int, default=0,
                    help="requests the client keeps open at most; an arrival past it is skipped and counted (default "
                         "0: no bound). On a machine the server shares, a bound keeps the client's threads from "
                         "taking the CPU the server needs once a queue forms")
    ap.add_argument("--out", required=True)
    args, extra = ap.parse_known_args()
    extra = [a for a in extra if a != "--"]
    os.makedirs(args.out, exist_ok=True)
    server = Server(args.pagoda, extra)
    sat = saturation_rate(server.port)
    rate = args.load * sat
    print(f"saturation {sat:.1f} req/s; soaking at {rate:.1f} req/s for {args.duration:.0f} s", flush=True)

    outcomes, lock = {}, threading.Lock()
    samples = []
    stop = threading.Event()

    def sampler():
        t0 = time.monotonic()
        while not stop.is_set():
            samples.append({"t": time.monotonic() - t0, "rss_bytes": server.rss_bytes(), "open_fds": server.open_fds(),
                            "kv_cache_usage": server.metric("pagoda:kv_cache_usage_perc"),
                            "running": server.metric("pagoda:num_requests_running"),
                            "waiting": server.metric("pagoda:num_requests_waiting")})
            stop.wait(args.sample_interval)

    threading.Thread(target=sampler, daemon=True).start()
    rng = random.Random(1)
    inflight = []
    sent = skipped = 0
    end = time.monotonic() + args.duration
    next_at = time.monotonic()
    while time.monotonic() < end:
        next_at += rng.expovariate(rate)
        time.sleep(max(0.0, next_at - time.monotonic()))
        if args.max_in_flight > 0 and len(inflight) >= args.max_in_flight:
            inflight = [x for x in inflight if x.is_alive()]
            if len(inflight) >= args.max_in_flight:
                skipped += 1
                continue
        t = threading.Thread(target=one_request, args=(server.port, random.Random(sent), outcomes, lock))
        t.start()
        inflight.append(t)
        sent += 1
        if len(inflight) > 512:
            inflight = [x for x in inflight if x.is_alive()]
    for t in inflight:
        t.join()
    time.sleep(2)  # let cancellations of abandoned streams land
    final_kv = server.metric("pagoda:kv_cache_usage_perc")
    final_running = server.metric("pagoda:num_requests_running")
    stop.set()
    server.proc.send_signal(2)
    server.proc.wait(30)

    warm = args.warm_up if args.warm_up is not None else 0.1 * args.duration
    after = [s for s in samples if s["t"] >= warm]
    rss0 = after[0]["rss_bytes"] if after else float("nan")
    rss_max = max(s["rss_bytes"] for s in after) if after else float("nan")
    answered = sum(outcomes.values())
    failures = {k: v for k, v in outcomes.items() if k not in ("ok", "abandoned")}
    summary = {"duration_s": args.duration, "saturation_req_per_s": sat, "rate_req_per_s": rate, "sent": sent,
               "skipped_at_the_in_flight_bound": skipped,
               "answered": answered, "outcomes": outcomes, "rss_after_warm_up_bytes": rss0, "rss_max_bytes": rss_max,
               "rss_growth": rss_max / rss0 - 1 if after else None, "final_kv_cache_usage": final_kv,
               "final_running": final_running, "max_open_fds": max(s["open_fds"] for s in samples) if samples else None}
    summary["passed"] = (answered == sent and not failures and final_kv == 0 and summary["rss_growth"] is not None
                         and summary["rss_growth"] < 0.05)
    json.dump(samples, open(os.path.join(args.out, "samples.json"), "w"))
    json.dump(summary, open(os.path.join(args.out, "summary.json"), "w"), indent=1)
    print(json.dumps(summary, indent=1))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(3, 1, figsize=(9, 8), sharex=True)
        ts = [s["t"] / 60 for s in samples]
        axes[0].plot(ts, [s["rss_bytes"] / 2**20 for s in samples])
        axes[0].set_ylabel("RSS (MiB)")
        axes[1].plot(ts, [s["open_fds"] for s in samples])
        axes[1].set_ylabel("open fds")
        axes[2].plot(ts, [100 * s["kv_cache_usage"] for s in samples], label="KV usage %")
        axes[2].plot(ts, [s["running"] for s in samples], label="running")
        axes[2].plot(ts, [s["waiting"] for s in samples], label="waiting")
        axes[2].legend()
        axes[2].set_xlabel("minutes")
        fig.suptitle(f"pagoda serve soak: {rate:.1f} req/s ({args.load:.0%} of saturation), {sent} requests")
        fig.tight_layout()
        fig.savefig(os.path.join(args.out, "soak.png"), dpi=90)
    except ImportError:
        pass
    return 0 if summary["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
