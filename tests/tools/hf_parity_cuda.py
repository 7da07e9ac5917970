#!/usr/bin/env python3
"""Pagoda on the GPU (bf16) against Hugging Face transformers on the same checkpoints.

Runs on the GPU machine (scripts/device/run.sh calls it). For each checkpoint, random token-id prompts go
through transformers in fp32 (the truth) and in bf16 (what bf16 rounding alone costs), and through
`pagoda generate --device cuda` with prompt logprobs. Reported per checkpoint:
  * logprob error: |pagoda - hf_fp32| over pagoda's top-20 tokens at every prompt position, beside the
    same error of transformers' own bf16 run; pagoda passes when its mean and 99th percentile are within
    2x of transformers' bf16 error (+0.02 / +0.05 nats);
  * greedy agreement: pagoda's greedy tokens against transformers fp32 greedy, up to the first position
    where the fp32 top-2 logits are within 1% of the logit range (too close for bf16 to call), or to where
    transformers' own bf16 greedy leaves fp32's, if that comes first.
The Llama-3.2-1B-shaped checkpoint is created here with random weights (seeded) from its config.json.
With --kv-cache-dtypes auto,fp8 every check also runs with an FP8 KV cache, reported beside bf16 KV's
(issue 15): FP8 KV adds its own rounding, so its rows must only stay finite and within 0.5 nats on average
(a sanity bound, not the bf16 gate). --long N adds N-token prompts (--long-prompts K of them) on the 1B checkpoint (greedy
agreement of each KV dtype with transformers fp32 after a long context).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import transformers


def make_random_checkpoint(config_dir: Path, out_dir: Path, seed: int) -> Path:
    config = transformers.AutoConfig.from_pretrained(config_dir)
    torch.manual_seed(seed)
    with torch.device("cuda"):
        model = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=torch.bfloat16)
    model.save_pretrained(out_dir, safe_serialization=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        src = config_dir / name
        if src.exists():
            shutil.copy(src.resolve(), out_dir / name)
    return out_dir


def hf_logprobs(model, ids):
    with torch.no_grad():
        logits = model(torch.tensor([ids], device="cuda")).logits[0].float()
    return torch.log_softmax(logits, dim=-1), logits


def hf_greedy(model, ids, steps):
    out = []
    with torch.no_grad():
        res = model(torch.tensor([ids], device="cuda"), use_cache=True)
        past = res.past_key_values
        logits = res.logits[0, -1].float()
        margins = []
        for _ in range(steps):
            top = torch.topk(logits, 2)
            margins.append(float((top.values[0] - top.values[1]) / (logits.max() - logits.min())))
            nxt = int(top.indices[0])
            out.append(nxt)
            res = model(torch.tensor([[nxt]], device="cuda"), past_key_values=past, use_cache=True)
            past = res.past_key_values
            logits = res.logits[0, -1].float()
    return out, margins


def run_pagoda(pagoda: str, model_dir: Path, prompts, steps: int, env=None, kv_dtype="auto", max_model_len=1024):
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for ids in prompts:
            f.write(json.dumps({"prompt_ids": ids, "max_tokens": steps, "temperature": 0, "ignore_eos": True,
                                "prompt_logprobs": 20}) + "\n")
        path = f.name
    cmd = [pagoda, "--log-level", "warn", "generate", "--device", "cuda", "-m", str(model_dir), "--prompts-file", path,
           "--max-model-len", str(max_model_len), "--max-num-seqs", "8", "--kv-cache-memory", "1GiB",
           "--kv-cache-dtype", kv_dtype]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{res.stderr[-3000:]}")
    return [json.loads(line) for line in res.stdout.splitlines() if line.strip()]


def rope_inv_freq_note(model):
    """How this transformers build holds the RoPE frequencies: dtype, and whether they are bf16-rounded."""
    rotary = getattr(getattr(model, "model", model), "rotary_emb", None)
    if rotary is None or not hasattr(rotary, "inv_freq"):
        return None
    f = rotary.inv_freq.detach().float().cpu()
    return {"dtype": str(rotary.inv_freq.dtype), "bf16_rounded": bool(torch.equal(f, f.bfloat16().float()))}


def compare(ids_list, outs, hf32, hf16, greedy_refs, greedy_bf16):
    err_pagoda, err_bf16, top1_pagoda, top1_bf16, positions = [], [], 0, 0, 0
    by_position = {}  # position bucket -> (pagoda errors, bf16 errors)
    greedy = []
    for ids, out, lp32, lp16, (ref, margins), ref16 in zip(ids_list, outs, hf32, hf16, greedy_refs, greedy_bf16):
        for p in range(1, len(ids)):
            entries = out["prompt_logprobs"][p]
            row32, row16 = lp32[p - 1], lp16[p - 1]
            bucket = "0-63" if p < 64 else "64-255" if p < 256 else "256+"
            for e in entries[:20]:
                err_pagoda.append(abs(e["logprob"] - float(row32[e["id"]])))
                err_bf16.append(abs(float(row16[e["id"]]) - float(row32[e["id"]])))
                by_position.setdefault(bucket, ([], []))[0].append(err_pagoda[-1])
                by_position[bucket][1].append(err_bf16[-1])
            positions += 1
            top1_pagoda += entries[0]["id"] == int(row32.argmax())
            top1_bf16 += int(row16.argmax()) == int(row32.argmax())
        decided = next((i for i, mg in enumerate(margins) if mg < 0.01), len(margins))
        agree = next((i for i, (a, b) in enumerate(zip(out["output_ids"], ref)) if a != b), len(ref))
        agree16 = next((i for i, (a, b) in enumerate(zip(ref16, ref)) if a != b), len(ref))
        # Decided tokens must agree, unless transformers' own bf16 run leaves fp32 as early (bf16 alone).
        greedy.append({"prompt_len": len(ids), "decided": decided, "agree": agree, "hf_bf16_agree": agree16,
                       "ok": agree >= min(decided, agree16), "pagoda": out["output_ids"], "hf_fp32": ref,
                       "hf_bf16": ref16})
    mean = lambda v: sum(v) / max(len(v), 1)
    p99 = lambda v: sorted(v)[int(0.99 * (len(v) - 1))]
    result = {
        "positions": positions,
        "logprob_err_mean": mean(err_pagoda), "logprob_err_p99": p99(err_pagoda), "logprob_err_max": max(err_pagoda),
        "hf_bf16_err_mean": mean(err_bf16), "hf_bf16_err_p99": p99(err_bf16), "hf_bf16_err_max": max(err_bf16),
        "by_position": {b: {"pagoda_mean": mean(v[0]), "hf_bf16_mean": mean(v[1]), "n": len(v[0])}
                        for b, v in by_position.items()},
        "top1_agree_pagoda": top1_pagoda / positions, "top1_agree_hf_bf16": top1_bf16 / positions,
        "greedy": greedy,
    }
    result["logprobs_ok"] = (result["logprob_err_mean"] <= 2 * result["hf_bf16_err_mean"] + 0.02 and
                             result["logprob_err_p99"] <= 2 * result["hf_bf16_err_p99"] + 0.05)
    result["greedy_ok"] = all(g["ok"] for g in greedy)
    return result


def check_model(name: str, model_dir: Path, pagoda: str, prompt_lens, steps: int, seed: int, variants,
                kv_dtypes=("auto",)):
    """One result per pagoda variant (label, extra environment) and KV cache dtype, all against the same
    transformers runs."""
    config = transformers.AutoConfig.from_pretrained(model_dir)
    gen = torch.Generator().manual_seed(seed)
    prompts = [[1] + torch.randint(3, config.vocab_size, (n - 1,), generator=gen).tolist() for n in prompt_lens]
    m32 = transformers.AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32).cuda().eval()
    m16 = transformers.AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.bfloat16).cuda().eval()
    rope_note = {"fp32_model": rope_inv_freq_note(m32), "bf16_model": rope_inv_freq_note(m16)}
    hf32 = [hf_logprobs(m32, ids)[0] for ids in prompts]
    hf16 = [hf_logprobs(m16, ids)[0] for ids in prompts]
    greedy_refs = [hf_greedy(m32, ids, steps) for ids in prompts]
    greedy_bf16 = [hf_greedy(m16, ids, steps)[0] for ids in prompts]  # what bf16 alone does to greedy
    del m32, m16
    torch.cuda.empty_cache()
    results = []
    max_model_len = max(1024, max(prompt_lens) + steps + 16)
    for label, extra_env in variants:
        for kv in kv_dtypes:
            outs = run_pagoda(pagoda, model_dir, prompts, steps, {**os.environ, **extra_env}, kv, max_model_len)
            tags = ([] if label == "default" else [label]) + ([] if kv == "auto" else [f"kv {kv}"])
            result = {"model": name + "".join(f" [{t}]" for t in tags), "variant": label, "kv_cache_dtype": kv,
                      "prompt_lens": prompt_lens, "hf_rope_inv_freq": rope_note}
            result.update(compare(prompts, outs, hf32, hf16, greedy_refs, greedy_bf16))
            if kv != "auto":  # FP8 KV: reported beside bf16 KV's, held only to a sanity bound
                result["logprobs_ok"] = result["logprob_err_mean"] <= 0.5 and result["logprob_err_max"] < float("inf")
                result["greedy_ok"] = True
            results.append(result)
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pagoda", required=True)
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[1] / "data"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--skip-1b", action="store_true")
    ap.add_argument("--kv-cache-dtypes", default="auto", help="comma-separated, e.g. auto,fp8")
    ap.add_argument("--long", type=int, default=0, metavar="N", help="also N-token prompts on the 1B checkpoint")
    ap.add_argument("--long-prompts", type=int, default=1, metavar="K", help="how many --long prompts (each its own)")
    ap.add_argument("--variant", action="append", default=[], metavar="LABEL:VAR=VALUE[,VAR=VALUE]",
                    help="also run pagoda with this extra environment (an A/B comparison in one call)")
    args = ap.parse_args()
    variants = [("default", {})]
    for v in args.variant:
        label, _, assignments = v.partition(":")
        variants.append((label, dict(a.split("=", 1) for a in assignments.split(",") if a)))
    data = Path(args.data)
    kv_dtypes = args.kv_cache_dtypes.split(",")
    results = []
    for name in ("tiny-llama3-hf", "tiny-mistral-spm-hf"):
        results += check_model(name, data / "models" / name, args.pagoda, [9, 40, 300], 24, 1, variants, kv_dtypes)
    if not args.skip_1b:
        with tempfile.TemporaryDirectory() as tmp:
            ckpt = make_random_checkpoint(data / "models" / "llama-3.2-1b", Path(tmp), 0)
            results += check_model("llama-3.2-1b-random", ckpt, args.pagoda, [9, 40, 300], 24, 1, variants, kv_dtypes)
            if args.long:
                results += check_model(f"llama-3.2-1b-random {args.long}", ckpt, args.pagoda, [args.long] * args.long_prompts, 32, 2,
                                       variants, kv_dtypes)
    Path(args.out).write_text(json.dumps({"torch": torch.__version__, "transformers": transformers.__version__,
                                          "results": results}, indent=1))
    print(f"{'checkpoint':36} {'lp err mean/p99':>18} {'hf bf16 mean/p99':>18} {'top1 pagoda/bf16':>17} "
          f"{'greedy agree/decided/hf bf16':>30}  ok")
    ok = True
    for r in results:
        g = " ".join(f"{x['agree']}/{x['decided']}/{x['hf_bf16_agree']}" for x in r["greedy"])
        good = r["logprobs_ok"] and r["greedy_ok"]
        ok &= good
        print(f"{r['model']:36} {r['logprob_err_mean']:8.4f}/{r['logprob_err_p99']:<8.4f} "
              f"{r['hf_bf16_err_mean']:8.4f}/{r['hf_bf16_err_p99']:<8.4f} "
              f"{r['top1_agree_pagoda']:8.3f}/{r['top1_agree_hf_bf16']:<8.3f} {g:>30}  {'PASS' if good else 'FAIL'}")
    for r in results:
        print(r["model"], "hf inv_freq:", r["hf_rope_inv_freq"], "by position:", " ".join(f"{b}: {v['pagoda_mean']:.4f} vs {v['hf_bf16_mean']:.4f}"
                                                   for b, v in r["by_position"].items()))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
