"""The host KV tier end to end: `pagoda serve --kv-offload-memory` with a device cache far smaller than the prompts'
working set. A second round of the same prompts is served from blocks copied back from the host (cached tokens
in usage, pagoda:prefix_cache_host_hits_total), with the same greedy outputs as the first round and as a server
without the tier."""
import random
import unittest

import pagoda_cli
from test_server import Server

ARGS = ("--max-model-len", "256", "--kv-cache-memory", "400KiB", "--max-num-seqs", "2")


def prompts():
    rng = random.Random(7)
    # 10 x 6 full blocks: more than the device cache holds (20 fp32 blocks on the CPU, 40 bf16 on a GPU)
    return [[rng.randrange(3, 512) for _ in range(100)] for _ in range(N)]


N = 10


class HostTierTest(unittest.TestCase):
    def run_rounds(self, server):
        outputs, cached = [], []
        for _ in range(2):
            for p in prompts():
                status, out = server.post("/v1/completions", {"prompt": p, "max_tokens": 8, "temperature": 0})
                self.assertEqual(status, 200, out)
                outputs.append(out["choices"][0]["text"])
                cached.append(out["usage"]["prompt_tokens_details"]["cached_tokens"])
        return outputs, cached

    def test_second_round_hits_the_host_and_outputs_do_not_change(self):
        tiered = Server(*ARGS, "--kv-offload-memory", "4MiB")
        try:
            outputs, cached = self.run_rounds(tiered)
            host_hits = tiered.metric("pagoda:prefix_cache_host_hits_total")
            offloaded = tiered.metric("pagoda:kv_host_offloaded_blocks_total")
            self.assertGreater(tiered.metric("pagoda:kv_host_blocks"), 0)
        finally:
            self.assertEqual(tiered.stop(), 0)
        self.assertEqual(outputs[:N], outputs[N:])
        self.assertEqual(cached[:N], [0] * N)
        self.assertTrue(all(c >= 96 for c in cached[N:]), cached)  # every full block of each prompt
        self.assertGreater(offloaded, 0)
        self.assertGreater(host_hits, 0)

        plain = Server(*ARGS)
        try:
            plain_outputs, plain_cached = self.run_rounds(plain)
            self.assertEqual(plain.metric("pagoda:kv_host_blocks"), 0)
        finally:
            self.assertEqual(plain.stop(), 0)
        self.assertEqual(plain_outputs, outputs)
        self.assertLess(sum(plain_cached), sum(cached))


    def test_bad_settings_are_one_line_errors(self):
        for args, message in [
            (("--kv-offload-memory", "1KiB"), "holds no KV block"),
            (("--kv-offload-memory", "1000000GiB"), "more than the"),
            (("--kv-prefetch-interval-ms", "5"), "needs --kv-offload-memory"),
            (("--kv-offload-memory", "4MiB", "--no-enable-prefix-caching"), "needs prefix caching"),
        ]:
            p = pagoda_cli.run("serve", "--port", "0", *args, check=False, timeout=60)
            self.assertEqual(p.returncode, 1, args)
            self.assertIn(message, p.stderr.strip().splitlines()[-1], args)


if __name__ == "__main__":
    pagoda_cli.main()
