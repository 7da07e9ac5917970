"""`pagoda generate` / `tokenize` / `detokenize` on the bundled stories260K model against llama2.c's
greedy references, the vLLM prompt-logprobs convention checked against run.c's logits, and errors."""
import json
import math
import os
import shutil
import struct
import tempfile
import unittest

import pagoda_cli
from pagoda_cli import read_jsonl, run, run_json


def data(*parts):
    return os.path.join(pagoda_cli.ARGS.data, *parts)


def log_softmax_at(row, token):
    m = max(row)
    lse = m + math.log(sum(math.exp(v - m) for v in row))
    return row[token] - lse


class GenerateGolden(unittest.TestCase):
    def test_text_prompts_reproduce_llama2c(self):
        for ref in read_jsonl(data("refs", "stories260K_greedy.jsonl")):
            n = len(ref["output_ids"])
            out = run_json("generate", "--json", "--ignore-eos", "--max-tokens", str(n), "--prompt", ref["prompt"])
            self.assertEqual(out["prompt_ids"], ref["prompt_ids"], ref["prompt"])
            self.assertEqual(out["output_ids"], ref["output_ids"], ref["prompt"])
            self.assertEqual(ref["prompt"] + out["text"], ref["output_text"], ref["prompt"])
            self.assertEqual(out["finish_reason"], "length")

    def test_prompt_ids_reproduce_llamacpp(self):
        for ref in read_jsonl(data("refs", "stories260K_llamacpp_greedy.jsonl")):
            ids = ",".join(map(str, ref["prompt_ids"]))
            out = run_json("generate", "--json", "--ignore-eos", "--max-tokens", str(len(ref["output_ids"])),
                           "--prompt-ids", ids)
            self.assertEqual(out["output_ids"], ref["output_ids"], ref["prompt"])

    def test_eos_stops_generation(self):
        # Without --ignore-eos the run stops at EOS (id 2) or at max tokens; either way it says which.
        out = run_json("generate", "--json", "--max-tokens", "400", "--prompt", "Once upon a time")
        self.assertIn(out["finish_reason"], ("stop", "length"))
        if out["finish_reason"] == "stop":
            self.assertEqual(out["output_ids"][-1], 2)
        self.assertNotIn(2, out["output_ids"][:-1])


class Logprobs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import json
        with open(data("refs", "stories260K_runc_logits.json")) as f:
            cls.meta = json.load(f)[0]
        rows, vocab = cls.meta["shape"]
        with open(data("refs", cls.meta["file"]), "rb") as f:
            flat = struct.unpack(f"<{rows * vocab}f", f.read())
        cls.logits = [flat[r * vocab:(r + 1) * vocab] for r in range(rows)]

    def test_prompt_logprobs_follow_vllm_convention(self):
        ids = self.meta["input_ids"][:12]
        out = run_json("generate", "--json", "--max-tokens", "1", "--prompt-logprobs", "3",
                       "--prompt-ids", ",".join(map(str, ids)))
        plp = out["prompt_logprobs"]
        self.assertEqual(len(plp), len(ids))
        self.assertIsNone(plp[0])
        for i in range(1, len(ids)):
            entries = {e["id"]: e["logprob"] for e in plp[i]}
            self.assertIn(ids[i], entries, f"prompt token {i} missing from its entry")
            self.assertGreaterEqual(len(entries), 3)
            for tok, lp in entries.items():
                self.assertAlmostEqual(lp, log_softmax_at(self.logits[i - 1], tok), delta=1e-4)

    def test_generated_logprobs_are_raw_distribution(self):
        ids = self.meta["prompt_ids"]
        out = run_json("generate", "--json", "--max-tokens", "3", "--logprobs", "2",
                       "--prompt-ids", ",".join(map(str, ids)))
        self.assertEqual(len(out["logprobs"]), 3)
        for step, entries in enumerate(out["logprobs"]):
            self.assertEqual(entries[0]["id"], out["output_ids"][step])  # greedy: the top entry was sampled
            row = self.logits[len(ids) - 1 + step]
            for e in entries:
                self.assertAlmostEqual(e["logprob"], log_softmax_at(row, e["id"]), delta=1e-4)


class Sampling(unittest.TestCase):
    def test_seeded_sampling_is_reproducible(self):
        args = ["generate", "--json", "--max-tokens", "40", "--temperature", "0.9", "--top-p", "0.95",
                "--prompt", "Once upon a time"]
        a = run_json(*args, "--seed", "11")
        b = run_json(*args, "--seed", "11")
        c = run_json(*args, "--seed", "12")
        self.assertEqual(a["output_ids"], b["output_ids"])
        self.assertNotEqual(a["output_ids"], c["output_ids"])


class ConstrainedOutput(unittest.TestCase):
    """`pagoda generate` with the server's output constraints, as llama.cpp's -j/--json-schema."""

    SCHEMA = {"type": "object", "properties": {"hero": {"type": "string", "maxLength": 12},
                                               "age": {"type": "integer", "minimum": 1, "maximum": 99}},
              "required": ["hero", "age"]}

    def test_json_schema_output_validates(self):
        import jsonschema
        for seed in range(4):
            out = run_json("generate", "--json", "--temperature", "1", "--seed", str(seed), "--max-tokens", "200",
                           "--json-schema", json.dumps(self.SCHEMA), "Once upon a time")
            self.assertEqual(out["finish_reason"], "stop", out["text"])
            jsonschema.validate(json.loads(out["text"]), self.SCHEMA)
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            json.dump(self.SCHEMA, f)
            f.flush()
            out = run_json("generate", "--json", "--json-schema-file", f.name, "Once upon a time")
            jsonschema.validate(json.loads(out["text"]), self.SCHEMA)

    def test_regex_and_choice(self):
        out = run_json("generate", "--json", "--regex", "[A-Z][a-z]+ (is|was) [0-9]{2}", "Lily")
        self.assertRegex(out["text"], r"^[A-Z][a-z]+ (is|was) [0-9]{2}$")
        out = run_json("generate", "--json", "--choice", "happy", "--choice", "sad ☹", "Lily was")
        self.assertIn(out["text"], ["happy", "sad ☹"])

    def test_bad_constraints_are_one_line_errors(self):
        for args, words in [(["--regex", "a", "--choice", "b"], "at most one"),
                            (["--json-schema", "{not json"], "not valid JSON"),
                            (["--json-schema", '{"type": "array", "uniqueItems": true}'], "uniqueItems"),
                            (["--regex", "(a)\\1"], "backreferences")]:
            proc = run("generate", *args, "Once", check=False)
            self.assertEqual(proc.returncode, 1, proc.stderr)
            self.assertIn(words, proc.stderr)


