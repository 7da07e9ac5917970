"""`pagoda generate --prompts-file` and `pagoda bench throughput`: many requests through the
continuous-batching engine at once, in input order, with a KV pool small enough to force preemption."""
import json
import os
import tempfile
import unittest

import pagoda_cli
from pagoda_cli import read_jsonl, run, run_json


def data(*parts):
    return os.path.join(pagoda_cli.ARGS.data, *parts)


class PromptsFile(unittest.TestCase):
    def test_batched_greedy_matches_references_under_preemption(self):
        refs = read_jsonl(data("refs", "stories260K_greedy.jsonl"))
        lines = []
        for i in range(4):  # each reference four times, interleaved with sampled requests
            for ref in refs:
                lines.append({"prompt": ref["prompt"], "max_tokens": len(ref["output_ids"]), "ignore_eos": True,
                              "temperature": 0})
                lines.append({"prompt_ids": ref["prompt_ids"], "max_tokens": 20 + i, "temperature": 0.8,
                              "seed": i, "top_p": 0.9})
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
            f.write("\n".join(json.dumps(l) for l in lines) + "\n")
            path = f.name
        try:
            p = run("generate", "--prompts-file", path, "--kv-cache-memory", "600KiB", "--max-model-len", "480", "--max-num-seqs", "16",
                    "--max-num-batched-tokens", "64")
        finally:
            os.unlink(path)
        outs = [json.loads(l) for l in p.stdout.splitlines()]
        self.assertEqual(len(outs), len(lines))
        k = 0
        for i in range(4):
            for ref in refs:
                self.assertEqual(outs[k]["prompt_ids"], ref["prompt_ids"])
                self.assertEqual(outs[k]["output_ids"], ref["output_ids"], ref["prompt"])
                self.assertEqual(outs[k]["finish_reason"], "length")
                self.assertEqual(outs[k + 1]["usage"]["completion_tokens"], len(outs[k + 1]["output_ids"]))
                k += 2
        # Identical seeded requests give identical samples, whatever else ran beside them.
        self.assertEqual(outs[1]["output_ids"], run_json(
            "generate", "--json", "--prompt-ids", ",".join(map(str, refs[0]["prompt_ids"])), "--max-tokens", "20",
            "--temperature", "0.8", "--seed", "0", "--top-p", "0.9")["output_ids"])

    def test_bad_line_names_file_line_and_field(self):
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
            f.write('{"prompt": "hi"}\n{"prompt": "x", "temperature": "hot"}\n')
            path = f.name
        try:
            p = run("generate", "--prompts-file", path, check=False)
        finally:
            os.unlink(path)
        self.assertEqual(p.returncode, 1)
        self.assertIn(f"{path}:2", p.stderr)
        self.assertIn("temperature", p.stderr)


    def run_request_lines(self, good, bad):
        """`generate --prompts-file` on [good, bad] (refused whole, naming line 2 and the field), then on [good]."""
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
            f.write(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
            path = f.name
        try:
            rejected = run("generate", "--prompts-file", path, "--json", check=False)
            with open(path, "w") as f:
                f.write(json.dumps(good) + "\n")
            out = json.loads(run("generate", "--prompts-file", path, "--json").stdout.splitlines()[0])
        finally:
            os.unlink(path)
        self.assertEqual(rejected.returncode, 1)  # the second line is rejected before anything runs
        self.assertIn(f"{path}:2", rejected.stderr)
        return rejected.stderr, out

    def test_logit_bias_in_a_request_file(self):
        err, out = self.run_request_lines(
            {"prompt": "Once upon a time", "max_tokens": 3, "temperature": 0, "ignore_eos": True, "logit_bias": {"300": 100}},
            {"prompt": "x", "logit_bias": {"300": 500}})
        self.assertIn("logit_bias", err)
        self.assertEqual(out["output_ids"], [300, 300, 300])

    def test_allowed_token_ids_in_a_request_file(self):
        err, out = self.run_request_lines(
            {"prompt": "Once upon a time", "max_tokens": 6, "temperature": 1, "seed": 5, "ignore_eos": True,
             "allowed_token_ids": [301, 300]},
            {"prompt": "x", "allowed_token_ids": []})
        self.assertIn("allowed_token_ids", err)
        self.assertEqual(len(out["output_ids"]), 6)
        self.assertTrue(set(out["output_ids"]) <= {300, 301}, out["output_ids"])


class BenchThroughput(unittest.TestCase):
    def test_reports_throughput_and_prefix_hits(self):
        out = run_json("bench", "throughput", "--num-prompts", "32", "--input-len", "64", "--output-len", "16",
                       "--prefix-len", "48", "--json")
        self.assertEqual(out["num_failed"], 0)
        self.assertGreater(out["output_tokens_per_second"], 0)
        self.assertGreater(out["prefix_cache_hit_rate"], 0.3)  # 48 of 64 prompt tokens are shared
        out = run_json("bench", "throughput", "--num-prompts", "8", "--input-len", "64", "--output-len", "16",
                       "--prefix-len", "48", "--no-enable-prefix-caching", "--json")
        self.assertEqual(out["prefix_cache_hit_rate"], 0)

    def test_lru_k_eviction(self):
        out = run_json("bench", "throughput", "--num-prompts", "32", "--input-len", "64", "--output-len", "16",
                       "--prefix-len", "48", "--kv-eviction", "lru-k", "--lru-k", "3", "--lru-k-correlated-ms", "0",
                       "--json")
        self.assertEqual(out["num_failed"], 0)
        self.assertGreater(out["prefix_cache_hit_rate"], 0.3)
        # Bad values and combinations fail before the model loads, naming the flag.
        for argv, says in ((["--lru-k", "3"], "need --kv-eviction lru-k"),
                           (["--kv-eviction", "lru-k", "--lru-k", "0"], "--lru-k"),
                           (["--kv-eviction", "lru-k", "--lru-k-correlated-ms", "-1"], "--lru-k-correlated-ms"),
                           (["--kv-eviction", "lfu"], "--kv-eviction")):
            p = run("bench", "throughput", "--num-prompts", "1", *argv, check=False)
            self.assertNotEqual(p.returncode, 0, argv)
            self.assertIn(says, p.stderr, argv)


class BenchLatency(unittest.TestCase):
    def test_reports_prefill_decode_and_end_to_end(self):
        out = run_json("bench", "latency", "--batch-size", "3", "--input-len", "40", "--output-len", "12",
                       "--num-iters", "3", "--num-iters-warmup", "1", "--json")
        self.assertEqual((out["batch_size"], out["input_len"], out["output_len"], out["num_iters"]), (3, 40, 12, 3))
        for key in ("ttft_seconds", "tpot_seconds", "e2e_seconds"):
            d = out[key]
            self.assertGreater(d["min"], 0, key)
            self.assertLessEqual(d["min"], d["median"], key)
            self.assertLessEqual(d["median"], d["p90"], key)
            self.assertLessEqual(d["p90"], d["p99"], key)
        # The first token comes before the end, and 11 decode steps take most of the rest.
        self.assertLess(out["ttft_seconds"]["median"], out["e2e_seconds"]["median"])
        self.assertLessEqual(11 * out["tpot_seconds"]["min"], out["e2e_seconds"]["median"])
        self.assertAlmostEqual(out["decode_tokens_per_second"], 3 * out["decode_tokens_per_second_per_sequence"])

    def test_bad_flags_are_one_line_errors(self):
        p = run("bench", "latency", "--batch-size", "0", check=False)
        self.assertNotEqual(p.returncode, 0)
        p = run("bench", "latency", "--device", "tpu", check=False)
        self.assertNotEqual(p.returncode, 0)
        # Engine options: a context beyond the model's (512 positions) is refused, as vLLM refuses it, and counts of
        # 0 say what they must be (CLI11's own check said "0 not in range 0 to 1.79e308").
        for flags, message in ((["--max-model-len", "99999"], "larger than the model's context (512"),
                               (["--max-model-len", "0"], "must be a number above 0"),
                               (["--max-num-seqs", "0"], "must be a number above 0, not 0"),
                               (["--engine-seed", "18446744073709551616"], "must be an integer from 0 to"),
                               (["--block-size", "100000"], "not in range 1 to 1024")):
            p = run("bench", "latency", *flags, "--num-iters", "1", check=False)
            self.assertNotEqual(p.returncode, 0, flags)
            self.assertIn(message, p.stderr, flags)

    def test_requests_that_end_early_are_an_error_not_a_speed(self):
        # 40 + 64 tokens do not fit a 64-token context: the requests stop at its end, and a time per output token
        # divided by --output-len would be a made-up speed (the old binary printed one).
        p = run("bench", "latency", "--input-len", "40", "--output-len", "64", "--max-model-len", "64",
                "--num-iters", "1", "--json", check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("generated 24 tokens, not 64", p.stderr)


if __name__ == "__main__":
    pagoda_cli.main()
