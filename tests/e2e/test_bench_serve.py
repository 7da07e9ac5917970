"""`pagoda bench serve` against `pagoda serve` on loopback with the bundled model: a few hundred requests at
two Poisson rates and all at once, every request accounted for, TTFT <= E2E, exact prompt lengths and
token counts equal to the server's usage and its own counters; chat, prefix, JSONL datasets, concurrency
limit, goodput; the README's example as written; clear errors for an unreachable server, bad flags and
prompts longer than the server's context."""
import json
import os
import socket
import tempfile
import unittest

import pagoda_cli
from test_server import Server

NUM = 100
INPUT_LEN = 24
OUTPUT_LEN = 8


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class BenchServeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server("--max-num-seqs", "64")
        cls.tmp = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        rc = cls.server.stop()
        cls.tmp.cleanup()
        assert rc == 0, f"pagoda serve exited {rc}:\n" + "".join(cls.server.log[-20:])

    def bench(self, *args, check=True):
        out = os.path.join(self.tmp.name, f"result-{len(os.listdir(self.tmp.name))}.json")
        proc = pagoda_cli.run("bench", "serve", "--base-url", f"http://127.0.0.1:{self.server.port}", "--json", out,
                              *args, check=check)
        if not check:
            return proc, None
        with open(out) as f:
            return proc, json.load(f)

    def check_accounting(self, r, num, ignore_eos=True, exact_prompt=True):
        self.assertEqual(r["num_prompts"], num)
        self.assertEqual(len(r["requests"]), num)
        self.assertEqual(r["completed"] + r["failed"], num)
        self.assertEqual(r["failed"], 0, [q["error"] for q in r["requests"] if not q["success"]][:3])
        self.assertEqual(sorted(q["index"] for q in r["requests"]), list(range(num)))
        for q in r["requests"]:
            self.assertTrue(q["success"], q["error"])
            self.assertGreater(q["ttft"], 0)
            self.assertLessEqual(q["ttft"], q["e2el"])
            self.assertGreaterEqual(q["send_time"], q["scheduled_time"])
            self.assertTrue(q["usage_reported"])
            self.assertEqual(len(q["itl"]), q["num_chunks"] - 1)
            if exact_prompt:
                self.assertEqual(q["prompt_tokens"], q["prompt_len"])
            if ignore_eos:
                self.assertEqual(q["output_tokens"], q["output_len"])
                self.assertEqual(q["finish_reason"], "length")
            if q["output_tokens"] > 1:
                self.assertAlmostEqual(q["tpot"], (q["e2el"] - q["ttft"]) / (q["output_tokens"] - 1), places=9)
        self.assertEqual(r["total_input_tokens"], sum(q["prompt_tokens"] for q in r["requests"]))
        self.assertEqual(r["total_output_tokens"], sum(q["output_tokens"] for q in r["requests"]))
        for m in ("ttft", "tpot", "itl", "e2el"):
            self.assertLessEqual(r[f"median_{m}_ms"], r[f"p90_{m}_ms"] + 1e-9, m)
            self.assertLessEqual(r[f"p90_{m}_ms"], r[f"p99_{m}_ms"] + 1e-9, m)
        self.assertAlmostEqual(r["request_throughput"], r["completed"] / r["duration"], places=6)

    def test_rates_and_server_counters(self):
        for rate in ("40", "120", "inf"):
            with self.subTest(rate=rate):
                prompt_before = self.server.metric("pagoda:prompt_tokens_total")
                gen_before = self.server.metric("pagoda:generation_tokens_total")
                proc, r = self.bench("--num-prompts", str(NUM), "--random-input-len", str(INPUT_LEN),
                                     "--random-output-len", str(OUTPUT_LEN), "--random-range-ratio", "0.5",
                                     "--ignore-eos", "--request-rate", rate, "--seed", rate == "inf" and "7" or rate)
                self.check_accounting(r, NUM)
                self.assertIn("Serving Benchmark Result", proc.stdout)
                self.assertIn("Successful requests:                     100", proc.stdout)
                self.assertIn("P99 TTFT (ms):", proc.stdout)
                self.assertIn(f"{NUM}/{NUM} requests", proc.stderr)  # progress lines
                self.assertEqual(r["request_rate"], "inf" if rate == "inf" else float(rate))
                lens = {q["prompt_len"] for q in r["requests"]}
                self.assertGreater(len(lens), 3)  # the range ratio spreads them
                self.assertTrue(all(12 <= n <= 36 for n in lens), lens)
                if rate != "inf":  # Poisson arrivals: the run lasts about NUM / rate
                    self.assertGreater(r["duration"], 0.5 * (NUM - 1) / float(rate))
                # The server's own counters saw exactly these tokens, plus the one test request (prompt 0).
                first = r["requests"][0]
                self.assertEqual(self.server.metric("pagoda:prompt_tokens_total") - prompt_before,
                                 r["total_input_tokens"] + first["prompt_tokens"])
                self.assertEqual(self.server.metric("pagoda:generation_tokens_total") - gen_before,
                                 r["total_output_tokens"] + first["output_tokens"])
                self.assertGreater(len(r["timeline"]["output_tokens_per_s"]), 0)

    def test_chat_prompts_have_exact_lengths(self):
        # The whole chat prompt (template included) has exactly --random-input-len tokens.
        _, r = self.bench("--endpoint", "/v1/chat/completions", "--num-prompts", "30", "--random-input-len", "80",
                          "--random-output-len", "6", "--ignore-eos", "--max-concurrency", "8")
        self.check_accounting(r, 30)
        self.assertEqual(r["endpoint_type"], "openai-chat")
        self.assertTrue(all(q["prompt_tokens"] == 80 for q in r["requests"]), [q["prompt_tokens"] for q in r["requests"]])

    def test_prefix_dataset_hits_the_prefix_cache(self):
        hits_before = self.server.metric("pagoda:prefix_cache_hits_total")
        _, r = self.bench("--dataset", "prefix", "--prefix-len", "64", "--num-prefix-groups", "3", "--num-prompts", "30",
                          "--random-input-len", "8", "--random-output-len", "4", "--ignore-eos", "--seed", "11")
        self.check_accounting(r, 30)
        self.assertTrue(all(q["prompt_len"] == 72 for q in r["requests"]))
        cached = [q["cached_tokens"] for q in r["requests"]]
        self.assertGreaterEqual(sum(c >= 64 for c in cached), 30 - 3, cached)  # all but each group's first
        self.assertEqual(r["total_cached_input_tokens"], sum(cached))
        self.assertGreater(self.server.metric("pagoda:prefix_cache_hits_total"), hits_before)

    def test_concurrency_limit_and_goodput(self):
        _, r = self.bench("--num-prompts", "40", "--random-input-len", "16", "--random-output-len", "6", "--ignore-eos",
                          "--max-concurrency", "3", "--goodput", "ttft:100000", "tpot:100000")
        self.check_accounting(r, 40)
        self.assertEqual(r["max_concurrency"], 3)
        self.assertLessEqual(r["max_concurrent_requests"], 3)
        self.assertAlmostEqual(r["request_goodput"], r["request_throughput"], places=6)
        _, tight = self.bench("--num-prompts", "10", "--random-input-len", "16", "--random-output-len", "6",
                              "--goodput", "ttft:0.000001")
        self.assertEqual(tight["request_goodput"], 0)

    def test_rate_schedule_reports_each_phase(self):
        proc, r = self.bench("--num-prompts", "60", "--random-input-len", "16", "--random-output-len", "4", "--ignore-eos",
                            "--request-rate-schedule", "20:1,80:0.5", "--goodput", "ttft:100000", "--seed", "5")
        self.check_accounting(r, 60)
        phases = r["phases"]
        self.assertEqual([p["rate"] for p in phases], [20, 80])
        self.assertEqual(sum(p["completed"] + p["failed"] for p in phases), 60)
        self.assertGreater(phases[0]["completed"], 5)   # about 20 in the first second
        self.assertGreater(phases[1]["completed"], 20)  # the rest: the last rate goes on past the schedule
        self.assertEqual(phases[0]["request_goodput"] is None, False)
        self.assertIn("Phases", proc.stdout)
        bad, _ = self.bench("--request-rate-schedule", "20:x", check=False)
        self.assertEqual(bad.returncode, 1)
        self.assertIn("--request-rate-schedule '20:x'", bad.stderr)

    def test_random_vocab_size_needs_no_tokenizer(self):
        _, r = self.bench("--num-prompts", "20", "--random-input-len", "10", "--random-output-len", "4", "--ignore-eos",
                          "--random-vocab-size", "512")
        self.check_accounting(r, 20)
        self.assertEqual(r["random_vocab_size"], 512)

    def test_jsonl_dataset(self):
        path = os.path.join(self.tmp.name, "prompts.jsonl")
        with open(path, "w") as f:
            f.write(json.dumps({"prompt": "Once upon a time", "output_len": 5}) + "\n")
            f.write(json.dumps({"prompt": "The little dog"}) + "\n")
            f.write(json.dumps({"prompt": [1, 403, 407, 300]}) + "\n")
        _, r = self.bench("--dataset", "jsonl", "--dataset-path", path, "--num-prompts", "9", "--random-output-len", "3",
                          "--ignore-eos")
        self.check_accounting(r, 9, exact_prompt=False)
        self.assertEqual([q["output_len"] for q in r["requests"][:3]], [5, 3, 3])
        self.assertEqual(r["requests"][2]["prompt_tokens"], 4)  # a token-id prompt is sent as is

    def test_api_key(self):
        server = Server("--api-key", "sk-bench")
        try:
            base = f"http://127.0.0.1:{server.port}"
            proc = pagoda_cli.run("bench", "serve", "--base-url", base, "--api-key", "sk-bench", "--num-prompts", "10",
                                  "--random-input-len", "8", "--random-output-len", "4", "--ignore-eos")
            self.assertIn("Successful requests:                     10", proc.stdout)
            proc = pagoda_cli.run("bench", "serve", "--base-url", base, "--num-prompts", "2", check=False)
            self.assertEqual(proc.returncode, 1)
            self.assertIn("HTTP 401", proc.stderr)
        finally:
            self.assertEqual(server.stop(), 0)

    def test_readme_example_runs(self):
        """The README's `pagoda bench serve` line, as written, against the bundled model's server."""
        with open(os.path.join(os.path.dirname(__file__), "..", "..", "README.md")) as f:
            readme = f.read()
        line = next(l for l in readme.splitlines() if l.startswith("build/cpu/bin/pagoda bench serve"))
        args = line.split("#")[0].split()[3:]  # after "build/cpu/bin/pagoda bench serve"
        _, r = self.bench(*args)
        self.check_accounting(r, int(args[args.index("--num-prompts") + 1]), ignore_eos=False)

    def test_prompts_longer_than_the_context_are_refused_before_sending(self):
        proc, _ = self.bench("--random-input-len", "1024", "--num-prompts", "3", check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("exceeds the server's max_model_len of 512", proc.stderr)
        self.assertIn("--random-input-len", proc.stderr)

    def test_errors_are_clear(self):
        port = free_port()
        proc = pagoda_cli.run("bench", "serve", "--base-url", f"http://127.0.0.1:{port}", "--num-prompts", "2",
                              check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("cannot reach the server", proc.stderr)
        self.assertIn("refused", proc.stderr)
        proc, _ = self.bench("--model", "no-such-model", "--num-prompts", "2", check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("does not exist", proc.stderr)
        proc = pagoda_cli.run("bench", "serve", "--base-url", "https://example.com", check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("https is not supported", proc.stderr)
        for args, message in [(("--request-rate", "-3"), "--request-rate"),
                              (("--request-rate", "fast"), "--request-rate"),
                              (("--dataset", "jsonl"), "--dataset-path"),
                              (("--goodput", "speed:5"), "--goodput"),
                              (("--random-range-ratio", "1.5"), "--random-range-ratio"),
                              (("--extra-body", "[1]"), "--extra-body")]:
            with self.subTest(args=args):
                proc = pagoda_cli.run("bench", "serve", "--base-url", f"http://127.0.0.1:{self.server.port}", *args,
                                      "--num-prompts", "2", check=False)
                self.assertNotEqual(proc.returncode, 0)
                self.assertIn(message, proc.stderr + proc.stdout)


if __name__ == "__main__":
    pagoda_cli.main()
