"""The precision fallback through `pagoda serve`'s flags: with a TPOT target no step can keep, the first judged
window (64 inter-token latencies) moves the engine to the fp8 weights quantized at start-up; the switch is
logged, counted in /metrics and drawn in the GPU timeline; with a TTFT target no prompt can keep, the first judged
window of first tokens (16) does the same. Flags that cannot work are refused at start-up."""
import json
import os
import subprocess
import tempfile
import unittest

import pagoda_cli
from test_server import Server


class ServerFallbackTest(unittest.TestCase):
    def test_switch_logged_counted_and_drawn(self):
        tmp = tempfile.TemporaryDirectory()
        trace = os.path.join(tmp.name, "trace.jsonl")
        server = Server("--fallback-quantization", "fp8", "--slo-tpot-ms", "0.001", "--trace-file", trace)
        try:
            self.assertEqual(server.metric("pagoda:precision_fallback_active"), 0)
            status, out = server.post("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 80,
                                                           "ignore_eos": True, "temperature": 0})
            self.assertEqual(status, 200, out)
            self.assertEqual(out["usage"]["completion_tokens"], 80)
            self.assertEqual(server.metric("pagoda:precision_fallback_active"), 1)
            self.assertEqual(server.metric("pagoda:precision_fallback_switches_total", 'direction="to_fallback"'), 1)
            self.assertEqual(server.metric("pagoda:precision_fallback_switches_total", 'direction="to_primary"'), 0)
            # 65 steps on the served weights (the prompt's and 64 decodes: the 64th latency is the 65th token's).
            self.assertEqual(server.metric("pagoda:precision_fallback_steps_total"), 80 - 65)
            self.assertGreater(server.metric("pagoda:precision_fallback_window_p99_seconds"), 0.000001)
            log = "".join(server.log)
            self.assertIn("precision fallback: fp8 weights quantized at start-up", log)
            self.assertIn("steps now run on the fallback weights", log)
            status, _, body = server.request("GET", "/debug/gpu_timeline?format=json")
            self.assertEqual(status, 200, body)
            panels = {p["title"]: p for p in json.loads(body)["panels"]}
            rows = {r["name"]: r["values"] for r in panels["Engine steps"]["rows"]}
            self.assertGreater(max(v for v in rows["steps on fallback weights"] if v is not None), 0)
        finally:
            server.stop()
        # The request's trace says how many of its tokens the fallback weights computed.
        with open(trace) as f:
            lines = [json.loads(line) for line in f]
        tmp.cleanup()
        self.assertEqual(len(lines), 1)
        self.assertEqual(lines[0]["fallback_tokens"], 80 - 65)

    def test_late_first_tokens_switch_with_the_ttft_target(self):
        # Every inter-token latency is far within --slo-tpot-ms, but no first token can come within --slo-ttft-ms:
        # the 16th request's first token completes the judged window of first tokens.
        server = Server("--fallback-quantization", "fp8", "--slo-tpot-ms", "10000", "--slo-ttft-ms", "0.001")
        try:
            for i in range(15):
                status, out = server.post("/v1/completions", {"prompt": f"Once upon a time {i}", "max_tokens": 2,
                                                               "temperature": 0})
                self.assertEqual(status, 200, out)
            self.assertEqual(server.metric("pagoda:precision_fallback_active"), 0)
            self.assertGreater(server.metric("pagoda:precision_fallback_first_token_p99_seconds"), 0.000001)
            status, out = server.post("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 2, "temperature": 0})
            self.assertEqual(status, 200, out)
            self.assertEqual(server.metric("pagoda:precision_fallback_active"), 1)
            self.assertEqual(server.metric("pagoda:precision_fallback_switches_total", 'direction="to_fallback"'), 1)
            self.assertGreaterEqual(server.metric("pagoda:precision_fallback_primary_prompt_load"), 0)
            self.assertIn("P99 time to first token", "".join(server.log))
        finally:
            server.stop()

    def test_refused_flags(self):
        for flags, message in [(["--fallback-quantization", "fp8"], "need --slo-tpot-ms"),
                               (["--fallback-quantization", "awq", "--slo-tpot-ms", "50"], "pagoda quantize"),
                               (["--fallback-quantization", "fp8", "--fallback-model", "x", "--slo-tpot-ms", "50"],
                                "give one of them")]:
            r = subprocess.run([pagoda_cli.ARGS.pagoda, "serve", "--port", "0", *flags], capture_output=True, text=True,
                               timeout=120)
            self.assertNotEqual(r.returncode, 0, flags)
            self.assertIn(message, r.stderr, flags)


if __name__ == "__main__":
    pagoda_cli.main()
