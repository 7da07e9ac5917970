"""`pagoda quantize`: --method rtn reproduces the independent packer's files (refs in models/quant/, made by
make_quant_refs.py) byte for byte, AWQ output loads and beats RTN g128 in perplexity, the error table, and the
one-line errors (exit 1) for bad input."""
import filecmp
import json
import os
import tempfile
import unittest

import pagoda_cli
from pagoda_cli import run, run_json


def data(*parts):
    return os.path.join(pagoda_cli.ARGS.data, *parts)


RTN_VARIANTS = {
    "awq-w4-g128-gemm": ["--bits", "4", "--group-size", "128"],
    "awq-w4-g32-gemm": ["--bits", "4", "--group-size", "32"],
    "ct-w8a16-channel": ["--bits", "8"],
    "ct-fp8-dynamic": ["--bits", "8", "--format", "fp8"],
}


def source():
    return data("models", "quant", "tinystories-656k")


def quantize(out, *argv, check=True):
    return run("quantize", "--model", source(), "--out", out, *argv, check=check, timeout=600)


def perplexity(model):
    return run_json("eval", "perplexity", "--json", "--model", model, "--text-file",
                    data("text", "tinystories_valid_part1.txt"), "--ctx-size", "256", "--chunks", "20")["perplexity"]


class RoundTrip(unittest.TestCase):
    def test_rtn_reproduces_the_reference_files(self):
        with tempfile.TemporaryDirectory() as tmp:
            for name, argv in RTN_VARIANTS.items():
                with self.subTest(name):
                    out = os.path.join(tmp, name)
                    proc = quantize(out, "--method", "rtn", *argv)
                    ref = data("models", "quant", name)
                    self.assertTrue(filecmp.cmp(os.path.join(out, "model.safetensors"),
                                                os.path.join(ref, "model.safetensors"), shallow=False))
                    with open(os.path.join(out, "config.json")) as f, open(os.path.join(ref, "config.json")) as g:
                        self.assertEqual(json.load(f), json.load(g))
                    self.assertIn("rel RMS error", proc.stderr)
                    self.assertIn("14 linears quantized", proc.stderr)
                    self.assertTrue(os.path.exists(os.path.join(out, "tokenizer.json")))

    def test_awq_beats_rtn_and_is_deterministic(self):
        # A small calibration (32 lines, blocks of 256) keeps this to seconds; the full default is recorded in
        # docs/QUANTIZATION.md.
        small = ["--calibration-samples", "32", "--calibration-seq-len", "256", "--group-size", "128"]
        with tempfile.TemporaryDirectory() as tmp:
            awq, awq2, rtn = (os.path.join(tmp, n) for n in ("awq", "awq2", "rtn"))
            proc = quantize(awq, "--method", "awq", *small)
            self.assertIn("MSE awq", proc.stderr)
            quantize(awq2, "--method", "awq", "-q", *small)
            self.assertTrue(filecmp.cmp(os.path.join(awq, "model.safetensors"), os.path.join(awq2, "model.safetensors"),
                                        shallow=False))
            quantize(rtn, "--method", "rtn", "-q", "--group-size", "128")
            p_awq, p_rtn = perplexity(awq), perplexity(rtn)
            self.assertLess(p_awq, p_rtn, f"AWQ {p_awq} against RTN {p_rtn}")


class Errors(unittest.TestCase):
    def assert_fails(self, message, out, *argv, model=None):
        proc = run("quantize", "--model", model or source(), "--out", out, *argv, check=False)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, proc.stderr)
        self.assertTrue(lines[0].startswith("error: "), lines[0])
        self.assertIn(message, lines[0])

    def test_bad_input(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "out")
            self.assert_fails("no such model", out, model=os.path.join(tmp, "missing"))
            self.assert_fails("GGUF input is not supported", out,
                              model=os.path.join(pagoda_cli.ARGS.data, "..", "..", "models", "stories260K.gguf"))
            self.assert_fails("already quantized", out, model=data("models", "quant", "awq-w4-g128-gemm"))
            self.assert_fails("--group-size 48 does not divide in_features 128", out, "--group-size", "48")
            self.assert_fails("--bits 3: must be 4 or 8", out, "--bits", "3")
            self.assert_fails("--method awq quantizes to 4 bits only", out, "--method", "awq", "--bits", "8")
            self.assert_fails("cannot open the calibration text", out, "--method", "awq", "--calibration-file",
                              os.path.join(tmp, "none.txt"))
            plain = os.path.join(tmp, "plain")
            open(plain, "w").close()
            self.assert_fails("cannot create the directory", os.path.join(plain, "sub"))
            full = os.path.join(tmp, "full")
            os.makedirs(full)
            open(os.path.join(full, "x"), "w").close()
            self.assert_fails("not empty (pass --force", full)
            run("quantize", "--model", source(), "--out", full, "--force", "-q")


if __name__ == "__main__":
    pagoda_cli.main()
