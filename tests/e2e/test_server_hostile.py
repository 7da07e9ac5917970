"""`pagoda serve` against hostile requests (issue #18): each test is a defect that crashed, froze or
bloated the server before its fix. Deep JSON nesting (a stack overflow), integers that wrapped when
narrowed, a context check that overflowed, wrong JSON types that gave 500s, requests that fan out
without bound, an unauthenticated debug endpoint that drew images of any size, prompts of spaces that
held the I/O threads for seconds, and an accept loop that spun at the file-descriptor limit."""
import http.client
import json
import os
import tempfile
import threading
import time
import unittest

import pagoda_cli
from test_server import Server, assert_error


class HostileRequests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server("--max-request-tokens", "5000")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def assert_still_serving(self):
        status, body = self.server.post("/v1/completions", {"prompt": "Once", "max_tokens": 2})
        self.assertEqual(status, 200, body)

    def test_deep_nesting_is_400(self):
        # ~200 KB: 100k levels in an unknown field of a completion, 30k in a chat message's field.
        deep = "[" * 100000 + "]" * 100000
        status, _, text = self.server.request("POST", "/v1/completions", raw='{"prompt": "x", "junk": %s}' % deep)
        assert_error(self, status, json.loads(text), 400)
        self.assertIn("deeper than 128", text)
        chat = '{"messages": [{"role": "user", "content": "hi", "x": %s}]}' % ("[" * 30000 + "]" * 30000)
        status, _, text = self.server.request("POST", "/v1/chat/completions", raw=chat)
        assert_error(self, status, json.loads(text), 400)
        status, _, text = self.server.request("POST", "/tokenize", raw='{"prompt": "x", "y": %s}' % deep)
        assert_error(self, status, json.loads(text), 400)
        self.assert_still_serving()

    def test_integers_are_range_checked_before_narrowing(self):
        for field in ("n", "top_k", "priority"):
            status, body = self.server.post("/v1/completions", {"prompt": "x", "max_tokens": 2, field: 2**32 + 1})
            assert_error(self, status, body, 400, field)
        # Near INT32_MAX the context check used to overflow and pass.
        status, body = self.server.post("/v1/completions", {"prompt": "Once", "max_tokens": 2**31 - 1})
        assert_error(self, status, body, 400, "max_tokens")
        self.assertIn(str(2**31 - 1 + 2), body["error"]["message"])  # the real sum, not a wrapped one
        self.assert_still_serving()

    def test_wrong_types_on_tokenize_name_the_field(self):
        status, body = self.server.post("/tokenize", {"prompt": "hi", "return_token_strs": "yes"})
        assert_error(self, status, body, 400, "return_token_strs")
        status, body = self.server.post("/tokenize", {"prompt": 5})
        assert_error(self, status, body, 400, "prompt")
        status, body = self.server.post("/detokenize", {"tokens": "1,2"})
        assert_error(self, status, body, 400, "tokens")

    def test_fan_out_is_capped(self):
        status, body = self.server.post("/v1/completions", {"prompt": ["a"] * 1025, "max_tokens": 1})
        assert_error(self, status, body, 400, "prompt")
        status, body = self.server.post("/v1/completions", {"prompt": ["a"] * 9, "n": 128, "max_tokens": 1})
        assert_error(self, status, body, 400, "prompt")
        # (prompt + max_tokens) x n over the prompts, against --max-request-tokens 5000.
        status, body = self.server.post("/v1/completions", {"prompt": ["Once"] * 20, "n": 3, "max_tokens": 100})
        assert_error(self, status, body, 400, "prompt")
        self.assertIn("limit is 5000", body["error"]["message"])
        status, body = self.server.post("/v1/completions", {"prompt": ["Once"] * 4, "n": 2, "max_tokens": 3})
        self.assertEqual(status, 200, body)
        self.assertEqual(len(body["choices"]), 8)


class DebugEndpoints(unittest.TestCase):
    def test_gpu_timeline_needs_a_key_and_bounds_its_size(self):
        with tempfile.TemporaryDirectory() as d:
            server = Server("--api-key", "k", "--gpu-timeline-file", os.path.join(d, "t.svg"))
            try:
                status, _, _ = server.request("GET", "/debug/gpu_timeline")
                self.assertEqual(status, 401)
                key = {"Authorization": "Bearer k"}
                status, _, text = server.request("GET", "/debug/gpu_timeline?format=json", headers=key)
                self.assertEqual(status, 200, text)
                # The window is clipped to the server's life (a second or so): 0.1 ms bins make about 10,000 of
                # them, a 16 MB SVG that the old bound of 100,000 bins let through.
                time.sleep(0.3)
                status, _, text = server.request("GET", "/debug/gpu_timeline?window_s=3600&bin_ms=0.1", headers=key)
                self.assertEqual(status, 400, text)
                self.assertIn("2000 bins", text)
                self.assertEqual(server.request("GET", "/health")[0], 200)  # probes stay open
            finally:
                server.stop()


class SpacesDoNotFreeze(unittest.TestCase):
    """Two 1.5 MB prompts of spaces on a SentencePiece-style tokenizer held both I/O threads for about 9 s
    each (a quadratic in-place replace) while /health waited."""

    def test_health_answers_while_large_prompts_tokenize(self):
        model = os.path.join(pagoda_cli.ARGS.data, "models", "tiny-mistral-spm-hf")
        server = Server("-m", model, "--max-request-body", str(8 << 20))
        try:
            results = []

            def tokenize():
                t0 = time.monotonic()
                status, body = server.post("/tokenize", {"prompt": " " * 1_500_000}, timeout=60)
                results.append((status, time.monotonic() - t0, body.get("count") if body else None))

            threads = [threading.Thread(target=tokenize) for _ in range(2)]
            for t in threads:
                t.start()
            worst = 0.0
            while any(t.is_alive() for t in threads):
                t0 = time.monotonic()
                self.assertEqual(server.request("GET", "/health", timeout=30)[0], 200)
                worst = max(worst, time.monotonic() - t0)
                time.sleep(0.02)
            for t in threads:
                t.join()
            for status, seconds, count in results:
                self.assertEqual(status, 200)
                self.assertLess(seconds, 10.0 * pagoda_cli.TIME_SCALE)
                self.assertGreater(count, 0)
            self.assertLess(worst, 1.0, "/health waited behind the tokenization")
        finally:
            server.stop()


class FileDescriptorLimit(unittest.TestCase):
    """At EMFILE the accept loop retried at once, burning a core and logging about a million lines a second.
    Now it backs off, logs once per episode and closes idle keep-alive connections to make room."""

    def test_idle_connections_make_room_and_the_log_stays_quiet(self):
        server = Server("--timeout-keep-alive", "120", max_open_files=48)
        try:
            idle = []
            for i in range(120):  # far more keep-alive connections than descriptors
                conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
                conn.request("GET", "/health")
                self.assertEqual(conn.getresponse().status, 200, f"connection {i}")
                idle.append(conn)  # kept open (and idle) from the client's side
            accept_lines = [line for line in server.log if "accept:" in line]
            self.assertGreater(len(accept_lines), 0, "the limit was never reached")
            self.assertLess(len(accept_lines), 200, "the accept loop logged every retry")
            for conn in idle:
                conn.close()
            status, body = server.post("/v1/completions", {"prompt": "Once", "max_tokens": 2})
            self.assertEqual(status, 200, body)
        finally:
            server.stop()


if __name__ == "__main__":
    pagoda_cli.main()
