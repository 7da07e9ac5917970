#!/usr/bin/env python3
"""Pagoda vs llama.cpp on the CPU, same files, same machine, same run: prompt processing and generation
tokens/s (`pagoda generate --json` timings vs `llama-bench`), and Pagoda's batched vs single-stream
offline throughput. Writes the raw results as JSON and prints a table with the ratios.

  bench/cpu_vs_llamacpp.py --pagoda build/cpu/bin/pagoda --llama-bench /path/to/llama-bench \
      --model stories260K=models/stories260K.gguf:256 --model tinyllama-f16=/tmp/tl-f16.gguf:512 \
      --out bench/results/cpu-generate.json

Each --model is NAME=PATH:PROMPT_TOKENS. Pagoda's prompt figure is prompt tokens / time to first token
(prefill plus one sampling step); llama-bench's pp excludes sampling. Generation is measured as llama-bench's
tg is, from an empty cache (Pagoda: a prompt of BOS alone); Pagoda's rate after the prompt is kept beside it. Both use --threads. The engines alternate,
one run each, --repetitions times; the table has the medians.
"""
import argparse
import datetime
import json
import os
import platform
import random
import statistics
import subprocess


def pagoda_run(args, path, ids, n_gen):
    cmd = [args.pagoda, "generate", "--json", "--model", path, "--threads", str(args.threads), "--ignore-eos",
           "--max-tokens", str(n_gen), "--prompt-ids", ",".join(map(str, ids)), "--max-model-len", str(len(ids) + n_gen + 1)]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)["timings"]


def pagoda_generate(args, path, n_prompt, n_gen):
    """(prompt tok/s, generation tok/s, generation tok/s after the prompt). The generation figure comes from a
    run whose prompt is BOS alone, as llama-bench's tg test decodes from an empty cache (test_gen after
    llama_kv_cache_clear; its pp and tg are separate tests); the one after the prompt, n_prompt to n_prompt + n_gen
    tokens deep, is kept beside it (until 2026-12-04 it was the figure compared)."""
    rng = random.Random(0)
    ids = [1] + [rng.randrange(300, 500) for _ in range(n_prompt - 1)]
    after_prompt = pagoda_run(args, path, ids, n_gen)
    from_empty = pagoda_run(args, path, [1], n_gen)
    return (after_prompt["prompt_tokens_per_second"], from_empty["generation_tokens_per_second"],
            after_prompt["generation_tokens_per_second"])


def llama_bench(args, path, n_prompt, n_gen):
    cmd = [args.llama_bench, "-m", path, "-p", str(n_prompt), "-n", str(n_gen), "-t", str(args.threads), "-r", "1",
           "-o", "json"]
    rows = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    pp = next(r["avg_ts"] for r in rows if r["n_prompt"] > 0)
    tg = next(r["avg_ts"] for r in rows if r["n_gen"] > 0)
    commit = args.llama_commit or rows[0].get("build_commit", "?")
    return pp, tg, commit


def pagoda_throughput(args, path, max_num_seqs):
    cmd = [args.pagoda, "bench", "throughput", "--json", "--model", path, "--threads", str(args.threads),
           "--num-prompts", str(args.num_prompts), "--input-len", "128", "--output-len", "128",
           "--max-num-seqs", str(max_num_seqs)]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pagoda", required=True)
    p.add_argument("--llama-bench", required=True)
    p.add_argument("--model", action="append", required=True, help="NAME=PATH:PROMPT_TOKENS")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repetitions", type=int, default=3)
    p.add_argument("--n-gen", type=int, default=128)
    p.add_argument("--num-prompts", type=int, default=256, help="for the stories260K throughput run")
    p.add_argument("--llama-commit", default="", help="llama.cpp commit, when its build does not know it")
    p.add_argument("--out", required=True)
    a = p.parse_args()

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    result = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "pagoda_commit": commit, "machine": platform.processor() or platform.machine(),
              "cpu_model": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?"),
              "nproc": os.cpu_count(), "load_average_at_start": os.getloadavg()[0], "threads": a.threads, "models": []}
    print(f"{'model':<16} {'pp':>5} {'pagoda pp t/s':>14} {'llama.cpp pp':>13} {'ratio':>6} "
          f"{'pagoda tg t/s':>14} {'llama.cpp tg':>13} {'ratio':>6}")
    for spec in a.model:
        name, rest = spec.split("=", 1)
        path, n_prompt = rest.rsplit(":", 1)
        n_prompt = int(n_prompt)
        # The two engines alternate, one run each per repetition: this VM's memory bandwidth drifts with its
        # neighbours by tens of percent over minutes, which back-to-back blocks of runs would turn into ratios.
        pag, lla = [], []
        for _ in range(a.repetitions):
            pag.append(pagoda_generate(a, path, n_prompt, a.n_gen))
            lla.append(llama_bench(a, path, n_prompt, a.n_gen))
        pp, tg = statistics.median(x[0] for x in pag), statistics.median(x[1] for x in pag)
        lpp, ltg = statistics.median(x[0] for x in lla), statistics.median(x[1] for x in lla)
        lcommit = lla[0][2]
        pair_gen = statistics.median(p[1] / l[1] for p, l in zip(pag, lla))
        row = {"name": name, "path": path, "n_prompt": n_prompt, "n_gen": a.n_gen,
               "pagoda_prompt_tps": pp, "pagoda_gen_tps": tg, "llamacpp_prompt_tps": lpp, "llamacpp_gen_tps": ltg,
               "llamacpp_commit": lcommit, "prompt_ratio": pp / lpp, "gen_ratio": tg / ltg,
               "gen_ratio_median_of_pairs": pair_gen,
               "pagoda_gen_after_prompt_tps": statistics.median(x[2] for x in pag),
               "pagoda_runs": [x[:2] for x in pag], "pagoda_gen_after_prompt_runs": [x[2] for x in pag],
               "llamacpp_runs": [x[:2] for x in lla]}
        result["models"].append(row)
        print(f"{name:<16} {n_prompt:>5} {pp:>14.1f} {lpp:>13.1f} {pp / lpp:>6.2f} {tg:>14.1f} {ltg:>13.1f} {tg / ltg:>6.2f}")
        if name.startswith("stories"):
            batched = pagoda_throughput(a, path, 256)
            single = pagoda_throughput(a, path, 1)
            result["stories_throughput"] = {"batched_256": batched, "single_stream": single,
                                            "speedup": batched["output_tokens_per_second"] / single["output_tokens_per_second"]}
            print(f"  throughput 128/128 x{a.num_prompts}: batched {batched['output_tokens_per_second']:.0f} output tok/s, "
                  f"one at a time {single['output_tokens_per_second']:.0f}, x{result['stories_throughput']['speedup']:.1f}")
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
