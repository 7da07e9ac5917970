"""`pagoda bench serve --dataset multi-tenant` against `pagoda serve --tenants-file` with the bundled model:
the tenants file the benchmark writes loads in the server, every request reaches the server as its tenant
(the server's per-tenant counters), and the per-tenant results are plausible: the noisy tenant never hits
the prefix cache, tenants with a system prompt do, and the periodic tenant arrives every interval."""
import json
import os
import re
import tempfile
import unittest

import pagoda_cli
from test_server import Server

TENANTS = ["tenant-0", "tenant-1", "tenant-2", "tenant-3", "periodic", "noisy"]


def tenant_requests(server):
    """pagoda:tenant_requests_total by tenant (absent: 0)."""
    _, _, text = server.request("GET", "/metrics", headers={"Authorization": "Bearer sk-bench-tenant-0"})
    counts = {}
    for m in re.finditer(r'^pagoda:tenant_requests_total\{[^}]*tenant="([^"]+)"[^}]*\} (\S+)$', text, re.M):
        counts[m.group(1)] = float(m.group(2))
    return counts


class BenchMultiTenantTest(unittest.TestCase):
    def test_multi_tenant_run(self):
        with tempfile.TemporaryDirectory() as tmp:
            tenants_file = os.path.join(tmp, "tenants.json")
            proc = pagoda_cli.run("bench", "serve", "--mt-tenants", "4", "--mt-write-tenants-file", tenants_file)
            self.assertIn("wrote 6 tenants", proc.stdout)
            with open(tenants_file) as f:
                written = json.load(f)["tenants"]
            self.assertEqual(list(written), TENANTS)
            self.assertEqual(written["noisy"]["keys"], ["sk-bench-noisy"])
            self.assertLess(written["noisy"]["weight"], written["tenant-1"]["weight"])
            self.assertTrue(all(t["share_prefixes"] is False for t in written.values()))

            server = Server("--tenants-file", tenants_file, "--kv-eviction", "lru-k")
            try:
                before = tenant_requests(server)
                out = os.path.join(tmp, "result.json")
                proc = pagoda_cli.run(
                    "bench", "serve", "--base-url", f"http://127.0.0.1:{server.port}", "--dataset", "multi-tenant",
                    "--mt-tenants", "4", "--num-prompts", "40", "--request-rate", "40", "--prefix-len", "64",
                    "--random-input-len", "8", "--random-output-len", "4", "--ignore-eos", "--mt-noisy-input-len", "80",
                    "--mt-noisy-share", "0.25", "--mt-periodic-interval-ms", "100", "--seed", "3", "--json", out)
                after = tenant_requests(server)
            finally:
                self.assertEqual(server.stop(), 0, "".join(server.log[-20:]))
            with open(out) as f:
                r = json.load(f)

        self.assertIn("Tenants (--dataset multi-tenant)", proc.stdout)
        mt = r["multi_tenant"]
        by_name = {t["name"]: t for t in mt["tenants"]}
        self.assertEqual([t["name"] for t in mt["tenants"]], TENANTS)
        self.assertEqual(r["failed"], 0, [q["error"] for q in r["requests"] if not q["success"]][:3])
        self.assertEqual(sum(t["requests"] for t in mt["tenants"]), len(r["requests"]))
        self.assertEqual(mt["overall"]["requests"], len(r["requests"]))
        self.assertEqual(by_name["noisy"]["requests"], 10)  # 0.25 of --num-prompts
        self.assertEqual(len(r["requests"]), 40 + by_name["periodic"]["requests"])

        # Each request reached the server under its tenant's key (the test request, prompt 0, once more).
        for name in TENANTS:
            sent = by_name[name]["requests"] + (1 if r["requests"][0]["tenant"] == name else 0)
            self.assertEqual(after.get(name, 0) - before.get(name, 0), sent, name)

        for q in r["requests"]:
            self.assertEqual(q["prompt_tokens"], q["prompt_len"])
            self.assertEqual(q["prompt_len"], 80 if q["tenant"] == "noisy" else 72)
        for t in mt["tenants"] + [mt["overall"]]:
            if t["requests"]:
                self.assertEqual(t["completed"], t["requests"])
                self.assertGreater(t["median_ttft_ms"], 0)
                self.assertLessEqual(t["median_ttft_ms"], t["p99_ttft_ms"] + 1e-9)
                self.assertAlmostEqual(t["prefix_cache_hit_rate"], t["cached_tokens"] / t["prompt_tokens"])

        # Unique prompts never hit; a tenant's repeated system prompt does (64 of 72 tokens at best).
        self.assertEqual(by_name["noisy"]["cached_tokens"], 0)
        self.assertEqual(by_name["noisy"]["prefix_cache_hit_rate"], 0)
        self.assertGreater(by_name["tenant-0"]["requests"], by_name["tenant-3"]["requests"])  # Zipf
        self.assertGreater(by_name["tenant-0"]["prefix_cache_hit_rate"], 0.3)
        self.assertGreater(by_name["periodic"]["requests"], 3)
        self.assertGreater(by_name["periodic"]["prefix_cache_hit_rate"], 0.3)
        self.assertLessEqual(max(t["prefix_cache_hit_rate"] or 0 for t in mt["tenants"]), 64 / 72)
        self.assertAlmostEqual(mt["overall"]["prefix_cache_hit_rate"], r["total_cached_input_tokens"] / r["total_input_tokens"])

        # The periodic tenant was released every 100 ms (scheduled_time: when the dispatcher let it go).
        periodic = [q["scheduled_time"] for q in r["requests"] if q["tenant"] == "periodic"]
        for k, t in enumerate(periodic):
            self.assertGreaterEqual(t, k * 0.1 - 1e-6)
            self.assertLess(t, k * 0.1 + 0.2, k)  # released on time (slack for a busy machine)


if __name__ == "__main__":
    pagoda_cli.main()
