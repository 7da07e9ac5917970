"""`pagoda plan` through the binary: its table and JSON for the Llama-3-8B config (no weights in the repository:
the command reads config.json only), the overrides, and its one-line errors. The model's numbers are tested
against the measured H200 table in tests/unit/plan."""
import os
import unittest

import pagoda_cli
from pagoda_cli import run, run_json


def data(*parts):
    return os.path.join(pagoda_cli.ARGS.data, *parts)


class Plan(unittest.TestCase):
    def setUp(self):
        self.llama = data("models", "llama-3-8b")

    def test_json_has_every_cell_and_a_pareto_front(self):
        j = run_json("plan", "-m", self.llama, "--json")
        self.assertEqual(j["context_len"], 128)
        self.assertEqual(j["input_len"], 1024)
        self.assertEqual(j["model"]["layers"], 32)
        cells = {(c["precision"], c["batch_size"]) for c in j["decode"]}
        self.assertEqual(cells, {(p, b) for p in ("bf16", "fp8", "int8", "awq") for b in (1, 4, 16, 64, 256)})
        front = [c for c in j["decode"] if c["pareto"]]
        self.assertTrue(front)
        for a in front:  # no point beats a Pareto point
            for b in j["decode"]:
                self.assertFalse(b["step_seconds"] < a["step_seconds"]
                                 and b["tokens_per_second"] > a["tokens_per_second"])
        for c in j["decode"]:
            self.assertAlmostEqual(c["tokens_per_second"], c["batch_size"] / c["step_seconds"],
                                   delta=1e-6 * c["tokens_per_second"])
            parts = c["step"]["breakdown_seconds"]
            self.assertAlmostEqual(sum(parts.values()), c["step_seconds"], delta=1e-12)
        self.assertEqual([p["precision"] for p in j["prefill"]], ["bf16", "fp8", "int8", "awq"])
        # Weights streamed by a step: bf16 all linears and the lm_head (15.0 GB), W4A16 about a third.
        bf16 = next(c for c in j["decode"] if c["precision"] == "bf16" and c["batch_size"] == 1)
        awq = next(c for c in j["decode"] if c["precision"] == "awq" and c["batch_size"] == 1)
        self.assertAlmostEqual(bf16["step"]["weight_bytes"] / 1e9, 15.01, places=2)
        self.assertLess(awq["step"]["weight_bytes"], bf16["step"]["weight_bytes"] / 2.5)

    def test_table_and_overrides(self):
        out = run("plan", "-m", self.llama, "--batch-sizes", "1,8", "--precisions", "bf16,awq", "--context-len", "2048",
                  "--input-len", "512").stdout
        self.assertIn("decode at 2048 tokens of context", out)
        self.assertIn("prefill of one 512-token prompt", out)
        self.assertIn("W4A16 g128", out)
        self.assertNotIn("FP8 W8A8", out)
        base = run_json("plan", "-m", self.llama, "--json", "--batch-sizes", "1", "--precisions", "bf16")
        slow = run_json("plan", "-m", self.llama, "--json", "--batch-sizes", "1", "--precisions", "bf16",
                        "--bandwidth-gbs", "2100", "--step-overhead-us", "0")
        self.assertEqual(slow["device_profile"]["bandwidth_gbs"], 2100)
        self.assertGreater(slow["decode"][0]["step_seconds"], 1.8 * base["decode"][0]["step_seconds"])
        fp8_kv = run_json("plan", "-m", self.llama, "--json", "--batch-sizes", "64", "--precisions", "bf16",
                          "--kv-cache-dtype", "fp8", "--context-len", "4096")
        self.assertEqual(fp8_kv["kv_cache_dtype"], "fp8")
        # 64 x 4096 tokens x 32 layers x 2 x 8 heads x (128 codes + 1 exponent byte)
        self.assertEqual(fp8_kv["decode"][0]["step"]["kv_bytes"], 64 * 4096 * 32 * 2 * 8 * 129)

    def test_gguf_metadata_and_errors(self):
        run_json("plan", "--json")  # the bundled stories260K.gguf
        p = run("plan", "-m", "/nonexistent/model", check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("/nonexistent/model", p.stderr)
        p = run("plan", "-m", self.llama, "--device-profile", "a100", check=False)
        self.assertNotEqual(p.returncode, 0)


if __name__ == "__main__":
    pagoda_cli.main()
