"""Request tracing and GPU diagnostics of `pagoda serve` on a machine without NVML: --trace-file writes one
JSON line per engine request with ordered engine times, the access log carries the timings, the phase
histograms count every request, the GPU sampler reports itself off (log line and gauge) while the step
record feeds GET /debug/gpu_timeline and --gpu-timeline-file."""
import json
import os
import tempfile
import unittest

import pagoda_cli
from test_server import Server


class ServeTraceTest(unittest.TestCase):
    def test_trace_file_log_metrics_and_timeline(self):
        with tempfile.TemporaryDirectory() as tmp:
            trace = os.path.join(tmp, "trace.jsonl")
            svg = os.path.join(tmp, "timeline.svg")
            server = Server("--trace-file", trace, "--gpu-timeline-file", svg)
            try:
                requests = [
                    {"prompt": "Once upon a time", "max_tokens": 12, "ignore_eos": True},
                    {"prompt": "The dog", "max_tokens": 6, "n": 2, "ignore_eos": True},
                    {"prompt": [1, 403, 407], "max_tokens": 1},
                ]
                for body in requests:
                    status, out = server.post("/v1/completions", {**body, "temperature": 0})
                    self.assertEqual(status, 200, out)
                events = server.sse("/v1/completions", {"prompt": "Lily", "max_tokens": 9, "stream": True,
                                                        "ignore_eos": True})
                self.assertEqual(events[-1], "[DONE]")
                status, chat = server.post("/v1/chat/completions",
                                           {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4})
                self.assertEqual(status, 200, chat)
                num_engine_requests = 1 + 2 + 1 + 1 + 1

                self.assertEqual(server.metric("pagoda:request_prefill_time_seconds_count"), num_engine_requests)
                self.assertEqual(server.metric("pagoda:request_inference_time_seconds_count"), num_engine_requests)
                # TPOT needs two tokens: all but the one-token request.
                self.assertEqual(server.metric("pagoda:request_time_per_output_token_seconds_count"),
                                 num_engine_requests - 1)
                self.assertGreater(server.metric("pagoda:engine_steps_total"), 0)
                self.assertGreater(server.metric("pagoda:engine_busy_seconds_total"), 0)
                self.assertEqual(server.metric("pagoda:engine_step_graph_batch_size"), 0)  # the CPU runs eagerly
                self.assertEqual(server.metric("pagoda:gpu_sampler_enabled"), 0)
                self.assertNotIn("pagoda:gpu_utilization_perc", server.metrics())
                self.assertTrue(any("GPU sampler off:" in line for line in server.log), "".join(server.log))

                status, _, body = server.request("GET", "/debug/gpu_timeline?format=json&bin_ms=50")
                self.assertEqual(status, 200, body)
                timeline = json.loads(body)
                self.assertEqual(timeline["bin_seconds"], 0.05)
                panels = {p["title"]: p for p in timeline["panels"]}
                self.assertIn("sampler off", panels["GPU (NVML)"]["note"])
                steps = {r["name"]: r["values"] for r in panels["Engine steps"]["rows"]}
                self.assertGreater(sum(v for v in steps["decode tokens"] if v), 0)
                self.assertGreater(max(v for v in steps["busy"] if v is not None), 0)
                status, headers, body = server.request("GET", "/debug/gpu_timeline")
                self.assertEqual(status, 200)
                self.assertTrue(body.startswith("<svg"), body[:100])
                status, _, body = server.request("GET", "/debug/gpu_timeline?format=png")
                self.assertEqual(status, 400, body)
                status, _, body = server.request("GET", "/debug/gpu_timeline?bin_ms=abc")
                self.assertEqual(status, 400, body)
                # A number below the normal doubles is a number: too narrow a bin, not "must be a number".
                status, _, body = server.request("GET", "/debug/gpu_timeline?bin_ms=1e-308")
                self.assertEqual(status, 400, body)
                self.assertIn("bins", body)
            finally:
                self.assertEqual(server.stop(), 0)

            access = [line for line in server.log if "POST /v1/" in line]
            self.assertEqual(len(access), 5, access)
            for line in access:
                for field in ("queue=", "prefill=", "ttft=", "decode=", "e2e="):
                    self.assertIn(field, line)
            self.assertTrue(any("choices=2" in line for line in access))

            with open(trace) as f:
                lines = [json.loads(line) for line in f if line.strip()]
            self.assertEqual(len(lines), num_engine_requests)
            self.assertEqual(len({(t["id"], t["choice"]) for t in lines}), num_engine_requests)
            by_tokens = sorted(t["completion_tokens"] for t in lines)
            self.assertEqual(by_tokens, [1, 4, 6, 6, 9, 12])
            for t in lines:
                self.assertEqual(len(t["token_times"]), t["completion_tokens"])
                self.assertLessEqual(0, t["queued"])
                self.assertLessEqual(t["queued"], t["scheduled"])
                self.assertLessEqual(t["scheduled"], t["prefill_done"])
                self.assertEqual(t["token_times"][0], t["prefill_done"])
                self.assertEqual(t["token_times"], sorted(t["token_times"]))
                self.assertLessEqual(t["token_times"][-1], t["finished"])
                self.assertIn(t["finish_reason"], ("length", "stop"))
                self.assertGreater(t["arrival_time"], 1.6e9)
                self.assertEqual(t["preemptions"], 0)
            with open(svg) as f:
                image = f.read()
            self.assertTrue(image.startswith("<svg") and image.rstrip().endswith("</svg>"))
            self.assertIn("Step batch composition", image)

    def test_bad_trace_path_fails_at_start(self):
        proc = pagoda_cli.run("serve", "--port", "0", "--trace-file", "/nonexistent-dir/trace.jsonl", check=False,
                              timeout=120)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("/nonexistent-dir/trace.jsonl", proc.stderr)


if __name__ == "__main__":
    pagoda_cli.main()
