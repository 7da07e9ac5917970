"""bench/plot_serve.py draws its three images from stored `pagoda bench serve --json` results
(tests/data/bench), and refuses a file that is not one. matplotlib comes from Debian's python3-matplotlib
(scripts/setup-deps.sh installs it), so a missing matplotlib is a failure, not a skip."""
import glob
import os
import subprocess
import sys
import tempfile
import unittest

import pagoda_cli

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "plot_serve.py")


def python_with_matplotlib():
    for candidate in (sys.executable, "/usr/bin/python3"):
        if candidate and os.path.exists(candidate) and subprocess.run(
                [candidate, "-c", "import matplotlib"], capture_output=True).returncode == 0:
            return candidate
    raise AssertionError("no Python with matplotlib: run scripts/setup-deps.sh (python3-matplotlib)")


class PlotServeTest(unittest.TestCase):
    def test_writes_the_images(self):
        results = sorted(glob.glob(os.path.join(pagoda_cli.ARGS.data, "bench", "*.json")))
        self.assertGreaterEqual(len(results), 3, results)
        with tempfile.TemporaryDirectory() as out:
            proc = subprocess.run([python_with_matplotlib(), SCRIPT, *results, "--out-dir", out],
                                  capture_output=True, text=True, timeout=300)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            for name in ("latency_cdf.png", "latency_vs_rate.png", "throughput_over_time.png"):
                path = os.path.join(out, name)
                self.assertTrue(os.path.exists(path), name)
                with open(path, "rb") as f:
                    data = f.read()
                self.assertEqual(data[:8], b"\x89PNG\r\n\x1a\n", name)
                self.assertGreater(len(data), 10_000, name)  # drawn, not an empty canvas

    def test_rejects_a_file_that_is_not_a_result(self):
        with tempfile.TemporaryDirectory() as out:
            bogus = os.path.join(out, "bogus.json")
            with open(bogus, "w") as f:
                f.write('{"hello": 1}')
            proc = subprocess.run([python_with_matplotlib(), SCRIPT, bogus, "--out-dir", out],
                                  capture_output=True, text=True, timeout=300)
            self.assertNotEqual(proc.returncode, 0)
            self.assertIn("not a `pagoda bench serve --json` result", proc.stderr)


if __name__ == "__main__":
    pagoda_cli.main()