class Tokenize(unittest.TestCase):
    def test_jsonl_round_trip(self):
        refs = read_jsonl(data("refs", "stories260K_greedy.jsonl"))
        import json
        stdin = "".join(json.dumps({"text": r["prompt"]}) + "\n" for r in refs)
        lines = run("tokenize", "--jsonl", "--add-special-tokens", stdin=stdin).stdout.splitlines()
        self.assertEqual([json.loads(l)["ids"] for l in lines], [r["prompt_ids"] for r in refs])
        stdin = "".join(json.dumps({"ids": r["output_ids"]}) + "\n" for r in refs)
        lines = run("detokenize", "--jsonl", stdin=stdin).stdout.splitlines()
        for r, line in zip(refs, lines):
            text = json.loads(line)["text"]
            self.assertTrue(r["output_text"].endswith(text.lstrip(" ")), r["prompt"])


class HfCheckpoint(unittest.TestCase):
    def test_checkpoint_rope_frequencies_reproduce_transformers_references(self):
        # The references were made with RoPE frequencies rounded to bf16 (tests/data/README.md).
        model = data("models", "tiny-mistral-spm-hf")
        with open(data("refs", "hf_tiny-mistral-spm-hf.json"), encoding="utf-8") as f:
            ref = json.load(f)
        for gen in ref["generations"]:
            out = run_json("generate", "-m", model, "--rope-freq-dtype", "checkpoint", "--json", "--ignore-eos",
                           "--max-tokens", str(len(gen["greedy_ids"])),
                           "--prompt-ids", ",".join(map(str, gen["prompt_ids"])))
            self.assertEqual(out["output_ids"], gen["greedy_ids"], gen["prompt"])

    def test_unknown_rope_frequency_dtype_is_rejected(self):
        p = run("generate", "--rope-freq-dtype", "bf16", "--prompt", "hi", check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("rope-freq-dtype", p.stderr)


class Inspect(unittest.TestCase):
    def test_w8a8_and_kv_cache_sizes(self):
        p = run("inspect", "--model", data("models", "quant", "ct-fp8-dynamic"))
        self.assertIn("fp8-channel g128 W8A8 (fp8-per-token)", p.stdout)
        # 2 layers x 4 KV heads x K and V, head_dim 16: 1024 bytes in fp32, 512 in bf16, 272 in fp8 (+ exponents).
        self.assertIn("kv cache:      1024 bytes per token (fp32 on the CPU), 512 in bf16 (the GPU), 272 with "
                      "--kv-cache-dtype fp8", p.stdout)


class Errors(unittest.TestCase):
    def test_missing_model_is_one_line_error(self):
        p = run("generate", "--model", "/nonexistent/model.gguf", "--prompt", "hi", check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("/nonexistent/model.gguf", p.stderr)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)

    def test_truncated_gguf_is_reported_not_crashed(self):
        src = data("..", "..", "models", "stories260K.gguf")
        with tempfile.TemporaryDirectory() as tmp:
            for size in (10, 2000, 600000):
                path = os.path.join(tmp, f"cut{size}.gguf")
                with open(src, "rb") as f, open(path, "wb") as g:
                    g.write(f.read(size))
                p = run("generate", "--model", path, "--prompt", "hi", check=False)
                self.assertEqual(p.returncode, 1, p.stderr)
                self.assertIn(path, p.stderr)

    def test_kv_cache_dtypes(self):
        ok = run("generate", "--kv-cache-dtype", "fp8", "--prompt", "Once upon a time", "--max-tokens", "8", check=False)
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertIn("fp8", ok.stderr)  # the start-up log names the pool's dtype
        p = run("generate", "--kv-cache-dtype", "bf16", "--prompt", "hi", check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("fp32 (auto), fp16 or fp8", p.stderr.strip().splitlines()[-1])
        ok = run("generate", "--kv-cache-dtype", "fp16", "--prompt", "Once upon a time", "--max-tokens", "8", check=False)
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertIn("f16", ok.stderr.lower())  # the start-up log names the pool's dtype
        p = run("generate", "--kv-cache-dtype", "int4", "--prompt", "hi", check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("kv-cache-dtype", p.stderr)

    def test_out_of_vocabulary_prompt_id(self):
        p = run("generate", "--prompt-ids", "1,99999", check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("99999", p.stderr)

    def test_prompt_longer_than_context(self):
        p = run("generate", "--max-model-len", "4", "--prompt", "Once upon a time there was", check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("max_model_len", p.stderr)

    def test_prompt_and_prompt_ids_are_exclusive(self):
        p = run("generate", "--prompt", "hi", "--prompt-ids", "1", check=False)
        self.assertEqual(p.returncode, 1)


if __name__ == "__main__":
    pagoda_cli.main()
