"""`pagoda serve` and browsers' cross-origin requests (CORS), as vLLM answers them (Starlette's
CORSMiddleware): by default any origin may call the API (Access-Control-Allow-Origin: *) and preflights
are answered without a route or an API key; --allowed-origins, --allowed-methods, --allowed-headers and
--allow-credentials narrow it, and a preflight from elsewhere is a 400 naming what is not allowed."""
import json
import unittest

import pagoda_cli
from test_server import Server


def lower_keys(headers):
    return {k.lower(): v for k, v in headers.items()}


class DefaultCors(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server()

    @classmethod
    def tearDownClass(cls):
        assert cls.server.stop() == 0

    def test_any_origin_may_read_responses(self):
        status, headers, _ = self.server.request("GET", "/v1/models", headers={"Origin": "https://app.example"})
        self.assertEqual(status, 200)
        self.assertEqual(lower_keys(headers).get("access-control-allow-origin"), "*")
        # Streams too, and errors.
        status, headers, _ = self.server.request(
            "POST", "/v1/completions", {"prompt": "Once", "max_tokens": 2, "stream": True},
            headers={"Origin": "https://app.example"})
        self.assertEqual(status, 200)
        self.assertEqual(lower_keys(headers).get("access-control-allow-origin"), "*")
        status, headers, _ = self.server.request("POST", "/v1/completions", {"prompt": 3},
                                                 headers={"Origin": "https://app.example"})
        self.assertEqual(status, 400)
        self.assertEqual(lower_keys(headers).get("access-control-allow-origin"), "*")

    def test_requests_without_origin_get_no_cors_headers(self):
        _, headers, _ = self.server.request("GET", "/v1/models")
        self.assertNotIn("access-control-allow-origin", lower_keys(headers))

    def test_preflight(self):
        status, headers, body = self.server.request("OPTIONS", "/v1/chat/completions", headers={
            "Origin": "https://app.example", "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type"})
        self.assertEqual(status, 200, body)
        h = lower_keys(headers)
        self.assertEqual(h["access-control-allow-origin"], "*")
        self.assertIn("POST", h["access-control-allow-methods"])
        self.assertEqual(h["access-control-allow-headers"], "authorization, content-type")
        self.assertEqual(h["access-control-max-age"], "600")
        # OPTIONS that is not a preflight still reaches the routes (and is not a method they take).
        status, _, _ = self.server.request("OPTIONS", "/v1/models")
        self.assertEqual(status, 405)


class NarrowCors(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server("--allowed-origins", '["https://a.example"]', "--allowed-methods", "GET,POST",
                            "--allowed-headers", "authorization", "--allow-credentials", "--api-key", "sk-1")

    @classmethod
    def tearDownClass(cls):
        assert cls.server.stop() == 0

    def preflight(self, origin, method="POST", headers="authorization"):
        return self.server.request("OPTIONS", "/v1/completions", headers={
            "Origin": origin, "Access-Control-Request-Method": method, "Access-Control-Request-Headers": headers})

    def test_allowed_origin_is_named_with_credentials(self):
        status, headers, body = self.preflight("https://a.example")  # no API key: preflights carry none
        self.assertEqual(status, 200, body)
        h = lower_keys(headers)
        self.assertEqual(h["access-control-allow-origin"], "https://a.example")
        self.assertEqual(h["access-control-allow-credentials"], "true")
        self.assertEqual(h["vary"], "Origin")
        self.assertEqual(h["access-control-allow-methods"], "GET, POST")
        self.assertEqual(h["access-control-allow-headers"], "authorization")
        status, headers, _ = self.server.request("GET", "/v1/models", headers={
            "Origin": "https://a.example", "Authorization": "Bearer sk-1"})
        self.assertEqual(status, 200)
        self.assertEqual(lower_keys(headers)["access-control-allow-origin"], "https://a.example")

    def test_what_is_not_allowed_is_a_400(self):
        for args, what in [(("https://b.example",), "origin"), (("https://a.example", "DELETE"), "method"),
                           (("https://a.example", "POST", "x-custom"), "headers")]:
            with self.subTest(args=args):
                status, headers, body = self.preflight(*args)
                self.assertEqual(status, 400)
                self.assertIn(f"Disallowed CORS {what}", body)
                if what == "origin":  # (as Starlette, an allowed origin is still named on a failed preflight)
                    self.assertNotIn("access-control-allow-origin", lower_keys(headers))
        # A simple request from another origin is answered, but browsers may not read it.
        status, headers, _ = self.server.request("GET", "/v1/models", headers={
            "Origin": "https://b.example", "Authorization": "Bearer sk-1"})
        self.assertEqual(status, 200)
        self.assertNotIn("access-control-allow-origin", lower_keys(headers))

    def test_bad_flag_is_a_one_line_error(self):
        proc = pagoda_cli.run("serve", "--allowed-origins", '["a", 3]', check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("--allowed-origins", proc.stderr)


if __name__ == "__main__":
    pagoda_cli.main()
