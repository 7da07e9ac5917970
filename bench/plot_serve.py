#!/usr/bin/python3
"""Plots from `pagoda bench serve --json` result files (Debian's python3-matplotlib; hence /usr/bin/python3).

  bench/plot_serve.py RESULT.json [RESULT.json ...] --out-dir DIR

writes, one line or point per result file (named by its --label, else the file name):
  DIR/latency_cdf.png           CDFs of TTFT, TPOT, ITL and end-to-end latency
  DIR/latency_vs_rate.png       median and P99 TTFT and TPOT against the configured request rate
                                (a run at rate inf sits right of the others, marked "inf")
  DIR/throughput_over_time.png  output tokens/s and requests in flight over each run
"""
import argparse
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(path):
    with open(path, encoding="utf-8") as f:
        r = json.load(f)
    for key in ("requests", "timeline", "request_rate"):
        if key not in r:
            raise ValueError(f"{path}: not a `pagoda bench serve --json` result (no '{key}')")
    r["_name"] = r.get("label") or os.path.splitext(os.path.basename(path))[0]
    return r


def cdf(ax, values, label):
    values = sorted(values)
    if not values:
        return
    n = len(values)
    ax.step(values, [(i + 1) / n for i in range(n)], where="post", label=label)


def plot_cdfs(results, path):
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    panels = [("TTFT", lambda q: [q["ttft"]] if q["ttft"] is not None else []),
              ("TPOT", lambda q: [q["tpot"]] if q["tpot"] is not None else []),
              ("ITL", lambda q: q["itl"]),
              ("E2E latency", lambda q: [q["e2el"]])]
    for ax, (title, values_of) in zip(axes.flat, panels):
        for r in results:
            values = [1e3 * v for q in r["requests"] if q["success"] for v in values_of(q)]
            cdf(ax, values, r["_name"])
        ax.set_title(f"{title} CDF")
        ax.set_xlabel("ms")
        ax.set_ylabel("fraction of requests" if title != "ITL" else "fraction of chunks")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def rate_positions(results):
    finite = [r["request_rate"] for r in results if r["request_rate"] != "inf"]
    inf_x = 1.25 * max(finite) if finite else 1.0
    return [inf_x if r["request_rate"] == "inf" else float(r["request_rate"]) for r in results], inf_x


def plot_vs_rate(results, path):
    order = sorted(results, key=lambda r: math.inf if r["request_rate"] == "inf" else float(r["request_rate"]))
    xs, inf_x = rate_positions(order)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    for ax, metric in zip(axes, ("ttft", "tpot")):
        for stat, style in (("median", "o-"), ("p99", "s--")):
            ax.plot(xs, [r.get(f"{stat}_{metric}_ms", float("nan")) for r in order], style, label=stat)
        ax.set_title(f"{metric.upper()} vs request rate")
        ax.set_xlabel("request rate (req/s)")
        ax.set_ylabel("ms")
        ax.grid(alpha=0.3)
        ax.legend()
        if any(r["request_rate"] == "inf" for r in order):
            ticks = [x for x in ax.get_xticks() if 0 <= x < inf_x * 0.9] + [inf_x]
            ax.set_xticks(ticks)
            ax.set_xticklabels([f"{t:g}" for t in ticks[:-1]] + ["inf"])
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_throughput(results, path):
    fig, axes = plt.subplots(2, 1, figsize=(11, 7), sharex=True)
    for r in results:
        t = r["timeline"]
        width = t["bin_seconds"]
        xs = [(i + 0.5) * width for i in range(len(t["output_tokens_per_s"]))]
        axes[0].plot(xs, t["output_tokens_per_s"], label=r["_name"])
        axes[1].plot(xs, t["requests_running"], label=r["_name"])
    axes[0].set_title("Output throughput over time")
    axes[0].set_ylabel("output tokens/s")
    axes[1].set_title("Requests in flight")
    axes[1].set_ylabel("requests")
    axes[1].set_xlabel("seconds since the first request")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="+", help="result files of pagoda bench serve --json")
    parser.add_argument("--out-dir", required=True, help="where the PNG files go (created if missing)")
    args = parser.parse_args()
    try:
        results = [load(p) for p in args.results]
    except (OSError, ValueError) as e:
        sys.exit(f"plot_serve: {e}")
    os.makedirs(args.out_dir, exist_ok=True)
    outputs = {"latency_cdf.png": plot_cdfs, "latency_vs_rate.png": plot_vs_rate,
               "throughput_over_time.png": plot_throughput}
    for name, plot in outputs.items():
        plot(results, os.path.join(args.out_dir, name))
        print(os.path.join(args.out_dir, name))


if __name__ == "__main__":
    main()
